"""The dynamic API (section 9): every call's success and every error it can give."""

from __future__ import annotations

import pytest

from supervision import (
    AlreadyPresent,
    AlreadyStarted,
    ChildCounts,
    ChildError,
    ChildInfo,
    ChildNotFound,
    ChildRestarting,
    ChildRunning,
    EventKind,
    ExitReason,
    Reply,
    SimpleOneForOneError,
    SpecError,
    StartChild,
    StartError,
    Supervisor,
    SupervisorNotRunning,
    SupervisorSpec,
    TerminateChild,
)
from tests.support.fake_executor import FakeExecutor, running, worker


def sup_of(*children, **flags) -> FakeExecutor:
    return running(SupervisorSpec("sup", children=list(children), **flags))


def simple(**flags) -> FakeExecutor:
    return running(
        SupervisorSpec("pool", strategy="simple_one_for_one", children=[worker("w")], **flags)
    )


def ids(ex: FakeExecutor) -> list[str]:
    return [c.id for c in ex.sup.children()]


def restarting(ex: FakeExecutor, child_id: str) -> FakeExecutor:
    """Leave `child_id` waiting for a restart retry (its retry stays queued)."""
    ex.fail_starts(child_id, times=100)
    ex.exit(child_id)
    assert ex.sup.which_child(child_id).state == "restarting"
    return ex


# -- start_child ---------------------------------------------------------------------


def test_start_child_starts_the_spec_appends_it_and_replies_its_info():
    ex = sup_of(worker("a"), worker("b"))
    mark = len(ex.log)
    info = ex.ok("start_child", worker("new"))
    assert ex.log[mark:] == [("start", "new")]
    assert isinstance(info, ChildInfo)
    assert (info.id, info.pid, info.state) == ("new", ex.pid("new"), "running")
    assert ids(ex) == ["a", "b", "new"]
    assert ex.sup.get_childspec("new") == worker("new")


def test_start_child_with_the_id_of_a_running_child_is_already_started():
    ex = sup_of(worker("a"))
    reply = ex.call("start_child", worker("a", restart="temporary"))
    assert isinstance(reply.error, AlreadyStarted)
    assert reply.error.pid == ex.pid("a")
    assert reply.error.child == "a" and reply.error.supervisor == "sup"
    assert ex.sup.get_childspec("a").restart == "permanent", "the old spec is kept"


def test_start_child_with_the_id_of_a_stopped_child_is_already_present():
    ex = sup_of(worker("a"))
    ex.ok("terminate_child", "a")
    reply = ex.call("start_child", worker("a"))
    assert isinstance(reply.error, AlreadyPresent)
    assert "restart_child()" in str(reply.error)


def test_start_child_with_the_id_of_a_restarting_child_is_already_present():
    ex = restarting(sup_of(worker("a"), intensity=5), "a")
    reply = ex.call("start_child", worker("a"))
    assert isinstance(reply.error, AlreadyPresent)


def test_start_child_refuses_what_is_not_a_spec():
    ex = sup_of()
    reply = ex.call("start_child", {"id": "a"})
    assert isinstance(reply.error, SpecError)
    assert reply.error.field == "spec"


def test_start_child_refuses_a_significant_child_when_auto_shutdown_is_never():
    ex = sup_of()
    reply = ex.call("start_child", worker("s", restart="transient", significant=True))
    assert isinstance(reply.error, SpecError)
    assert (reply.error.child, reply.error.field) == ("s", "significant")
    assert ids(ex) == []


def test_start_child_that_fails_to_start_replies_start_error_and_keeps_nothing():
    ex = sup_of(worker("a"))
    ex.fail_starts("b", reason=ExitReason.start_failure("exec failed"))
    reply = ex.call("start_child", worker("b"))
    assert isinstance(reply.error, StartError)
    assert reply.error.child == "b"
    assert reply.error.reason == ExitReason.start_failure("exec failed")
    assert ids(ex) == ["a"]
    assert not ex.mailbox, "an API start is never retried"
    assert ex.ok("start_child", worker("b")).id == "b"


