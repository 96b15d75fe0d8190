"""The simulator's reach: scripted API calls, start-up as live, min_uptime, pause, memory."""

from __future__ import annotations

import pytest

from supervision import (
    ChildCounts,
    ChildNotPaused,
    ChildSpec,
    EventKind,
    ExitKind,
    ExitReason,
    SpecError,
    SupervisorNotRunning,
    SupervisorSpec,
    TooManyChildren,
)
from supervision.simulate import Call, MemoryGrowth, Scripted, call, event_sequence, simulate
from tests.support.fake_executor import worker

K = EventKind
NORMAL_AT_ONCE = Scripted([(0.0, ExitReason.normal())], relative=True, repeat=True)


def kinds(result, child: str | None = None) -> list[EventKind]:
    return [e.context for e in result.events if child is None or e.offender == child]


def pool(**flags) -> SupervisorSpec:
    return SupervisorSpec(
        "root",
        strategy="simple_one_for_one",
        children=[worker("w", **flags)],
        max_children=2,
        intensity=5,
    )


# -- min_uptime ----------------------------------------------------------------------


def test_min_uptime_makes_a_transient_normal_exit_a_failed_start_that_is_restarted():
    spec = SupervisorSpec(
        "root", intensity=2, children=[worker("t", restart="transient", min_uptime=1.0)]
    )
    result = simulate(spec, {"t": NORMAL_AT_ONCE}, duration=10)
    exits = [e for e in result.events if e.context is K.CHILD_EXITED]
    assert len(exits) == 3
    assert all(e.reason.kind is ExitKind.START_FAILURE for e in exits)
    assert kinds(result)[-2:] == [K.MAX_INTENSITY_REACHED, K.SUPERVISOR_STOPPED]


def test_without_min_uptime_the_same_exit_ends_the_child():
    spec = SupervisorSpec("root", intensity=2, children=[worker("t", restart="transient")])
    result = simulate(spec, {"t": NORMAL_AT_ONCE}, duration=10)
    assert kinds(result, "t") == [K.CHILD_STARTED, K.CHILD_EXITED]


# -- scripted calls ------------------------------------------------------------------------


def test_pause_and_resume_are_scripted_and_paused_time_is_downtime():
    spec = SupervisorSpec("root", children=[worker("a")])
    result = simulate(
        spec,
        duration=10,
        calls=[
            call(2.0, "pause_child", "a"),
            call(3.0, "which_child", "a"),
            call(6.0, "resume_child", "a"),
            call(7.0, "resume_child", "a"),
        ],
    )
    assert kinds(result, "a") == [K.CHILD_STARTED, K.CHILD_PAUSED, K.CHILD_RESUMED]
    assert result.calls[1].value.state == "paused"
    assert isinstance(result.calls[3].error, ChildNotPaused)
    assert result.children["a"].uptime == pytest.approx(6.0)


def test_simple_one_for_one_start_child_with_args_and_max_children():
    result = simulate(
        pool(),
        {"w": Scripted([(1.0, ExitReason(ExitKind.KILLED, signal=9))], relative=True)},
        duration=10,
        calls=[
            call(0.5, "start_child", ("x",)),
            call(0.5, "start_child", ("y",)),
            call(0.5, "start_child", ("z",)),
            call(3.0, "count_children"),
            call(4.0, "which_children"),
        ],
    )
    first, second, third, counts, listing = result.calls
    assert first.ok and first.value.id == "w-1"
    assert second.value.id == "w-2"
    assert isinstance(third.error, TooManyChildren)
    assert counts.value == ChildCounts(specs=1, active=2, supervisors=0, workers=2)
    assert [c.id for c in listing.value] == ["w-2", "w-1"]
    spec_args = [e for e in result.events if e.context is K.CHILD_STARTED]
    assert len(spec_args) == 4  # two starts, and each restarted once after its scripted kill
    assert set(result.children) == {"w-1", "w-2"}


def test_terminate_delete_restart_and_errors_as_live():
    spec = SupervisorSpec("root", children=[worker("a"), worker("b")])
    result = simulate(
        spec,
        duration=10,
        calls=[
            call(1.0, "delete_child", "a"),
            call(1.0, "terminate_child", "a"),
            call(2.0, "restart_child", "a"),
            call(3.0, "terminate_child", "b"),
            call(3.0, "delete_child", "b"),
            call(4.0, "start_child", worker("c")),
            call(4.0, "start_child", worker("c")),
        ],
    )
    errors = [type(r.error).__name__ if r.error else None for r in result.calls]
    assert errors == [
        "ChildRunning",
        None,
        None,
        None,
        None,
        None,
        "AlreadyStarted",
    ]
    assert ("root", "child_deleted", "b") in event_sequence(result.events)
    assert result.children["c"].starts == 1


