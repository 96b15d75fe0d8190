"""docs/otp-semantics.md section 10, point by point: one test per point, named after it."""

from __future__ import annotations

import pytest

from supervision import (
    ChildNotFound,
    EventKind,
    ExitKind,
    ExitReason,
    Restart,
    ScheduleRetry,
    Supervisor,
    SupervisorSpec,
    SupervisorStartError,
    TerminateChild,
)
from tests.support.fake_executor import ABNORMAL, KILLED, FakeClock, FakeExecutor, running, worker


def sup_of(*children, strategy: str = "one_for_one", **flags) -> FakeExecutor:
    return running(SupervisorSpec("sup", strategy=strategy, children=list(children), **flags))


def ids(ex: FakeExecutor) -> list[str]:
    return [c.id for c in ex.sup.children()]


# 1
@pytest.mark.parametrize("reason", [ExitReason.normal(), ExitReason.shutdown()], ids=str)
def test_permanent_child_restarted_after_normal_exit(reason):
    ex = sup_of(worker("a"))
    mark = len(ex.log)
    ex.exit("a", reason)
    assert ex.log[mark:] == [("start", "a")]
    assert ex.sup.which_child("a").state == "running"


# 2
def test_shutdown_with_any_reason_is_normal_for_transient_and_killed_is_abnormal():
    ex = sup_of(worker("t1", restart="transient"), worker("t2", restart="transient"), intensity=5)
    mark = len(ex.log)
    ex.exit("t1", ExitReason.shutdown("rotated logs"))  # OTP's {shutdown, _}
    assert ex.log[mark:] == []
    assert ex.sup.which_child("t1").state == "stopped"
    ex.exit("t2", ExitReason(ExitKind.KILLED, signal=9))
    assert ex.log[mark:] == [("start", "t2")]


# 3
@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
def test_exit_needing_no_restart_triggers_no_group_action_and_no_charge(strategy):
    ex = sup_of(
        worker("t", restart="transient"),
        worker("x", restart="temporary"),
        worker("c"),
        strategy=strategy,
        intensity=0,  # one charge would stop the supervisor
    )
    mark = len(ex.log)
    ex.exit("t", ExitReason.normal())
    ex.exit("x", ABNORMAL)
    assert ex.log[mark:] == [], "no sibling touched"
    assert not ex.exits, "nothing charged"
    assert ex.sup.restart_times == ()


# 4
def test_exceeding_restart_is_not_performed_and_rest_stop_in_reverse_order():
    specs = [
        worker("a", shutdown=1.0),
        worker("b"),
        worker("c", shutdown="brutal_kill"),
        worker("d", shutdown="infinity"),
    ]
    ex = sup_of(*specs, intensity=1)
    ex.exit("b")  # the one restart allowed
    ex.kill("b")
    _, actions = ex.step()
    terminations = [a for a in actions if isinstance(a, TerminateChild)]
    assert terminations == [
        TerminateChild("d", specs[3]),
        TerminateChild("c", specs[2]),
        TerminateChild("a", specs[0]),
    ], "one at a time, each with its own shutdown spec"
    assert ex.log[-3:] == [("terminate", "d"), ("terminate", "c"), ("terminate", "a")]
    assert ex.started_ids().count("b") == 2, "the exceeding restart is not performed"
    assert ex.sup.which_child("b").state == "stopped"
    assert ex.exits[0].reason.kind is ExitKind.SHUTDOWN


# 5
def test_parent_does_not_restart_a_transient_supervisor_that_gave_up_but_restarts_a_permanent_one():
    inner = running(SupervisorSpec("inner", intensity=0, children=[worker("w")]))
    inner.exit("w")
    [gave_up] = inner.exits
    assert gave_up.reason.is_normal

    def parent(restart: Restart) -> FakeExecutor:
        nested = SupervisorSpec("inner", restart=restart, children=[worker("w")])
        return sup_of(worker("a"), nested, intensity=1)

    transient = parent(Restart.TRANSIENT)
    mark = len(transient.log)
    transient.exit("inner", gave_up.reason)
    assert transient.log[mark:] == []
    assert transient.sup.restart_times == ()

    permanent = parent(Restart.PERMANENT)
    mark = len(permanent.log)
    permanent.exit("inner", gave_up.reason)
    assert permanent.log[mark:] == [("start", "inner")]
    assert len(permanent.sup.restart_times) == 1, "charged to the parent"


