"""The core's calls for an update in place (docs/otp-semantics.md, section 13):
replace_child, store_childspec, insert_child, move_child, on a fake executor."""

from __future__ import annotations

import pytest

from supervision import (
    ChildRunning,
    ChildSpec,
    EventKind,
    SpecError,
    StartChild,
    StartError,
    Strategy,
    SupervisorSpec,
    TooManyChildren,
)
from tests.support.fake_executor import FakeExecutor, running, worker


def sup_of(*children: ChildSpec | SupervisorSpec, **flags) -> FakeExecutor:
    return running(SupervisorSpec("sup", children=list(children), **flags))


def order(ex: FakeExecutor) -> list[str]:
    return [c.id for c in ex.sup.children()]


def test_replace_child_stops_the_old_one_and_starts_the_new_spec_at_its_place():
    ex = sup_of(worker("a"), worker("b"), worker("c"))
    old_pid, mark = ex.pid("b"), len(ex.log)
    new = worker("b", min_uptime=1.0)
    info = ex.ok("replace_child", "b", new)
    assert ex.log[mark:] == [("terminate", "b"), ("start", "b")]
    assert info.pid == ex.pid("b") != old_pid
    assert order(ex) == ["a", "b", "c"]
    assert ex.sup.get_childspec("b") is new
    assert set(ex.live()) == {"a", "b", "c"}


def test_a_failed_replacement_stays_stopped_with_the_new_spec_and_says_why():
    """The tree an update converges from: the next update sees the live spec."""
    ex = sup_of(worker("a"), worker("b"))
    new = worker("b", min_uptime=2.0)
    ex.fail_starts("b")
    reply = ex.call("replace_child", "b", new)
    assert isinstance(reply.error, StartError)
    info = ex.sup.which_child("b")
    assert (info.state, ex.sup.get_childspec("b")) == ("stopped", new)
    assert info.last_exit is not None
    assert order(ex) == ["a", "b"]
    assert EventKind.START_FAILED in ex.event_kinds()
    # A later replacement of it works (it is not running: nothing to stop).
    fixed = worker("b", min_uptime=3.0)
    assert ex.ok("replace_child", "b", fixed).state == "running"


def test_a_replacement_takes_its_new_restart_limit():
    """A restart_limit an update adds holds from the replacement on: the flapping
    child is left failed by its own limit, its supervisor charged nothing."""
    ex = sup_of(worker("a"), worker("b"), intensity=5, period=60.0)
    ex.ok("replace_child", "b", worker("b", restart_limit=(1, 60.0)))
    for _ in range(2):
        ex.clock.advance(1.0)
        ex.exit("b")
        ex.drain()
    assert ex.sup.which_child("b").state == "failed"
    assert ex.sup.restart_times == () and ex.sup.mode == "running"
    assert ex.live() == ["a"]


def test_an_operators_settle_goes_with_its_start_only():
    """replace_child and insert_child hand their `settle` to the start they ask for
    (what `nannytree update --settle` means); the restarts that follow have none."""
    ex = sup_of(worker("a"), worker("b"))
    mark = len(ex.actions)
    ex.run(ex.sup.replace_child("b", worker("b", min_uptime=1.0), ex.clock.now, settle=1.5))
    ex.run(ex.sup.insert_child(worker("c"), "a", ex.clock.now, settle=0.25))
    starts = [a for a in ex.actions[mark:] if isinstance(a, StartChild)]
    assert [(a.child_id, a.settle) for a in starts] == [("b", 1.5), ("c", 0.25)]
    mark = len(ex.actions)
    ex.exit("b")
    ex.drain()
    starts = [a for a in ex.actions[mark:] if isinstance(a, StartChild)]
    assert [(a.child_id, a.settle) for a in starts] == [("b", 0.0)]
    for bad in (-1.0, float("nan"), True, "1"):
        with pytest.raises(ValueError, match="settle must be seconds >= 0"):
            ex.sup.replace_child("b", worker("b"), ex.clock.now, settle=bad)
    assert ex.sup.which_child("b").state == "running"


def test_a_replaced_temporary_child_is_not_removed_by_its_stop():
    ex = sup_of(worker("t", restart="temporary"))
    ex.ok("replace_child", "t", worker("t", restart="temporary", min_uptime=1.0))
    assert ex.sup.which_child("t").state == "running" and ex.removed == []


def test_replace_child_keeps_the_id():
    ex = sup_of(worker("a"))
    with pytest.raises(SpecError, match="must keep id 'a'"):
        ex.sup.replace_child("a", worker("z"), ex.clock.now)
    assert ex.live() == ["a"]


def test_store_childspec_replaces_a_nested_supervisors_spec_without_touching_it():
    pool = SupervisorSpec("pool", children=[worker("w")])
    ex = sup_of(worker("a"), pool)
    mark = len(ex.log)
    pool2 = SupervisorSpec("pool", children=[worker("w", min_uptime=1.0)])
    ex.ok("store_childspec", "pool", pool2)
    assert ex.log[mark:] == [] and ex.sup.get_childspec("pool") is pool2


def test_store_childspec_refuses_a_running_worker():
    ex = sup_of(worker("a"))
    with pytest.raises(ChildRunning):
        ex.sup.store_childspec("a", worker("a", min_uptime=1.0), ex.clock.now)


