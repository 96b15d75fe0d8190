"""Decisions the core owns besides OTP's: min_uptime, pause/resume, removing a deleted child."""

from __future__ import annotations

import pytest

from supervision import (
    ChildNotPaused,
    ChildNotRunning,
    ChildSpec,
    EventKind,
    ExitKind,
    ExitReason,
    PauseChild,
    RemoveChild,
    Reply,
    ResumeChild,
    SupervisorSpec,
)
from tests.support.fake_executor import FakeClock, FakeExecutor, running, worker

CRASH = ExitReason(
    ExitKind.EXIT_CODE, code=3, exc_type="ValueError", traceback="tb", stderr_tail="boom"
)


def sup_of(*children: ChildSpec, clock: FakeClock | None = None, **flags) -> FakeExecutor:
    return running(SupervisorSpec("sup", children=list(children), **flags), clock)


# -- min_uptime ---------------------------------------------------------------------


def test_an_exit_before_min_uptime_is_a_failed_start_keeping_what_the_exit_said():
    ex = sup_of(worker("c", min_uptime=1.0))
    ex.clock.advance(0.25)
    ex.exit("c", CRASH)
    exited = next(e for e in ex.events if e.context is EventKind.CHILD_EXITED)
    reason = exited.reason
    assert reason is not None and reason.kind is ExitKind.START_FAILURE
    assert reason.message == f"exited after 0.250s, before min_uptime=1.0s ({CRASH})"
    assert (reason.code, reason.signal, reason.exc_type) == (3, None, "ValueError")
    assert (reason.traceback, reason.stderr_tail) == ("tb", "boom")
    assert ex.sup.which_child("c").last_exit == reason


def test_the_executors_uptime_wins_over_the_cores_clock():
    ex = sup_of(worker("c", min_uptime=1.0))
    ex.clock.advance(5.0)  # the host saw the exit late; the process ran only 0.1 s
    ex.exit("c", CRASH, uptime=0.1)
    reason = ex.sup.which_child("c").last_exit
    assert reason is not None and reason.kind is ExitKind.START_FAILURE
    assert "exited after 0.100s" in reason.message


def test_an_exit_after_min_uptime_keeps_its_reason():
    ex = sup_of(worker("c", min_uptime=1.0))
    ex.clock.advance(1.0)
    ex.exit("c", CRASH)
    assert ex.sup.which_child("c").last_exit == CRASH


def test_a_normal_early_exit_of_a_transient_child_is_restarted_until_max_intensity():
    # Live, `command=["true"]` with min_uptime=1.0 restarts until it gives up;
    # the core decides this now, so the simulator sees the same.
    ex = sup_of(worker("t", restart="transient", min_uptime=1.0), intensity=2, period=5)
    for _ in range(3):
        ex.exit("t", ExitReason.normal())
    kinds = ex.event_kinds()
    assert kinds.count(EventKind.CHILD_STARTED) == 3
    assert EventKind.MAX_INTENSITY_REACHED in kinds
    assert ex.exits and ex.exits[0].reason.message == "reached_max_restart_intensity"


def test_a_normal_early_exit_without_min_uptime_ends_a_transient_child():
    ex = sup_of(worker("t", restart="transient"))
    ex.exit("t", ExitReason.normal())
    assert ex.sup.which_child("t").state == "stopped"
    assert ex.started_ids() == ["t"]


def test_a_shutdown_is_not_an_early_exit():
    ex = sup_of(worker("c", min_uptime=10.0))
    ex.ok("terminate_child", "c")
    reason = ex.sup.which_child("c").last_exit
    assert reason is not None and reason.kind is ExitKind.SHUTDOWN


# -- pause / resume -------------------------------------------------------------------