def test_start_child_is_not_charged_to_the_intensity():
    ex = sup_of(intensity=0)
    ex.ok("start_child", worker("a"))
    assert ex.sup.restart_times == ()


# -- terminate_child -----------------------------------------------------------------


def test_terminate_child_stops_it_with_its_spec_and_keeps_the_spec():
    spec = worker("a", shutdown="brutal_kill")
    ex = sup_of(spec, worker("b"))
    actions = ex.sup.terminate_child("a", ex.clock.now)
    assert actions[-1] == TerminateChild("a", spec)
    actions = ex.run(actions)
    assert Reply(None) in actions
    info = ex.sup.which_child("a")
    assert (info.state, info.pid) == ("stopped", None)
    assert ids(ex) == ["a", "b"]
    assert ex.sup.restart_times == ()
    assert EventKind.CHILD_TERMINATED in ex.event_kinds()


def test_terminate_child_deletes_a_temporary_child():
    ex = sup_of(worker("t", restart="temporary"))
    assert ex.ok("terminate_child", "t") is None
    assert ids(ex) == []


def test_terminate_child_of_a_stopped_child_is_ok_and_does_nothing():
    ex = sup_of(worker("a"))
    ex.ok("terminate_child", "a")
    mark = len(ex.log)
    assert ex.ok("terminate_child", "a") is None
    assert ex.log[mark:] == []


def test_terminate_child_of_an_unknown_id_is_not_found():
    ex = sup_of(worker("a"))
    reply = ex.call("terminate_child", "nope")
    assert isinstance(reply.error, ChildNotFound)
    assert isinstance(reply.error, LookupError)
    assert "'nope'" in str(reply.error) and "'sup'" in str(reply.error)


def test_terminate_child_by_pid_on_a_static_supervisor_is_not_found():
    ex = sup_of(worker("a"))
    reply = ex.call("terminate_child", ex.pid("a"))
    assert isinstance(reply.error, ChildNotFound)
    assert ex.sup.which_child("a").state == "running"


def test_terminate_child_by_pid_on_a_simple_supervisor_removes_it():
    ex = simple()
    ex.ok("start_child", ())
    assert ex.ok("terminate_child", ex.pid("w-1")) is None
    assert ids(ex) == []


def test_terminate_child_by_an_unknown_pid_on_a_simple_supervisor_is_not_found():
    ex = simple()
    reply = ex.call("terminate_child", 999_999)
    assert isinstance(reply.error, ChildNotFound)


def test_terminate_child_of_a_simple_supervisor_by_id_is_a_departure_from_otp():
    # OTP answers {error, simple_one_for_one} to any id; nannytree's dynamic children
    # have ids (docs/otp-semantics.md section 12): one names a child, any other is not_found.
    ex = simple()
    ex.ok("start_child", ())
    ex.ok("start_child", ())
    for key in ("w", "w-3", "nope"):
        error = ex.call("terminate_child", key).error
        assert type(error) is ChildNotFound and repr(key) in str(error)
    assert ex.ok("terminate_child", "w-1") is None
    assert ids(ex) == ["w-2"]


# -- restart_child ---------------------------------------------------------------------


def test_restart_child_starts_a_stopped_child_in_place_uncharged():
    ex = sup_of(worker("a"), worker("b"), worker("c"), intensity=0)
    ex.ok("terminate_child", "a")
    mark = len(ex.log)
    info = ex.ok("restart_child", "a")
    assert ex.log[mark:] == [("start", "a")]
    assert info.state == "running" and info.pid == ex.pid("a")
    assert ids(ex) == ["a", "b", "c"], "restart_child does not move the child"
    assert ex.sup.restart_times == ()
    assert not ex.exits


def test_restart_child_of_a_running_child_is_refused():
    ex = sup_of(worker("a"))
    reply = ex.call("restart_child", "a")
    assert isinstance(reply.error, ChildRunning)
    assert "terminate_child()" in str(reply.error)


def test_restart_child_of_a_restarting_child_is_refused():
    ex = restarting(sup_of(worker("a"), intensity=5), "a")
    reply = ex.call("restart_child", "a")
    assert isinstance(reply.error, ChildRestarting)


