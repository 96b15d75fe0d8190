"""restart_limit in the simulator: the same decisions as OTP's literal pattern (a
transient one_for_one supervisor of its own), run by run (docs/otp-semantics.md
section 4.1). In a tree file: tests/config/test_restart_limit.py."""

from __future__ import annotations

import random

import pytest

from supervision import (
    ChildSpec,
    Event,
    EventKind,
    Restart,
    RestartLimit,
    Strategy,
    SupervisorSpec,
)
from supervision.simulate import Scripted, call, simulate

# -- the simulator: one key decides as OTP's pattern does --------------------------------

LIMIT = RestartLimit(intensity=3, period=10.0)
WATCHED = (EventKind.CHILD_STARTED, EventKind.CHILD_EXITED, EventKind.CHILD_TERMINATED)


def _children(web: ChildSpec | SupervisorSpec) -> list[ChildSpec | SupervisorSpec]:
    return [ChildSpec("a", command=["a"]), web, ChildSpec("b", command=["b"])]


def native(strategy: Strategy, restart: Restart) -> SupervisorSpec:
    web = ChildSpec("web", command=["web"], restart=restart, restart_limit=LIMIT)
    return SupervisorSpec("root", strategy=strategy, intensity=4, children=_children(web))


def otp_pattern(strategy: Strategy, restart: Restart) -> SupervisorSpec:
    """The same child under a transient one_for_one supervisor of its own."""
    own = SupervisorSpec(
        "web_sup",
        intensity=LIMIT.intensity,
        period=LIMIT.period,
        restart=Restart.TRANSIENT,
        children=[ChildSpec("web", command=["web"], restart=restart)],
    )
    return SupervisorSpec("root", strategy=strategy, intensity=4, children=_children(own))


def workers(events: list[Event]) -> list[tuple[float, str, str, int | None]]:
    """What happened to the workers' processes, wherever their supervisor sits."""
    return [
        (round(e.time, 9), e.offender or "", e.context.value, e.pid)
        for e in events
        if e.context in WATCHED and e.offender in ("a", "web", "b")
    ]


def faults(seed: int) -> dict[str, Scripted]:
    """web flaps (runs of 0.5-4 s, some failed starts); a crashes now and then."""
    rng = random.Random(seed)
    web = Scripted(
        [rng.uniform(0.5, 4.0) for _ in range(40)],
        relative=True,
        failed_starts=set(rng.sample(range(2, 30), 4)),
    )
    a = Scripted(sorted(rng.uniform(0, 120) for _ in range(3)))
    return {"web": web, "a": a}


@pytest.mark.parametrize("restart", [Restart.PERMANENT, Restart.TRANSIENT])
@pytest.mark.parametrize(
    "strategy", [Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE]
)
@pytest.mark.parametrize("seed", range(8))
def test_the_simulator_decides_as_the_literal_pattern(strategy, restart, seed):
    model = faults(seed)
    ours = simulate(native(strategy, restart), model, duration=120.0, root_restart_delay=None)
    wrapped = {"a": model["a"], "web_sup/web": model["web"]}
    theirs = simulate(
        otp_pattern(strategy, restart), wrapped, duration=120.0, root_restart_delay=None
    )
    assert workers(ours.events) == workers(theirs.events)
    failed = [e for e in ours.events if e.context is EventKind.CHILD_FAILED]
    gave_up = [
        e
        for e in theirs.events
        if e.context is EventKind.MAX_INTENSITY_REACHED and e.supervisor == "root/web_sup"
    ]
    assert [e.time for e in failed] == [e.time for e in gave_up]
    # The root's own intensity was charged for a only, in both.
    assert not any(e.context is EventKind.MAX_INTENSITY_REACHED for e in ours.events)


def test_the_runs_above_do_contain_a_give_up():
    """The comparison above is not vacuous: most seeds fail web at least once."""
    runs = [
        simulate(native(Strategy.ONE_FOR_ONE, Restart.PERMANENT), faults(s), duration=120.0)
        for s in range(8)
    ]
    assert sum(any(e.context is EventKind.CHILD_FAILED for e in r.events) for r in runs) >= 6


def test_without_the_key_the_same_flapping_stops_the_whole_tree():
    spec = SupervisorSpec(
        "root",
        intensity=4,
        children=_children(ChildSpec("web", command=["web"])),
    )
    result = simulate(spec, faults(0), duration=120.0, root_restart_delay=None)
    assert any(e.context is EventKind.MAX_INTENSITY_REACHED for e in result.events)


def test_a_scripted_reset_empties_the_window_in_the_simulator():
    spec = native(Strategy.ONE_FOR_ONE, Restart.PERMANENT)
    crashes = Scripted([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])  # one a second, six in all

    def web_events(result):
        return [
            (e.time, e.context)
            for e in result.events
            if e.offender == "web"
            and e.context in (EventKind.CHILD_FAILED, EventKind.RESTARTS_RESET)
        ]

    plain = simulate(spec, {"web": crashes}, duration=20.0)
    assert web_events(plain) == [(4.0, EventKind.CHILD_FAILED)]
    report = plain.children["web"]
    assert (report.failed, report.restarts, report.availability) == (1, 3, 0.2)
    reset = simulate(
        spec, {"web": crashes}, duration=20.0, calls=[call(3.5, "reset_restarts", "web")]
    )
    assert reset.calls[0].value == 3
    assert web_events(reset) == [(3.5, EventKind.RESTARTS_RESET)]  # 4, 5, 6: three, allowed
    whole = simulate(
        spec, {"web": Scripted([1.0])}, duration=5.0, calls=[call(2.0, "reset_restarts", None)]
    )
    assert whole.calls[0].value == 0
    assert [
        (e.supervisor, e.detail) for e in whole.events if e.context is EventKind.RESTARTS_RESET
    ] == [("root", "intensity=4 period=5 forgotten=0")]