def test_insert_child_places_the_new_child_where_asked():
    ex = sup_of(worker("a"), worker("c"))
    ex.ok("insert_child", worker("b"), "a")
    ex.ok("insert_child", worker("first"), None)
    assert order(ex) == ["first", "a", "b", "c"]
    # The order is the start order: a shutdown stops the last first.
    mark = len(ex.log)
    ex.shutdown()
    assert ex.terminated_ids(mark) == ["c", "b", "a", "first"]


def test_a_failed_insert_leaves_no_child():
    ex = sup_of(worker("a"))
    ex.fail_starts("b")
    assert isinstance(ex.call("insert_child", worker("b"), None).error, StartError)
    assert order(ex) == ["a"]


def test_move_child_changes_the_order_only():
    ex = sup_of(worker("a"), worker("b"), worker("c"), strategy=Strategy.REST_FOR_ONE)
    mark = len(ex.log)
    ex.ok("move_child", "c", None)
    assert order(ex) == ["c", "a", "b"] and ex.log[mark:] == []
    # rest_for_one follows the new order: a crash of c restarts everything after it.
    ex.exit("c")
    assert ex.started_ids(mark) == ["c", "a", "b"]


def test_replacing_a_child_in_its_restart_loop_ends_the_loop_and_starts_it_once():
    """A child whose restarts keep failing (retries pending in the mailbox) is
    replaced: the pending retries find nothing to do, one process runs the new spec."""
    ex = sup_of(worker("a"), worker("b"), intensity=10, period=60)
    ex.fail_starts("b", times=1)
    ex.exit("b")
    assert ex.sup.which_child("b").state == "restarting"
    assert ex.mailbox, "a retry is pending"
    new = worker("b", min_uptime=1.0)
    mark = len(ex.log)
    assert ex.ok("replace_child", "b", new).state == "running"
    ex.drain()  # the retry scheduled before the replacement
    assert ex.started_ids(mark) == ["b"] and ex.live().count("b") == 1
    assert ex.sup.which_child("b").state == "running" and ex.sup.get_childspec("b") is new


def test_replacing_a_paused_child_stops_and_starts_it():
    ex = sup_of(worker("a"))
    ex.ok("pause_child", "a")
    mark = len(ex.log)
    ex.ok("replace_child", "a", worker("a", min_uptime=1.0))
    assert ex.log[mark:] == [("terminate", "a"), ("start", "a")]
    assert ex.sup.which_child("a").state == "running"


# -- change_settings: OTP's code_change --------------------------------------------------


def test_a_raised_intensity_holds_at_once_and_keeps_the_restarts_charged():
    ex = sup_of(worker("a"), worker("b"), intensity=1, period=60.0)
    ex.exit("a")
    ex.drain()
    charged = ex.sup.restart_times
    assert len(charged) == 1 and ex.sup.restart_budget(ex.clock.now) == 0
    pids = {c: ex.pid(c) for c in ("a", "b")}
    mark = len(ex.log)
    new = SupervisorSpec("sup", children=[worker("a"), worker("b")], intensity=3, period=60.0)
    ex.ok("change_settings", new)
    assert ex.log[mark:] == []  # nothing stopped, nothing started
    assert {c: ex.pid(c) for c in ("a", "b")} == pids
    assert ex.sup.restart_times == charged
    assert ex.sup.restart_budget(ex.clock.now) == 2
    for _ in range(2):  # two more restarts: intensity 1 would have given up at the first
        ex.clock.advance(1.0)
        ex.exit("b")
        ex.drain()
    assert ex.sup.mode == "running" and set(ex.live()) == {"a", "b"}
    ex.clock.advance(1.0)
    ex.exit("b")  # the fourth in 60 s: beyond 3
    ex.drain()
    assert ex.sup.mode == "stopped"
    assert EventKind.MAX_INTENSITY_REACHED in ex.event_kinds()


def test_a_shorter_period_forgets_older_restarts_by_the_new_measure():
    ex = sup_of(worker("a"), intensity=1, period=60.0)
    ex.exit("a")
    ex.drain()
    ex.clock.advance(10.0)
    assert ex.sup.restart_budget(ex.clock.now) == 0
    ex.ok("change_settings", SupervisorSpec("sup", children=[worker("a")], period=5.0))
    assert ex.sup.restart_budget(ex.clock.now) == 1


def test_a_strategy_or_a_template_cannot_change_in_place():
    ex = sup_of(worker("a"))
    with pytest.raises(SpecError, match="strategy cannot change while it runs"):
        ex.ok(
            "change_settings",
            SupervisorSpec("sup", children=[worker("a")], strategy=Strategy.ONE_FOR_ALL),
        )
    with pytest.raises(SpecError, match="'id' is 'other'"):
        ex.ok("change_settings", SupervisorSpec("other", children=[worker("a")]))
    pool = running(
        SupervisorSpec("pool", strategy=Strategy.SIMPLE_ONE_FOR_ONE, children=[worker("job")])
    )
    with pytest.raises(SpecError, match="children cannot change while it runs"):
        pool.ok(
            "change_settings",
            SupervisorSpec("pool", strategy=Strategy.SIMPLE_ONE_FOR_ONE, children=[worker("job2")]),
        )
    same = SupervisorSpec(
        "pool", strategy=Strategy.SIMPLE_ONE_FOR_ONE, children=(worker("job"),), max_children=1
    )
    pool.ok("change_settings", same)  # a tuple of the same template is the same
    pool.ok("start_child", ())
    with pytest.raises(TooManyChildren):
        pool.ok("start_child", ())
