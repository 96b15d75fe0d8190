"""auto_shutdown and significant children (section 8)."""

from __future__ import annotations

import pytest

from supervision import (
    AutoShutdown,
    EventKind,
    ExitKind,
    ExitReason,
    Supervisor,
    SupervisorSpec,
)
from tests.support.fake_executor import ABNORMAL, KILLED, FakeExecutor, running, worker

ANY, ALL = AutoShutdown.ANY_SIGNIFICANT, AutoShutdown.ALL_SIGNIFICANT


def significant(child_id: str, restart: str = "transient"):
    return worker(child_id, restart=restart, significant=True)


def auto(policy: AutoShutdown, *children, strategy: str = "one_for_one", **flags) -> FakeExecutor:
    spec = SupervisorSpec(
        "sup",
        strategy=strategy,
        auto_shutdown=policy,
        children=list(children),
        intensity=flags.pop("intensity", 5),
        **flags,
    )
    return running(spec)


def assert_auto_shut_down(ex: FakeExecutor, mark: int, stopped: list[str]) -> None:
    assert ex.log[mark:] == [("terminate", c) for c in stopped]
    assert EventKind.AUTO_SHUTDOWN in ex.event_kinds()
    [exit_] = ex.exits
    assert exit_.reason.kind is ExitKind.SHUTDOWN
    assert exit_.reason.is_normal
    assert exit_.error is None


@pytest.mark.parametrize("reason", [ExitReason.normal(), ExitReason.shutdown("done")])
def test_any_significant_shuts_down_when_a_significant_transient_ends_normally(reason):
    ex = auto(ANY, worker("a"), significant("s"), worker("c"))
    mark = len(ex.log)
    ex.exit("s", reason)
    assert_auto_shut_down(ex, mark, ["c", "a"])
    event = next(e for e in ex.events if e.context is EventKind.AUTO_SHUTDOWN)
    assert event.offender == "s"
    assert event.detail == "any_significant"


@pytest.mark.parametrize("reason", [ExitReason.normal(), ABNORMAL, KILLED])
def test_any_significant_shuts_down_when_a_significant_temporary_ends_for_any_reason(reason):
    ex = auto(ANY, worker("a"), significant("t", "temporary"))
    mark = len(ex.log)
    ex.exit("t", reason)
    assert_auto_shut_down(ex, mark, ["a"])


@pytest.mark.parametrize("policy", [ANY, ALL])
def test_significant_transient_abnormal_exit_is_a_restart_not_a_shutdown(policy):
    ex = auto(policy, worker("a"), significant("s"))
    mark = len(ex.log)
    ex.exit("s", KILLED)
    assert ex.log[mark:] == [("start", "s")]
    assert not ex.exits
    assert EventKind.AUTO_SHUTDOWN not in ex.event_kinds()


@pytest.mark.parametrize("policy", [ANY, ALL])
def test_non_significant_child_ending_does_not_shut_down(policy):
    ex = auto(policy, worker("t", restart="transient"), significant("s"))
    ex.exit("t", ExitReason.normal())
    assert not ex.exits


def test_all_significant_waits_for_the_last_significant_child():
    ex = auto(ALL, worker("a"), significant("s1"), significant("s2", "temporary"))
    ex.exit("s1", ExitReason.normal())
    assert not ex.exits
    mark = len(ex.log)
    ex.exit("s2", ABNORMAL)
    assert_auto_shut_down(ex, mark, ["a"])


def test_all_significant_counts_a_child_stopped_by_terminate_child_as_gone():
    ex = auto(ALL, worker("a"), significant("s1"), significant("s2"))
    ex.ok("terminate_child", "s1")
    assert not ex.exits
    mark = len(ex.log)
    ex.exit("s2", ExitReason.normal())
    assert_auto_shut_down(ex, mark, ["a"])


@pytest.mark.parametrize("policy", [ANY, ALL])
def test_terminate_child_of_a_significant_child_never_shuts_down(policy):
    ex = auto(policy, worker("a"), significant("s"))
    ex.ok("terminate_child", "s")
    assert not ex.exits
    assert EventKind.AUTO_SHUTDOWN not in ex.event_kinds()


def test_all_significant_counts_a_restarting_significant_child_as_still_there():
    ex = auto(ALL, significant("s1"), significant("s2"))
    ex.fail_starts("s1", times=100)
    ex.exit("s1", ABNORMAL)  # restart fails: s1 is restarting
    assert ex.sup.which_child("s1").state == "restarting"
    ex.exit("s2", ExitReason.normal())
    assert not ex.exits
    assert EventKind.AUTO_SHUTDOWN not in ex.event_kinds()


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
@pytest.mark.parametrize("policy", [ANY, ALL])
def test_significant_bystanders_stopped_by_a_group_restart_do_not_shut_down(strategy, policy):
    ex = auto(
        policy,
        worker("a"),
        significant("t", "temporary"),
        significant("s"),
        strategy=strategy,
    )
    mark = len(ex.log)
    ex.exit("a", ABNORMAL)
    assert ex.log[mark:] == [
        ("terminate", "s"),
        ("terminate", "t"),
        ("start", "a"),
        ("start", "s"),
    ]
    assert not ex.exits
    assert [c.id for c in ex.sup.children()] == ["a", "s"]


def test_never_ignores_children_ending():
    ex = auto(AutoShutdown.NEVER, worker("t", restart="temporary"))
    ex.exit("t", ExitReason.normal())
    assert not ex.exits


def test_auto_shutdown_escalates_through_a_transient_significant_nested_supervisor():
    # The inner supervisor shuts itself down; its parent sees a normal exit of a
    # significant transient child and shuts down too.
    inner_spec = SupervisorSpec(
        "inner",
        auto_shutdown=ANY,
        children=[significant("job")],
        restart="transient",
        significant=True,
    )
    inner = running(inner_spec)
    inner.exit("job", ExitReason.normal())
    [inner_exit] = inner.exits
    outer = running(SupervisorSpec("outer", auto_shutdown=ANY, children=[worker("a"), inner_spec]))
    mark = len(outer.log)
    outer.exit("inner", inner_exit.reason)
    assert_auto_shut_down(outer, mark, ["a"])


def test_auto_shutdown_does_not_happen_during_supervisor_shutdown():
    sup = Supervisor(SupervisorSpec("sup", auto_shutdown=ANY, children=[significant("s")]))
    ex = FakeExecutor(sup)
    ex.start()
    ex.shutdown()
    assert EventKind.AUTO_SHUTDOWN not in ex.event_kinds()
    assert ex.exits[0].reason == ExitReason.shutdown()