def test_restart_child_of_an_unknown_child_is_not_found():
    ex = sup_of(worker("a"))
    assert isinstance(ex.call("restart_child", "b").error, ChildNotFound)


def test_restart_child_that_fails_replies_start_error_and_stays_stopped_without_retry():
    ex = sup_of(worker("a"), intensity=5)
    ex.ok("terminate_child", "a")
    ex.fail_starts("a")
    reply = ex.call("restart_child", "a")
    assert isinstance(reply.error, StartError)
    assert ex.sup.which_child("a").state == "stopped"
    assert not ex.mailbox
    assert ex.sup.restart_times == ()


def test_restart_child_on_a_simple_supervisor_is_refused():
    ex = simple()
    ex.ok("start_child", ())
    reply = ex.call("restart_child", "w-1")
    assert isinstance(reply.error, SimpleOneForOneError)
    assert "simple_one_for_one" in str(reply.error)


# -- delete_child ------------------------------------------------------------------------


def test_delete_child_removes_a_stopped_child():
    ex = sup_of(worker("a"), worker("b"))
    ex.ok("terminate_child", "a")
    assert ex.ok("delete_child", "a") is None
    assert ids(ex) == ["b"]
    assert EventKind.CHILD_DELETED in ex.event_kinds()
    ex.ok("start_child", worker("a"))
    assert ids(ex) == ["b", "a"]


def test_delete_child_of_a_running_child_is_refused():
    ex = sup_of(worker("a"))
    reply = ex.call("delete_child", "a")
    assert isinstance(reply.error, ChildRunning)
    assert ids(ex) == ["a"]


def test_delete_child_of_a_restarting_child_is_refused():
    ex = restarting(sup_of(worker("a"), intensity=5), "a")
    assert isinstance(ex.call("delete_child", "a").error, ChildRestarting)


def test_delete_child_of_an_unknown_child_is_not_found():
    ex = sup_of()
    assert isinstance(ex.call("delete_child", "a").error, ChildNotFound)


def test_delete_child_on_a_simple_supervisor_is_refused():
    ex = simple()
    assert isinstance(ex.call("delete_child", "w-1").error, SimpleOneForOneError)


# -- queries ---------------------------------------------------------------------------


def test_which_children_is_reverse_start_order_and_children_is_start_order():
    ex = sup_of(worker("a"), worker("b"))
    ex.ok("start_child", worker("c"))
    assert [c.id for c in ex.sup.which_children()] == ["c", "b", "a"]
    assert [c.id for c in ex.sup.children()] == ["a", "b", "c"]


def test_which_children_shows_running_stopped_and_restarting():
    ex = sup_of(worker("a"), worker("b"), worker("c"), intensity=5)
    ex.ok("terminate_child", "a")
    restarting(ex, "b")
    shown = {c.id: (c.state, c.pid) for c in ex.sup.which_children()}
    assert shown == {
        "a": ("stopped", None),
        "b": ("restarting", None),
        "c": ("running", ex.pid("c")),
    }


def test_count_children_counts_specs_active_supervisors_and_workers():
    ex = sup_of(worker("a"), worker("b"), worker("c"), SupervisorSpec("sub"), intensity=5)
    ex.ok("terminate_child", "a")
    restarting(ex, "b")
    assert ex.sup.count_children() == ChildCounts(specs=4, active=2, supervisors=1, workers=3)


def test_count_children_of_a_simple_supervisor_counts_one_spec_and_the_dynamic_children():
    ex = simple(intensity=5)
    for _ in range(3):
        ex.ok("start_child", ())
    restarting(ex, "w-2")
    assert ex.sup.count_children() == ChildCounts(specs=1, active=2, supervisors=0, workers=3)


def test_which_child_by_id_and_by_pid():
    ex = sup_of(worker("a"), worker("b"))
    assert ex.sup.which_child("b").pid == ex.pid("b")
    assert ex.sup.which_child(ex.pid("b")).id == "b"
    with pytest.raises(ChildNotFound):
        ex.sup.which_child("nope")
    with pytest.raises(ChildNotFound):
        ex.sup.which_child(123_456)