def test_pause_and_resume_are_decided_by_the_core():
    ex = sup_of(worker("a"), worker("b"))
    pid = ex.pid("a")
    mark = len(ex.actions)
    ex.ok("pause_child", "a")
    assert [type(a) for a in ex.actions[mark:]][-2:] == [PauseChild, Reply]
    assert ex.actions[mark + 1] == PauseChild("a")
    assert ex.sup.which_child("a").state == "paused"
    assert ex.sup.which_child(pid).state == "paused"  # by pid too
    assert ex.processes["a"].paused
    paused = ex.events[-1]
    assert (paused.context, paused.offender, paused.pid) == (EventKind.CHILD_PAUSED, "a", pid)
    mark = len(ex.actions)
    ex.ok("resume_child", "a")
    assert ResumeChild("a") in ex.actions[mark:]
    assert ex.sup.which_child("a").state == "running"
    assert ex.events[-1].context is EventKind.CHILD_RESUMED
    assert not ex.processes["a"].paused


def test_pause_of_a_child_without_a_process_is_refused():
    ex = sup_of(worker("a"))
    ex.ok("terminate_child", "a")
    with pytest.raises(ChildNotRunning, match="cannot pause it"):
        ex.ok("pause_child", "a")
    with pytest.raises(ChildNotRunning, match="cannot resume it"):
        ex.ok("resume_child", "a")


def test_pause_of_a_nested_supervisor_is_refused():
    inner = SupervisorSpec("inner", children=[worker("x")])
    ex = sup_of(inner)
    with pytest.raises(ChildNotRunning):
        ex.ok("pause_child", "inner")


def test_resume_of_a_running_child_says_it_was_not_paused():
    ex = sup_of(worker("a"))
    with pytest.raises(ChildNotPaused, match="it was not paused"):
        ex.ok("resume_child", "a")


def test_a_paused_child_counts_as_alive_and_is_terminated_like_a_running_one():
    ex = sup_of(worker("a"), worker("b"), strategy="one_for_all")
    ex.ok("pause_child", "a")
    assert ex.sup.count_children().active == 2
    mark = len(ex.log)
    ex.exit("b")
    assert ex.log[mark:] == [
        ("terminate", "a"),
        ("start", "a"),
        ("start", "b"),
    ]
    assert ex.sup.which_child("a").state == "running"


def test_an_exit_clears_the_paused_state():
    ex = sup_of(worker("a"))
    ex.ok("pause_child", "a")
    ex.exit("a", ExitReason(ExitKind.KILLED, signal=9))
    info = ex.sup.which_child("a")
    assert info.state == "running" and info.restarts == 1


def test_a_paused_significant_child_keeps_an_all_significant_tree_up():
    ex = sup_of(
        worker("a", restart="transient", significant=True),
        worker("b", restart="transient", significant=True),
        auto_shutdown="all_significant",
    )
    ex.ok("pause_child", "a")
    ex.exit("b", ExitReason.normal())
    assert not ex.exits, "a paused child still has its process"


def test_which_children_shows_paused():
    ex = sup_of(worker("a"), worker("b"))
    ex.ok("pause_child", "b")
    assert [(c.id, c.state) for c in ex.sup.which_children()] == [
        ("b", "paused"),
        ("a", "running"),
    ]


def test_pause_twice_is_one_pause():
    ex = sup_of(worker("a"))
    ex.ok("pause_child", "a")
    mark = len(ex.actions)
    ex.ok("pause_child", "a")
    assert not any(isinstance(a, PauseChild) for a in ex.actions[mark:])


# -- removing a deleted child -------------------------------------------------------------


def test_delete_child_emits_remove_child_after_the_report():
    ex = sup_of(worker("a"))
    ex.ok("terminate_child", "a")
    mark = len(ex.actions)
    ex.ok("delete_child", "a")
    kinds = [type(a).__name__ for a in ex.actions[mark:]]
    assert kinds == ["Report", "RemoveChild", "Reply"]
    assert ex.actions[mark + 1] == RemoveChild("a")


def test_a_temporary_child_that_exits_is_removed_by_an_action():
    ex = sup_of(worker("t", restart="temporary"))
    ex.exit("t")
    assert ex.removed == ["t"]


def test_a_terminated_dynamic_child_is_removed_by_an_action():
    ex = running(SupervisorSpec("pool", strategy="simple_one_for_one", children=[worker("w")]))
    info = ex.ok("start_child", ())
    ex.ok("terminate_child", info.pid)
    assert ex.removed == [info.id]