# 6
def test_group_restart_costs_one_restart():
    ex = sup_of(worker("a"), worker("b"), worker("c"), strategy="one_for_all", intensity=2)
    ex.exit("b")  # 3 children restarted: one charge
    ex.exit("c")  # another child, same supervisor: the second charge
    assert not ex.exits
    assert ex.sup.restart_times == (0.0, 0.0)
    ex.exit("a")  # the third charge is one too many
    assert ex.exits


def test_each_failed_restart_retry_costs_one_more_restart():
    ex = sup_of(worker("a"), intensity=2)
    ex.fail_starts("a")
    ex.exit("a")  # charge 1, fails
    ex.drain()  # the retry: charge 2, succeeds
    assert ex.sup.restart_times == (0.0, 0.0)
    assert not ex.exits
    ex.exit("a")  # charge 3
    assert ex.exits


# 7
def test_intensity_window_is_inclusive_at_exactly_period():
    at_boundary = sup_of(worker("a"), intensity=1, period=5)
    at_boundary.exit("a")
    at_boundary.clock.advance(5.0)
    at_boundary.exit("a")  # 0.0 >= 5.0 - 5: still inside
    assert at_boundary.exits

    # Away from the boundary, on either side (OTP floors to whole seconds).
    inside = sup_of(worker("a"), intensity=1, period=5)
    inside.exit("a")
    inside.clock.advance(4.0)
    inside.exit("a")
    assert inside.exits

    outside = sup_of(worker("a"), intensity=1, period=5)
    outside.exit("a")
    outside.clock.advance(6.5)
    outside.exit("a")
    assert not outside.exits


# 8
def test_restarted_children_keep_position_start_child_appends_and_shutdown_goes_by_position():
    ex = sup_of(worker("a"), worker("b"), worker("c"), intensity=5)
    ex.exit("a")  # a is now the most recently started, but stays first
    ex.ok("start_child", worker("d"))
    ex.exit("b")
    assert ids(ex) == ["a", "b", "c", "d"]
    mark = len(ex.log)
    ex.shutdown()
    assert ex.log[mark:] == [
        ("terminate", "d"),
        ("terminate", "c"),
        ("terminate", "b"),
        ("terminate", "a"),
    ]


# 9
def test_temporary_child_spec_removed_on_exit_terminate_and_as_bystander():
    ex = sup_of(
        worker("a"),
        worker("t1", restart="temporary"),
        worker("t2", restart="temporary"),
        worker("t3", restart="temporary"),
        strategy="one_for_all",
        intensity=5,
    )
    ex.exit("t1", ExitReason.normal())
    ex.ok("terminate_child", "t2")
    ex.exit("a")  # t3 is stopped as a bystander
    assert ids(ex) == ["a"]
    for gone in ("t1", "t2", "t3"):
        assert isinstance(ex.call("restart_child", gone).error, ChildNotFound)
        assert isinstance(ex.call("delete_child", gone).error, ChildNotFound)
    assert ex.ok("start_child", worker("t1", restart="temporary")).state == "running"


# 10
def test_exit_of_a_child_the_supervisor_terminated_is_not_seen_as_a_crash():
    ex = sup_of(worker("a"), worker("b"), strategy="one_for_all", intensity=5)
    old_b = ex.incarnation("b")
    ex.ok("terminate_child", "b")
    ex.ok("restart_child", "b")  # same child id, new incarnation
    mark, events = len(ex.log), len(ex.events)
    ex.post_exit("b", old_b, ExitReason(ExitKind.KILLED, signal=15))
    ex.drain()
    assert ex.log[mark:] == [], "matched by incarnation, not by child id"
    assert ex.event_kinds(events) == [EventKind.STALE_EXIT_IGNORED]
    assert ex.sup.which_child("b").incarnation == ex.incarnation("b") != old_b
    assert ex.sup.restart_times == ()


# 11
def test_failed_restart_is_retried_asynchronously_after_queued_messages_marked_restarting():
    ex = sup_of(worker("a"), worker("b"), intensity=5)
    ex.fail_starts("a")
    ex.kill("a")
    ex.kill("b")
    _, actions = ex.step()  # a's exit: the restart fails
    assert actions[-1] == ScheduleRetry("a"), "not retried inline"
    assert ex.sup.which_child("a").state == "restarting"
    ex.drain()
    assert ex.log[-3:] == [("start_failed", "a"), ("start", "b"), ("start", "a")]


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("one_for_all", [("terminate", "a"), ("start", "a"), ("start", "b"), ("start", "c")]),
        ("rest_for_one", [("start", "b"), ("start", "c")]),
    ],
)
def test_one_for_all_retry_reterminates_siblings_and_rest_for_one_resumes_at_failed_child(
    strategy, expected
):
    ex = sup_of(worker("a"), worker("b"), worker("c"), strategy=strategy, intensity=5)
    ex.fail_starts("b")
    ex.exit("a")  # a restarts, b fails: the retry is queued
    mark = len(ex.log)
    ex.drain()
    assert ex.log[mark:] == expected