def test_stop_stops_the_tree_and_ends_the_run_even_with_a_root_restart_delay():
    spec = SupervisorSpec("root", children=[worker("a"), worker("b")])
    result = simulate(
        spec,
        duration=100,
        root_restart_delay=1.0,
        calls=[call(5.0, "stop"), call(6.0, "which_children")],
    )
    assert result.ended_at == 5.0
    assert len(result.calls) == 1, "the run ends with the tree: the later call never runs"
    stop = result.calls[0]
    assert stop.value.kind is ExitKind.SHUTDOWN
    assert kinds(result)[-3:] == [K.CHILD_TERMINATED, K.CHILD_TERMINATED, K.SUPERVISOR_STOPPED]
    # The operator stopped it: the root's exit is recorded, but it did not give up.
    assert [t for t, _ in result.tree.root_exits] == [5.0]
    assert result.tree.give_ups == 0 and result.tree.time_to_give_up is None
    assert "gave up 0 times (first never)" in str(result)


def test_a_call_on_a_supervisor_that_is_not_there_is_noproc():
    spec = SupervisorSpec("root", children=[worker("a")])
    result = simulate(spec, duration=5, calls=[call(1.0, "which_children", supervisor="ghost")])
    assert isinstance(result.calls[0].error, SupervisorNotRunning)


def test_a_call_on_a_nested_supervisor():
    inner = SupervisorSpec("inner", children=[worker("x")])
    spec = SupervisorSpec("root", children=[inner])
    result = simulate(spec, duration=5, calls=[call(1.0, "pause_child", "x", supervisor="inner")])
    assert result.calls[0].ok
    assert ("root/inner", "child_paused", "x") in event_sequence(result.events)


def test_bad_calls_are_refused_with_the_field():
    with pytest.raises(SpecError, match=r"Call\.method"):
        call(1.0, "frobnicate")
    with pytest.raises(SpecError, match=r"Call\.at"):
        Call(-1.0, "stop")
    with pytest.raises(SpecError, match="calls"):
        simulate(SupervisorSpec("root", children=[worker("a")]), duration=1, calls=["stop"])


# -- start-up -------------------------------------------------------------------------------


def test_a_numeric_ready_delays_the_next_sibling():
    spec = SupervisorSpec("root", children=[worker("a", ready=2.0), worker("b")])
    result = simulate(spec, duration=5)
    started = {e.offender: e.time for e in result.events if e.context is K.CHILD_STARTED}
    assert started == {"a": 2.0, "b": 2.0}


def test_not_ready_within_start_timeout_is_a_failed_start_at_the_timeout():
    spec = SupervisorSpec(
        "root", children=[worker("a", ready="notify", start_timeout=1.0)], intensity=1
    )
    from supervision.simulate import Healthy

    result = simulate(spec, {"a": Healthy(start_duration=3.0)}, duration=5)
    failed = next(e for e in result.events if e.context is K.START_FAILED)
    assert failed.time == 1.0 and failed.reason.kind is ExitKind.START_TIMEOUT
    assert kinds(result)[-1] is K.SUPERVISOR_STOPPED  # a failed start at init stops the tree


def test_memory_growth_stops_the_child_at_its_limit_and_it_is_restarted():
    spec = SupervisorSpec("root", children=[worker("leak", memory_limit=10_000)])
    result = simulate(spec, {"leak": MemoryGrowth(rate=1000.0)}, duration=25)
    exits = [e for e in result.events if e.context is K.CHILD_EXITED]
    assert [e.time for e in exits] == [10.0, 20.0]
    assert all(e.reason.kind is ExitKind.MEMORY_LIMIT for e in exits)


def test_memory_growth_without_a_limit_never_exits():
    spec = SupervisorSpec("root", children=[worker("leak")])
    result = simulate(spec, {"leak": MemoryGrowth(rate=100.0)}, duration=25)
    assert kinds(result, "leak") == [K.CHILD_STARTED]


def test_a_template_fault_model_applies_to_each_dynamic_child():
    spec = SupervisorSpec("root", strategy="simple_one_for_one", children=[worker("w")])
    with pytest.raises(SpecError, match="no worker at this path"):
        simulate(spec, {"nope": NORMAL_AT_ONCE}, duration=1)
    assert isinstance(ChildSpec, type)


def test_a_child_added_by_a_call_may_have_a_fault_model():
    from supervision.simulate import Healthy

    spec = SupervisorSpec("root", children=[worker("a")])
    slow = worker("slow", ready="notify", start_timeout=0.5)
    result = simulate(
        spec,
        {"slow": Healthy(start_duration=2.0)},
        duration=5,
        calls=[call(1.0, "start_child", slow)],
    )
    error = result.calls[0].error
    assert error is not None and error.reason.kind is ExitKind.START_TIMEOUT
    assert result.calls[0].time == 1.5
    assert ("root", "child_deleted", "slow") in event_sequence(result.events)