def test_get_childspec_by_id_and_by_pid():
    spec = worker("a", restart="transient", shutdown=2)
    ex = sup_of(spec)
    assert ex.sup.get_childspec("a") is spec
    assert ex.sup.get_childspec(ex.pid("a")) is spec
    with pytest.raises(ChildNotFound):
        ex.sup.get_childspec("nope")


# -- calls to a supervisor that is not running, or busy ---------------------------------


@pytest.mark.parametrize(
    ("method", "arg"),
    [
        ("start_child", worker("x")),
        ("terminate_child", "a"),
        ("restart_child", "a"),
        ("delete_child", "a"),
    ],
)
def test_api_calls_to_a_stopped_supervisor_fail_with_supervisor_not_running(method, arg):
    ex = sup_of(worker("a"))
    ex.shutdown()
    reply = ex.call(method, arg)
    assert isinstance(reply.error, SupervisorNotRunning)
    assert "'sup'" in str(reply.error)


def test_api_calls_before_start_fail_with_supervisor_not_running():
    sup = Supervisor(SupervisorSpec("sup", children=[worker("a")]))
    with pytest.raises(SupervisorNotRunning):
        sup.terminate_child("a", 0.0)


def test_api_call_while_an_answer_is_pending_is_refused():
    sup = Supervisor(SupervisorSpec("sup", children=[worker("a")]))
    actions = sup.start(0.0)
    assert isinstance(actions[-1], StartChild)
    with pytest.raises(RuntimeError):
        sup.start_child(worker("b"), 0.0)


def test_every_child_error_names_the_supervisor_and_the_child():
    for error in (
        ChildNotFound("sup", "a"),
        AlreadyPresent("sup", "a"),
        AlreadyStarted("sup", "a", 42),
        ChildRunning("sup", "a", "delete"),
        ChildRestarting("sup", "a", "delete"),
        StartError("sup", "a", ExitReason.start_failure("x")),
    ):
        assert isinstance(error, ChildError)
        assert (error.supervisor, error.child) == ("sup", "a")
        assert str(error).startswith("supervisor 'sup', child 'a': ")


def test_terminate_with_dependents_stops_the_later_siblings_first():
    from supervision import ChildSpec, Strategy, Supervisor, SupervisorSpec
    from supervision._actions import Reply, TerminateChild

    spec = SupervisorSpec(
        id="g",
        strategy=Strategy.REST_FOR_ONE,
        children=[ChildSpec(id=c, command=["x"]) for c in ("db", "cache", "app")]
        + [ChildSpec(id="tmp", command=["x"], restart="temporary")],
    )
    core = Supervisor(spec)
    core.start(0.0)
    for n, c in enumerate(("db", "cache", "app", "tmp")):
        core.started(c, 10 + n, 1, 0.0)
    order = []
    actions = core.terminate_child("cache", 1.0, with_dependents=True)
    while True:
        step = next((a for a in actions if isinstance(a, TerminateChild)), None)
        if step is None:
            break
        order.append(step.child_id)
        actions = core.terminated(
            step.child_id, __import__("supervision").ExitReason.shutdown(), 1.0
        )
    assert order == ["tmp", "app", "cache"]
    assert any(isinstance(a, Reply) for a in actions)
    states = {i.id: i.state for i in core.which_children()}
    assert states == {"db": "running", "cache": "stopped", "app": "stopped"}  # tmp forgotten


def test_with_dependents_under_one_for_one_is_the_child_alone():
    from supervision import ChildSpec, Supervisor, SupervisorSpec
    from supervision._actions import TerminateChild

    core = Supervisor(
        SupervisorSpec(id="s", children=[ChildSpec(id=c, command=["x"]) for c in "ab"])
    )
    core.start(0.0)
    core.started("a", 1, 1, 0.0)
    core.started("b", 2, 1, 0.0)
    actions = core.terminate_child("a", 1.0, with_dependents=True)
    assert [a.child_id for a in actions if isinstance(a, TerminateChild)] == ["a"]
