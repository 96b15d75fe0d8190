"""The simulator and dynamic children: a fault model per simple_one_for_one child,
pids in simulated results, by-pid calls, and a template's scripted exits."""

from __future__ import annotations

import pytest

from supervision import (
    ChildNotFound,
    ChildNotRunning,
    ExitKind,
    ExitReason,
    SpecError,
    SupervisorSpec,
)
from supervision.simulate import (
    Exponential,
    Healthy,
    PidOf,
    Scripted,
    call,
    event_sequence,
    pid_of,
    simulate,
)
from tests.support.fake_executor import worker

KILLED = ExitReason(ExitKind.KILLED, signal=9)


def tree(template=None) -> SupervisorSpec:
    """A worker "a" and a simple_one_for_one "pool" of `template` (a worker "w")."""
    pool = SupervisorSpec(
        "pool",
        strategy="simple_one_for_one",
        intensity=10,
        period=60.0,
        children=[template or worker("w")],
    )
    return SupervisorSpec("root", intensity=10, period=60.0, children=[worker("a"), pool])


def three(at: float = 1.0, supervisor: str = "pool") -> list:
    return [call(at, "start_child", (), supervisor=supervisor) for _ in range(3)]


def exits(result, supervisor: str = "root/pool") -> list[tuple[float, str | None]]:
    return [
        (e.time, e.offender)
        for e in result.events
        if e.context.value == "child_exited" and e.supervisor == supervisor
    ]


# -- a fault model per started child ----------------------------------------------------


def test_the_second_of_three_children_crashes_3_s_after_its_start():
    result = simulate(
        tree(), {"pool/w-2": Scripted([3.0], relative=True)}, duration=20, calls=three()
    )
    assert exits(result) == [(4.0, "w-2")]
    assert result.children["pool/w-2"].restarts == 1
    assert result.children["pool/w-1"].exits == result.children["pool/w-3"].exits == 0


def test_a_childs_own_model_takes_precedence_over_its_templates():
    faults = {"pool/w": Scripted([2.0], relative=True), "pool/w-2": Healthy()}
    result = simulate(tree(), faults, duration=4, calls=three())
    assert exits(result) == [(3.0, "w-1"), (3.0, "w-3")]


def test_the_templates_model_still_applies_to_every_child():
    result = simulate(tree(), {"pool/w": Scripted([2.0], relative=True)}, duration=4, calls=three())
    assert exits(result) == [(3.0, "w-1"), (3.0, "w-2"), (3.0, "w-3")]


def test_each_child_of_a_template_draws_its_own_random_faults_and_runs_repeat():
    faults = {"pool/w": Exponential(mtbf=50.0)}
    one = simulate(tree(), faults, duration=300, seed=4, calls=three())
    again = simulate(tree(), faults, duration=300, seed=4, calls=three())
    assert one.events == again.events
    times = {w: [t for t, c in exits(one) if c == w] for w in ("w-1", "w-2", "w-3")}
    assert all(times.values()) and len({tuple(t) for t in times.values()}) == 3


def test_an_id_counts_every_start_child_and_restarts_with_its_supervisor():
    # The pool gives up at t=3 (intensity 0), and the root restarts it: the ids of the
    # new incarnation count from 1 again, so "pool/w-2" names its second child too.
    pool = SupervisorSpec(
        "pool", strategy="simple_one_for_one", intensity=0, children=[worker("w")]
    )
    spec = SupervisorSpec("root", intensity=5, children=[pool])
    faults = {"pool/w-2": Scripted([2.0], relative=True, repeat=True)}
    result = simulate(spec, faults, duration=10, calls=three(1.0) + three(5.0))
    assert exits(result) == [(3.0, "w-2"), (7.0, "w-2")]
    assert exits(result, "root") == [(3.0, "pool"), (7.0, "pool")]


# -- a template's scripted absolute exit --------------------------------------------------