# 12
def test_init_failure_is_not_a_restart():
    spec = SupervisorSpec("sup", intensity=10, children=[worker("a"), worker("b"), worker("c")])
    ex = FakeExecutor(Supervisor(spec), FakeClock())
    ex.fail_starts("b")
    ex.start()
    assert ex.log == [("start", "a"), ("start_failed", "b"), ("terminate", "a")]
    assert not ex.mailbox, "no retry"
    assert ex.sup.restart_times == (), "no intensity"
    [exit_] = ex.exits
    assert isinstance(exit_.error, SupervisorStartError)
    assert exit_.error.child == "b"


# 13 (nannytree has no `ignore`: a child without a process is a kept, inactive spec)
def test_child_without_a_process_keeps_its_spec_and_is_not_active():
    ex = sup_of(worker("t", restart="transient"), worker("a"))
    ex.exit("t", ExitReason.normal())
    info = ex.sup.which_child("t")
    assert (info.state, info.pid) == ("stopped", None)
    counts = ex.sup.count_children()
    assert (counts.specs, counts.active) == (2, 1)
    assert ex.sup.get_childspec("t").restart is Restart.TRANSIENT


# 14
def test_auto_shutdown_fires_only_for_significant_children_ending_by_themselves_without_restart():
    def significant(cid):
        return worker(cid, restart="transient", significant=True)

    any_ = sup_of(worker("a"), significant("s"), auto_shutdown="any_significant", intensity=5)
    any_.exit("s", KILLED)  # abnormal: restarted, not an ending
    assert not any_.exits

    group = sup_of(
        worker("a"),
        worker("t", restart="temporary", significant=True),
        strategy="one_for_all",
        auto_shutdown="any_significant",
        intensity=5,
    )
    group.exit("a")  # t is stopped (and dropped) as a bystander: not an ending
    assert not group.exits

    ex = sup_of(
        worker("a"),
        significant("s1"),
        significant("s2"),
        significant("s3"),
        auto_shutdown="all_significant",
        intensity=5,
    )
    ex.ok("terminate_child", "s1")  # stopped by the API: not an ending, but gone
    ex.exit("s2", ExitReason.normal())  # s3 still runs
    assert not ex.exits
    mark = len(ex.log)
    ex.exit("s3", ExitReason.normal())  # no significant child runs any more
    assert ex.log[mark:] == [("terminate", "a")]
    assert ex.exits and ex.exits[0].reason.is_normal


# 15
def test_terminate_child_on_a_stopped_child_is_ok_and_on_an_unknown_id_not_found():
    ex = sup_of(worker("a"))
    assert ex.ok("terminate_child", "a") is None
    assert ex.ok("terminate_child", "a") is None
    assert isinstance(ex.call("terminate_child", "zz").error, ChildNotFound)


# 16
def test_which_children_is_reverse_start_order():
    ex = sup_of(worker("a"), worker("b"), intensity=5)
    ex.ok("start_child", worker("c"))
    ex.exit("a")
    assert [c.id for c in ex.sup.which_children()] == ["c", "b", "a"]


# 17
@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("one_for_all", ["s", "a", "t", "x", "c"]),
        ("rest_for_one", ["a", "t", "x", "c"]),  # s, before a, is out of range
    ],
)
def test_group_restart_starts_stopped_children_in_its_range(strategy, expected):
    ex = sup_of(
        worker("s"),
        worker("a"),
        worker("t", restart="transient"),
        worker("x"),
        worker("c"),
        strategy=strategy,
        intensity=5,
    )
    ex.ok("terminate_child", "s")  # stopped by the API
    ex.exit("t", ExitReason.normal())  # stopped: a transient that ended normally
    ex.ok("terminate_child", "x")  # stopped by the API
    mark = len(ex.log)
    ex.exit("a")
    assert ex.started_ids(mark) == expected
    assert {c.id for c in ex.sup.children() if c.state == "running"} == set(expected)
