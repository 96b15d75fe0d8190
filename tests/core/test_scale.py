"""Issue 12, the core's part: indexed lookups, and the queries that let an
executor restart a child before the host has seen its exit."""

from __future__ import annotations

import pytest

from supervision import (
    Backoff,
    ChildNotFound,
    ExitKind,
    ExitPlan,
    ExitReason,
    SupervisorSpec,
)
from tests.support.fake_executor import FakeClock, FakeExecutor, running, worker


def sup_of(*children, **flags) -> FakeExecutor:
    return running(SupervisorSpec("sup", children=list(children), **flags))


# -- restart_budget ---------------------------------------------------------------------


def test_restart_budget_counts_what_the_window_still_allows():
    ex = sup_of(worker("a"), intensity=3, period=10)
    assert ex.sup.restart_budget(0.0) == 3
    ex.exit("a")
    ex.clock.advance(1.0)
    ex.exit("a")
    assert ex.sup.restart_budget(1.0) == 1
    assert ex.sup.restart_budget(10.0) == 1, "inclusive: the restart at 0 still counts at 10"
    assert ex.sup.restart_budget(10.5) == 2, "the restart at 0 has left the window"
    assert ex.sup.restart_budget(11.5) == 3


def test_restart_budget_is_never_negative():
    ex = sup_of(worker("a"), intensity=0)
    assert ex.sup.restart_budget(0.0) == 0


def test_the_budget_predicts_the_give_up():
    ex = sup_of(worker("a"), intensity=2, period=10)
    while ex.sup.restart_budget(ex.clock.now) > 0:
        ex.exit("a")
    assert not ex.exits
    ex.exit("a")
    assert ex.exits, "one restart past the budget gives up"


# -- exit_plan ----------------------------------------------------------------------------


def test_a_permanent_worker_is_restarted_on_any_exit():
    ex = sup_of(worker("a"), worker("b", normal_exit_codes={0, 3}, min_uptime=2.0))
    assert ex.sup.exit_plan("a") == ExitPlan("a", ex.incarnation("a"), "any", 0.0, frozenset({0}))
    plan = ex.sup.exit_plan("b")
    assert plan is not None
    assert (plan.min_uptime, plan.normal_exit_codes) == (2.0, frozenset({0, 3}))


def test_the_plan_follows_the_incarnation():
    ex = sup_of(worker("a"))
    first = ex.sup.exit_plan("a")
    ex.exit("a")
    second = ex.sup.exit_plan("a")
    assert first is not None and second is not None
    assert second.incarnation == ex.incarnation("a") != first.incarnation


def test_a_transient_worker_is_restarted_on_abnormal_exits():
    ex = sup_of(worker("t", restart="transient"))
    plan = ex.sup.exit_plan("t")
    assert plan is not None and plan.restart_on == "abnormal"


def test_a_simple_one_for_one_child_has_a_plan():
    ex = running(SupervisorSpec("pool", strategy="simple_one_for_one", children=[worker("w")]))
    info = ex.ok("start_child", ())
    plan = ex.sup.exit_plan(info.id)
    assert plan is not None and plan.restart_on == "any"


@pytest.mark.parametrize(
    "flags",
    [
        {"strategy": "one_for_all"},
        {"strategy": "rest_for_one"},
    ],
)
def test_no_plan_when_the_exit_restarts_a_group(flags):
    ex = sup_of(worker("a"), worker("b"), **flags)
    assert ex.sup.exit_plan("a") is None


def test_no_plan_for_temporary_backoff_paused_stopped_nested_or_unknown():
    inner = SupervisorSpec("inner", children=[worker("x")])
    ex = sup_of(
        worker("temp", restart="temporary"),
        worker("slow", backoff=Backoff(initial=1.0)),
        worker("paused"),
        worker("stopped"),
        inner,
    )
    ex.ok("pause_child", "paused")
    ex.ok("terminate_child", "stopped")
    for child_id in ("temp", "slow", "paused", "stopped", "inner", "ghost"):
        assert ex.sup.exit_plan(child_id) is None, child_id


def test_no_plan_once_the_supervisor_stops():
    ex = sup_of(worker("a"))
    ex.shutdown()
    assert ex.sup.exit_plan("a") is None


def test_the_core_accounts_for_an_exit_after_a_plan_as_before():
    # The plan is a prediction; the exit is still handled (and charged) by the core.
    ex = sup_of(worker("a"), intensity=1, period=10)
    assert ex.sup.exit_plan("a") is not None
    ex.exit("a")
    assert ex.sup.restart_times == (0.0,)
    assert ex.sup.which_child("a").restarts == 1


# -- indexed lookups -------------------------------------------------------------------------


def test_lookup_by_pid_follows_restarts_and_forgets_old_pids():
    ex = sup_of(worker("a"), worker("b"))
    old = ex.pid("a")
    ex.exit("a", ExitReason(ExitKind.KILLED, signal=9))
    new = ex.pid("a")
    assert ex.sup.which_child(new).id == "a"
    with pytest.raises(ChildNotFound):
        ex.sup.which_child(old)
    b_pid = ex.pid("b")
    ex.ok("terminate_child", "b")
    with pytest.raises(ChildNotFound):
        ex.sup.which_child(b_pid)


def test_rest_for_one_group_after_children_come_and_go():
    ex = sup_of(worker("a"), worker("b"), worker("c"), strategy="rest_for_one", intensity=10)
    ex.ok("terminate_child", "b")
    ex.ok("delete_child", "b")
    ex.ok("start_child", worker("d"))
    mark = len(ex.log)
    ex.exit("c")
    assert ex.log[mark:] == [("terminate", "d"), ("start", "c"), ("start", "d")]
    assert [c.id for c in ex.sup.children()] == ["a", "c", "d"]


def test_a_thousand_children_keep_their_order_through_exits():
    children = [worker(f"w{i}") for i in range(1000)]
    ex = running(SupervisorSpec("big", children=children, intensity=10**6), FakeClock())
    for i in range(0, 1000, 7):
        ex.exit(f"w{i}")
    assert [c.id for c in ex.sup.children()] == [f"w{i}" for i in range(1000)]
    assert ex.sup.count_children().active == 1000


def test_child_info_is_built_once_per_change():
    # which_children at 10,000 children must not rebuild every record on every call.
    ex = sup_of(worker("a"), worker("b"))
    first = ex.sup.which_child("a")
    assert ex.sup.which_child("a") is first
    assert ex.sup.which_children()[1] is first
    ex.ok("pause_child", "a")
    paused = ex.sup.which_child("a")
    assert paused is not first and paused.state == "paused"
    ex.exit("a")
    after = ex.sup.which_child("a")
    assert after.state == "running" and after.restarts == 1 and after.pid != first.pid