def test_a_templates_absolute_exit_ends_every_running_child_at_once():
    result = simulate(
        tree(),
        {"pool/w": Scripted([(5.0, KILLED)])},
        duration=10,
        calls=[*three(), call(4.0, "terminate_child", "w-3", supervisor="pool")],
    )
    after = [s for s in event_sequence(result.events) if s[0] == "root/pool"][-4:]
    assert after == [
        ("root/pool", "child_exited", "w-1"),
        ("root/pool", "child_started", "w-1"),
        ("root/pool", "child_exited", "w-2"),
        ("root/pool", "child_started", "w-2"),
    ]
    assert all(e.reason == KILLED for e in result.events if e.context.value == "child_exited")


def test_a_templates_absolute_exit_spares_a_child_with_a_model_of_its_own():
    faults = {"pool/w": Scripted([(5.0, KILLED)]), "pool/w-2": Healthy()}
    result = simulate(tree(), faults, duration=10, calls=three())
    assert exits(result) == [(5.0, "w-1"), (5.0, "w-3")]


def test_a_childs_absolute_exit_by_its_id():
    result = simulate(
        tree(), {"pool/w-3": Scripted([(5.0, KILLED), 6.0])}, duration=10, calls=three()
    )
    assert exits(result) == [(5.0, "w-3"), (6.0, "w-3")]


def test_at_once_means_a_supervisor_that_gives_up_finds_the_others_dead():
    # intensity 0: the pool gives up on w-1's exit; w-2 had died at the same moment,
    # so its termination reports its own exit reason, not a shutdown.
    pool = SupervisorSpec(
        "pool", strategy="simple_one_for_one", intensity=0, children=[worker("w")]
    )
    result = simulate(
        SupervisorSpec("root", children=[pool]),
        {"pool/w": Scripted([(5.0, KILLED)])},
        duration=6,
        calls=three()[:2],
    )
    ends = [
        (e.context.value, e.offender)
        for e in result.events
        if e.supervisor == "root/pool" and e.offender is not None and e.time == 5.0
    ]
    assert ends == [
        ("child_exited", "w-1"),
        ("reached_max_restart_intensity", "w-1"),
        ("child_terminated", "w-2"),
    ]
    terminated = next(e for e in result.events if e.context.value == "child_terminated")
    assert terminated.reason == KILLED


def test_faults_below_a_supervisor_template_by_template_and_by_id():
    sub = SupervisorSpec("sub", intensity=5, children=[worker("x"), worker("y")])
    faults = {
        "pool/sub/x": Scripted([(5.0, KILLED)]),
        "pool/sub-2/y": Scripted([(6.0, KILLED)]),
        "pool/sub-1/x": Scripted([(7.0, KILLED)]),  # more specific than pool/sub/x
    }
    result = simulate(tree(sub), faults, duration=10, calls=three()[:2])
    ended = [
        (e.time, e.supervisor, e.offender)
        for e in result.events
        if e.context.value == "child_exited"
    ]
    assert ended == [
        (5.0, "root/pool/sub-2", "x"),
        (6.0, "root/pool/sub-2", "y"),
        (7.0, "root/pool/sub-1", "x"),
    ]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("pool/w-0", "no worker at this path"),
        ("pool/w-01", "no worker at this path"),
        ("pool/w-", "no worker at this path"),
        ("pool/v-1", "no worker at this path"),
        ("pool/w-1/z", "no worker at this path"),
        ("w-1", "no worker at this path"),
        ("pool", "a nested supervisor fails through its children"),
    ],
)
def test_a_key_that_names_no_worker_is_refused_with_the_path(key, message):
    with pytest.raises(SpecError, match=message) as refused:
        simulate(tree(), {key: Scripted([1.0])}, duration=1)
    assert refused.value.child == key
    assert "-1, -2" in str(refused.value) or "supervisor" in str(refused.value)


