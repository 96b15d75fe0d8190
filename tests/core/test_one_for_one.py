"""The decision core under one_for_one: start-up (section 2), restart intensity
(section 4), the retry loop after a failed restart (section 5.5) and stale exits."""

from __future__ import annotations

import pytest

from supervision import (
    EventKind,
    ExitKind,
    ExitReason,
    ScheduleRetry,
    StartChild,
    Supervisor,
    SupervisorSpec,
    SupervisorStartError,
)
from tests.support.fake_executor import ABNORMAL, FakeClock, FakeExecutor, running, worker


def one_for_one(*ids: str, intensity: int = 1, period: float = 5.0, **fields) -> SupervisorSpec:
    return SupervisorSpec(
        "sup",
        intensity=intensity,
        period=period,
        children=[worker(i, **fields) for i in ids],
    )


def states(ex: FakeExecutor) -> dict[str, str]:
    return {c.id: c.state for c in ex.sup.children()}


# -- section 2: start-up -----------------------------------------------------------


def test_init_starts_children_one_at_a_time_in_list_order():
    sup = Supervisor(one_for_one("a", "b", "c"))
    actions = sup.start(0.0)
    assert [a for a in actions if isinstance(a, StartChild)] == [StartChild("a", worker("a"))]
    assert isinstance(actions[-1], StartChild)
    actions = sup.started("a", 101, 1, 0.0)
    assert [a.child_id for a in actions if isinstance(a, StartChild)] == ["b"]
    actions = sup.started("b", 102, 2, 0.0)
    assert [a.child_id for a in actions if isinstance(a, StartChild)] == ["c"]
    actions = sup.started("c", 103, 3, 0.0)
    assert not any(isinstance(a, StartChild) for a in actions)
    assert not sup.busy
    assert [c.state for c in sup.children()] == ["running"] * 3


def test_answer_for_a_child_it_did_not_ask_about_is_refused():
    sup = Supervisor(one_for_one("a", "b"))
    sup.start(0.0)
    with pytest.raises(RuntimeError, match="did not ask for"):
        sup.started("b", 101, 1, 0.0)


def test_inputs_while_an_answer_is_pending_are_refused():
    sup = Supervisor(one_for_one("a", "b"))
    sup.start(0.0)
    with pytest.raises(RuntimeError, match="answer the last one first"):
        sup.child_exited("a", 1, ABNORMAL, 0.0)


def test_init_failure_stops_started_children_in_reverse_and_exits_naming_the_child():
    ex = FakeExecutor(Supervisor(one_for_one("a", "b", "c", "d", intensity=10)))
    ex.fail_starts("c", reason=ExitReason.start_failure("no such file"))
    ex.start()
    assert ex.log == [
        ("start", "a"),
        ("start", "b"),
        ("start_failed", "c"),
        ("terminate", "b"),
        ("terminate", "a"),
    ]
    [exit_] = ex.exits
    assert isinstance(exit_.error, SupervisorStartError)
    assert exit_.error.child == "c"
    assert exit_.error.supervisor == "sup"
    assert exit_.error.reason == ExitReason.start_failure("no such file")
    assert "'c'" in str(exit_.error) and "no such file" in str(exit_.error)
    assert not ex.mailbox, "an init failure is never retried"
    assert EventKind.MAX_INTENSITY_REACHED not in ex.event_kinds()
    assert ex.sup.mode == "stopped"


def test_init_failure_of_the_first_child_terminates_nothing():
    ex = FakeExecutor(Supervisor(one_for_one("a", "b")))
    ex.fail_starts("a")
    ex.start()
    assert ex.log == [("start_failed", "a")]
    assert ex.exits[0].error.child == "a"


def test_supervisor_without_children_starts_and_reports():
    ex = running(SupervisorSpec("sup"))
    assert ex.event_kinds() == [EventKind.SUPERVISOR_STARTED]
    assert not ex.exits


def test_starting_twice_is_refused():
    ex = running(one_for_one("a"))
    with pytest.raises(RuntimeError, match="already started"):
        ex.sup.start(0.0)


def test_shutdown_for_the_parent_stops_children_in_reverse_and_exits_with_its_reason():
    ex = running(one_for_one("a", "b", "c"))
    reason = ExitReason(ExitKind.KILLED, signal=15)
    mark = len(ex.log)
    ex.shutdown(reason)
    assert ex.log[mark:] == [("terminate", "c"), ("terminate", "b"), ("terminate", "a")]
    assert ex.exits[0].reason == reason
    assert ex.sup.mode == "stopped"
    assert ex.shutdown() == [], "a second shutdown does nothing"


