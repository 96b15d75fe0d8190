"""Several fault models on one child (issue 39 item 3): combined, each drawing from its
own streams, so adding one leaves the others' draws as they were."""

from __future__ import annotations

import pytest

from supervision import (
    ChildSpec,
    EventKind,
    ExitKind,
    Liveness,
    SpecError,
    SupervisorSpec,
    TcpProbe,
)
from supervision.simulate import (
    Exponential,
    FaultModel,
    Flapping,
    Hang,
    Healthy,
    MemoryGrowth,
    Scripted,
    simulate,
)


def _tree(**child: object) -> SupervisorSpec:
    spec = ChildSpec(id="db", command=["db"], **child)  # type: ignore[arg-type]
    return SupervisorSpec(id="root", intensity=10_000, period=1.0, children=[spec])


def _exits(result: object, kind: ExitKind | None = None) -> list[float]:
    events = result.events  # type: ignore[attr-defined]
    return [
        e.time
        for e in events
        if e.context is EventKind.CHILD_EXITED
        and (kind is None or (e.reason is not None and e.reason.kind is kind))
    ]


def _probe(failures: int) -> Liveness:
    return Liveness(TcpProbe(1, period=1.0, timeout=0.5), failures=failures)


def test_adding_a_flapping_probe_leaves_the_crash_times_as_they_were() -> None:
    spec = _tree(liveness=_probe(failures=1000))  # the probe flaps, never stops it
    crashes = Exponential(mtbf=30.0)
    alone = simulate(spec, {"db": crashes}, duration=3600.0, seed=5)
    both = simulate(spec, {"db": [crashes, Flapping(probability=0.5)]}, duration=3600.0, seed=5)
    assert len(_exits(alone)) > 50
    assert _exits(both) == _exits(alone)
    unhealthy = [e for e in both.events if e.context is EventKind.CHILD_UNHEALTHY]
    assert unhealthy  # the flapping probe is there too
    assert not [e for e in alone.events if e.context is EventKind.CHILD_UNHEALTHY]


def test_adding_a_model_leaves_the_draws_of_the_models_before_it() -> None:
    spec = _tree(liveness=_probe(failures=1000))
    two: list[FaultModel] = [Exponential(mtbf=30.0), Flapping(probability=0.5)]
    three = [*two, Exponential(mtbf=1e9, start_failure_probability=0.5)]
    a = simulate(spec, {"db": two}, duration=3600.0, seed=9)
    b = simulate(spec, {"db": three}, duration=3600.0, seed=9)
    # The third model's start failures shift the restarts' times, not the drawn lives.
    lives_a = _lives(a)
    lives_b = _lives(b)
    assert lives_b[: len(lives_a) // 2] == lives_a[: len(lives_a) // 2]
    assert b.children["db"].start_failures > 0


def _lives(result: object) -> list[float]:
    """How long each process ran, from its start to its crash."""
    events = result.events  # type: ignore[attr-defined]
    lives, began = [], 0.0
    for e in events:
        if e.context is EventKind.CHILD_STARTED:
            began = e.time
        elif e.context is EventKind.CHILD_EXITED:
            lives.append(round(e.time - began, 9))
    return lives


def test_a_hang_a_flapping_probe_and_crashes_at_once() -> None:
    spec = _tree(liveness=_probe(failures=3), shutdown=2.0)
    faults = {"db": [Hang(mean=600.0), Flapping(probability=0.2), Exponential(mtbf=300.0)]}
    result = simulate(spec, faults, duration=6 * 3600.0, seed=3)
    crashed = _exits(result, ExitKind.EXIT_CODE)
    unhealthy = _exits(result, ExitKind.UNHEALTHY)
    assert crashed and unhealthy
    assert "hung" in {state for _, state in result.states["db"]}
    kinds = {e.context for e in result.events}
    assert EventKind.CHILD_HUNG in kinds


def test_a_hung_process_does_not_crash_by_its_drawn_life() -> None:
    # Hangs 5 s after its start; its script would crash it at 10 s: it stays hung.
    faults = {"db": [Hang(after=5.0), Scripted([10.0], relative=True)]}
    result = simulate(_tree(), faults, duration=60.0)
    assert _exits(result) == []
    assert result.states["db"] == [(0.0, "up"), (5.0, "hung")]


def test_the_soonest_end_wins_a_crash_or_a_leak() -> None:
    # The leak reaches its limit 10 s after each start; the script crashes the first
    # process at 4 s only.
    faults = {"db": [MemoryGrowth(rate=1000.0), Scripted([4.0], relative=True)]}
    result = simulate(_tree(memory_limit=10_000), faults, duration=15.0)
    exits = [e for e in result.events if e.context is EventKind.CHILD_EXITED]
    assert [(round(e.time, 6), e.reason.kind if e.reason else None) for e in exits] == [
        (4.0, ExitKind.EXIT_CODE),
        (14.0, ExitKind.MEMORY_LIMIT),
    ]


def test_start_failures_of_every_model_count() -> None:
    # The first process crashes at 1 s; restart attempts 2 (the script's) and 3 (the
    # other model's) fail; the 4th starts.
    faults = {"db": [Scripted([1.0], relative=True, failed_starts={2}), Healthy(failed_starts={3})]}
    result = simulate(_tree(), faults, duration=10.0)
    assert result.children["db"].start_failures == 2
    assert result.children["db"].starts == 2


def test_one_value_may_be_given_by_one_model_and_the_same_by_several() -> None:
    faults = {"db": [Hang(after=1.0, stop_duration=1.5), Healthy(stop_duration=1.5)]}
    simulate(_tree(), faults, duration=10.0)  # the same value: accepted
    with pytest.raises(SpecError, match=r"'db'.*stop_duration.*set it on one model only"):
        simulate(
            _tree(),
            {"db": [Hang(after=1.0, stop_duration=1.0), Exponential(mtbf=5, stop_duration=2.0)]},
            duration=10.0,
        )


def test_hangs_must_agree_on_answers_sigterm() -> None:
    faults = {"db": [Hang(after=1.0), Hang(mean=5.0, answers_sigterm=True)]}
    with pytest.raises(SpecError, match="answers_sigterm"):
        simulate(_tree(), faults, duration=10.0)


@pytest.mark.parametrize("entry", ["crash", [], [Hang(after=1.0), "crash"], {"x": 1}])
def test_a_wrong_model_is_refused_listing_every_model(entry: object) -> None:
    with pytest.raises(SpecError) as raised:
        simulate(_tree(), {"db": entry}, duration=10.0)  # type: ignore[dict-item]
    message = str(raised.value)
    assert "'db'" in message
    for name in ("Exponential", "Scripted", "MemoryGrowth", "Hang", "Flapping", "Healthy"):
        assert name in message


def test_a_bare_model_and_a_list_of_it_are_one_run() -> None:
    spec = _tree(liveness=_probe(failures=2), shutdown=1.0)
    model = Hang(mean=120.0, start_failure_probability=0.2)
    bare = simulate(spec, {"db": model}, duration=3600.0, seed=4)
    listed = simulate(spec, {"db": [model]}, duration=3600.0, seed=4)
    assert bare.events == listed.events and bare.children["db"].unhealthy > 3