def test_a_supervisor_template_or_a_dynamic_supervisor_takes_no_fault_model():
    sub = SupervisorSpec("sub", children=[worker("x")])
    for key in ("pool/sub", "pool/sub-1"):
        with pytest.raises(SpecError, match="fails through its children"):
            simulate(tree(sub), {key: Scripted([1.0])}, duration=1)


def test_a_childs_key_is_valid_before_that_child_exists():
    result = simulate(tree(), {"pool/w-7": Scripted([1.0])}, duration=5, calls=three())
    assert exits(result) == []


# -- pids -------------------------------------------------------------------------------


def test_workers_have_distinct_deterministic_pids_and_supervisors_none():
    calls = [*three(), call(2.0, "which_children", supervisor="pool")]
    faults = {"pool/w-2": Scripted([(3.0, KILLED)])}
    result = simulate(tree(), faults, duration=5, calls=calls)
    started = [e for e in result.events if e.context.value == "child_started"]
    pids = {(e.offender, e.pid) for e in started}
    assert ("pool", None) in pids  # as live: a nested supervisor has no pid of its own
    worker_pids = [e.pid for e in started if e.offender != "pool"]
    assert worker_pids == [1000, 1001, 1002, 1003, 1004]  # a, w-1, w-2, w-3, w-2 again
    assert [r.value.pid for r in result.calls[:3]] == [1001, 1002, 1003]
    assert {c.id: c.pid for c in result.calls[3].value} == {"w-1": 1001, "w-2": 1002, "w-3": 1003}
    again = simulate(tree(), faults, duration=5, calls=calls)
    assert [e.pid for e in again.events] == [e.pid for e in result.events]


def test_terminate_child_by_pid_on_a_simple_supervisor():
    calls = [
        *three(),
        call(2.0, "terminate_child", pid_of("w-2"), supervisor="pool"),
        call(2.0, "terminate_child", 1003, supervisor="pool"),  # w-3's pid, read off a run
        call(3.0, "which_children", supervisor="pool"),
        call(3.0, "terminate_child", 1002, supervisor="pool"),  # w-2's, now gone
    ]
    result = simulate(tree(), duration=5, calls=calls)
    assert [r.error for r in result.calls[3:5]] == [None, None]
    assert [c.id for c in result.calls[5].value] == ["w-1"]
    assert isinstance(result.calls[6].error, ChildNotFound)
    assert ("root/pool", "child_deleted", "w-2") in event_sequence(result.events)


def test_by_pid_calls_on_a_static_supervisor_are_as_live():
    calls = [
        call(1.0, "terminate_child", pid_of("a")),  # OTP: a static supervisor takes no pid
        call(1.0, "which_child", pid_of("a")),
        call(1.0, "pause_child", pid_of("a")),
    ]
    result = simulate(tree(), duration=5, calls=calls)
    assert isinstance(result.calls[0].error, ChildNotFound)
    assert result.calls[1].value.id == "a" and result.calls[1].value.pid == 1000
    assert result.calls[2].ok
    assert ("root", "child_paused", "a") in event_sequence(result.events)


def test_pid_of_a_child_that_is_not_there_or_not_running_is_an_error_answer():
    calls = [
        call(1.0, "terminate_child", pid_of("w-9"), supervisor="pool"),
        call(1.0, "terminate_child", "a"),
        call(2.0, "pause_child", pid_of("a")),
    ]
    result = simulate(tree(), duration=5, calls=calls)
    assert isinstance(result.calls[0].error, ChildNotFound)
    assert result.calls[1].ok
    assert isinstance(result.calls[2].error, ChildNotRunning)
    assert "take its pid" in str(result.calls[2].error)


def test_pid_of_takes_a_child_id():
    assert pid_of("w-2") == PidOf("w-2")
    for bad in ("", 3, None):
        with pytest.raises(SpecError, match="pid_of"):
            pid_of(bad)  # type: ignore[arg-type]