# -- section 3: one_for_one restarts in place ------------------------------------------


def test_crashed_child_is_restarted_alone_with_a_new_incarnation():
    ex = running(one_for_one("a", "b", "c"))
    old = ex.incarnation("b")
    mark = len(ex.log)
    ex.exit("b")
    assert ex.log[mark:] == [("start", "b")]
    info = ex.sup.which_child("b")
    assert info.state == "running"
    assert info.incarnation == ex.incarnation("b") != old
    assert info.pid == ex.pid("b")
    assert info.restarts == 1
    assert info.last_exit == ABNORMAL
    kinds = ex.event_kinds()
    assert kinds[-2:] == [EventKind.CHILD_EXITED, EventKind.CHILD_STARTED]


# -- section 4: restart intensity --------------------------------------------------


def test_intensity_is_shared_by_all_children_of_a_supervisor():
    ex = running(one_for_one("a", "b", "c", intensity=2, period=10))
    ex.exit("a")
    ex.clock.advance(1)
    ex.exit("b")
    ex.clock.advance(1)
    mark = len(ex.log)
    ex.exit("c")  # the third restart within 10 s, each of a different child
    assert ex.log[mark:] == [("terminate", "b"), ("terminate", "a")]
    assert ex.exits[0].reason.kind is ExitKind.SHUTDOWN


def test_restarts_slide_out_of_the_window_as_the_fake_clock_advances():
    ex = running(one_for_one("a", intensity=2, period=10), FakeClock(100.0))
    ex.exit("a")  # t=100
    ex.clock.advance(3)
    ex.exit("a")  # t=103: 2 restarts in the window
    ex.clock.advance(8)
    ex.exit("a")  # t=111: t=100 has left the window (100 < 101), so 2 again
    assert not ex.exits
    ex.clock.advance(1)
    ex.exit("a")  # t=112: 103, 111 and 112 are within 10 s: one too many
    assert ex.exits and ex.exits[0].reason.kind is ExitKind.SHUTDOWN


def test_restarts_spaced_wider_than_the_period_never_give_up():
    ex = running(one_for_one("a", intensity=1, period=5))
    for _ in range(50):
        ex.clock.advance(6.5)
        ex.exit("a")
    assert not ex.exits
    assert ex.sup.which_child("a").restarts == 50


def test_intensity_zero_gives_up_on_the_first_restart():
    ex = running(one_for_one("a", "b", intensity=0))
    mark = len(ex.log)
    ex.exit("a")
    assert ex.log[mark:] == [("terminate", "b")]
    assert ex.exits[0].reason.is_normal


def test_giving_up_is_reported_naming_the_child_and_the_limits():
    ex = running(one_for_one("a", intensity=0, period=7))
    ex.exit("a", ExitReason(ExitKind.KILLED, signal=9))
    event = next(e for e in ex.events if e.context is EventKind.MAX_INTENSITY_REACHED)
    assert event.offender == "a"
    assert event.reason == ExitReason(ExitKind.KILLED, signal=9)
    assert "intensity=0" in event.detail and "period=7" in event.detail
    assert ex.events[-1].context is EventKind.SUPERVISOR_STOPPED
    assert ex.exits[0].reason == ExitReason.shutdown("reached_max_restart_intensity")
    assert ex.exits[0].error is None


# -- section 5.5: a failed restart is retried through the mailbox -------------------


def test_failed_restart_marks_the_child_restarting_and_schedules_a_retry():
    ex = running(one_for_one("a", "b", intensity=5))
    ex.fail_starts("b")
    actions = ex.exit("b")
    assert actions[-1] == ScheduleRetry("b")
    assert states(ex) == {"a": "running", "b": "restarting"}
    assert ex.sup.which_child("b").pid is None
    assert ex.sup.count_children().active == 1
    assert EventKind.RESTART_SCHEDULED in ex.event_kinds()
    assert ex.log[-1] == ("start_failed", "b")
    ex.drain()
    assert ex.log[-1] == ("start", "b")
    assert states(ex) == {"a": "running", "b": "running"}


def test_retry_runs_after_messages_queued_before_it():
    ex = running(one_for_one("a", "b", intensity=5))
    ex.fail_starts("b")
    ex.kill("b")
    ex.kill("a")  # a's exit is queued before b's retry exists
    ex.step()  # b's exit: the restart fails, the retry goes to the back
    assert states(ex)["b"] == "restarting"
    ex.drain()
    assert ex.log[-3:] == [("start_failed", "b"), ("start", "a"), ("start", "b")]


def test_each_retry_is_charged_to_the_intensity():
    ex = running(one_for_one("a", intensity=1))
    ex.fail_starts("a")
    ex.exit("a")  # charge 1, the restart fails
    ex.drain()  # the retry is charge 2: over the limit, not performed
    assert ex.log[-1] == ("start_failed", "a")
    assert ex.exits and ex.exits[0].reason.is_normal
    assert states(ex) == {"a": "stopped"}


def test_child_that_cannot_start_is_retried_until_the_intensity_stops_the_supervisor():
    ex = running(one_for_one("a", "b", intensity=3))
    ex.fail_starts("a", times=100)
    ex.exit("a")
    ex.drain()
    attempts = [entry for entry in ex.log if entry == ("start_failed", "a")]
    assert len(attempts) == 3  # charges 1-3 start and fail, charge 4 gives up
    assert ex.log[-1] == ("terminate", "b")
    assert ex.exits


def test_retry_that_succeeds_ends_the_loop():
    ex = running(one_for_one("a", intensity=3))
    ex.fail_starts("a", times=2)
    ex.exit("a")
    ex.drain()
    assert ex.log[-3:] == [("start_failed", "a"), ("start_failed", "a"), ("start", "a")]
    assert not ex.exits
    assert states(ex) == {"a": "running"}


def test_terminate_child_ends_the_restart_loop_and_the_queued_retry_does_nothing():
    ex = running(one_for_one("a", intensity=5))
    ex.fail_starts("a", times=100)
    ex.exit("a")
    assert ex.ok("terminate_child", "a") is None  # handled before the queued retry
    assert states(ex) == {"a": "stopped"}
    ex.drain()
    assert states(ex) == {"a": "stopped"}
    assert ex.log.count(("start_failed", "a")) == 1
    assert not ex.exits


def test_shutdown_during_a_restart_loop_stops_the_others_and_exits():
    ex = running(one_for_one("a", "b", intensity=5))
    ex.fail_starts("b", times=100)
    ex.exit("b")
    mark = len(ex.log)
    ex.shutdown()
    assert ex.log[mark:] == [("terminate", "a")]
    assert states(ex) == {"a": "stopped", "b": "stopped"}
    ex.drain()  # the retry comes back to a stopped supervisor
    assert ex.log[mark:] == [("terminate", "a")]


# -- stale exits ----------------------------------------------------------------------


def test_exit_from_an_old_incarnation_is_ignored():
    ex = running(one_for_one("a", intensity=5))
    old = ex.incarnation("a")
    ex.exit("a")
    mark, events = len(ex.log), len(ex.events)
    ex.post_exit("a", old)
    ex.drain()
    assert ex.log[mark:] == []
    assert ex.event_kinds(events) == [EventKind.STALE_EXIT_IGNORED]
    assert ex.events[-1].incarnation == old
    assert ex.sup.which_child("a").state == "running"


def test_exit_of_a_child_that_is_not_running_is_ignored():
    ex = running(one_for_one("a"))
    inc = ex.incarnation("a")
    ex.ok("terminate_child", "a")
    mark, events = len(ex.log), len(ex.events)
    ex.post_exit("a", inc)
    ex.drain()
    assert ex.log[mark:] == []
    assert ex.event_kinds(events) == [EventKind.STALE_EXIT_IGNORED]
    assert ex.sup.which_child("a").state == "stopped"


def test_exit_of_an_unknown_child_is_ignored():
    ex = running(one_for_one("a"))
    events = len(ex.events)
    ex.post_exit("ghost", 1)
    ex.drain()
    assert ex.event_kinds(events) == [EventKind.STALE_EXIT_IGNORED]
    assert ex.events[-1].offender == "ghost"


def test_exit_after_the_supervisor_stopped_is_ignored():
    ex = running(one_for_one("a"))
    inc = ex.incarnation("a")
    ex.shutdown()
    ex.post_exit("a", inc)
    ex.drain()
    assert ex.events[-1].context is EventKind.STALE_EXIT_IGNORED
    assert ex.log == [("start", "a"), ("terminate", "a")]
