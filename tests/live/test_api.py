"""The OTP API of NannyActor on real processes: results and errors."""

from __future__ import annotations

import signal

import psutil
import pytest

from actors import NannyActor
from actors.testing import wait_gone
from supervision import (
    AlreadyPresent,
    AlreadyStarted,
    ChildNotFound,
    ChildNotRunning,
    ChildRunning,
    ChildSpec,
    EventKind,
    ExitKind,
    SpecError,
    StartError,
    SupervisorSpec,
    SupervisorStartError,
)
from tests.support import children_by_id, wait_event
from tests.targets import children


def _spec(*kids: ChildSpec) -> SupervisorSpec:
    return SupervisorSpec(id="root", intensity=3, children=list(kids))


def test_which_children_and_count_children(tree):
    ref = tree(
        _spec(
            ChildSpec(id="a", command=["sleep", "60"]),
            ChildSpec(id="b", target=children.sleep_forever),
        )
    )
    infos = ref.proxy().which_children().get()
    assert [i.id for i in infos] == ["b", "a"]  # OTP: reverse start order
    assert all(i.type == "worker" and i.state == "running" and i.incarnation == 1 for i in infos)
    counts = ref.proxy().count_children().get()
    assert (counts.specs, counts.active, counts.workers, counts.supervisors) == (2, 2, 2, 0)


def test_start_child_appends_and_refuses_duplicates(tree):
    ref = tree(_spec(ChildSpec(id="a", command=["sleep", "60"])))
    nanny = ref.proxy()
    info = nanny.start_child(ChildSpec(id="b", command=["sleep", "60"])).get()
    assert info.id == "b" and info.state == "running" and info.pid
    assert [i.id for i in nanny.which_children().get()] == ["b", "a"]
    with pytest.raises(AlreadyStarted) as err:
        nanny.start_child(ChildSpec(id="b", command=["sleep", "60"])).get()
    assert err.value.child == "b" and err.value.pid == info.pid
    nanny.terminate_child("b").get()
    with pytest.raises(AlreadyPresent):
        nanny.start_child(ChildSpec(id="b", command=["sleep", "60"])).get()


def test_terminate_restart_delete_child(tree):
    ref = tree(_spec(ChildSpec(id="a", command=["sleep", "60"])))
    nanny = ref.proxy()
    pid = children_by_id(ref)["a"].pid
    nanny.terminate_child("a").get()
    assert wait_gone([pid]) == []
    assert children_by_id(ref)["a"].state == "stopped"
    nanny.terminate_child("a").get()  # idempotent, as OTP
    info = nanny.restart_child("a").get()
    assert info.state == "running" and info.pid != pid and info.incarnation == 2
    assert info.restarts == 0  # an API restart is not an automatic one
    with pytest.raises(ChildRunning):
        nanny.restart_child("a").get()
    with pytest.raises(ChildRunning):
        nanny.delete_child("a").get()
    nanny.terminate_child("a").get()
    nanny.delete_child("a").get()
    assert nanny.which_children().get() == []
    # the id is free again, with a new spec
    info = nanny.start_child(ChildSpec(id="a", target=children.sleep_forever)).get()
    assert info.state == "running"


def test_unknown_child_ids_give_clear_errors(tree):
    ref = tree(_spec(ChildSpec(id="a", command=["sleep", "60"])))
    nanny = ref.proxy()
    for call in (nanny.terminate_child, nanny.restart_child, nanny.delete_child):
        with pytest.raises(ChildNotFound) as err:
            call("nope").get()
        assert err.value.child == "nope" and err.value.supervisor == "root"
        assert "which_children()" in str(err.value)


def test_bad_specs_give_clear_errors():
    with pytest.raises(SpecError) as err:
        ChildSpec(id="job", command="sleep 10")
    assert (err.value.child, err.value.field) == ("job", "command")
    assert "['sleep', '10']" in str(err.value)
    with pytest.raises(SpecError) as err:
        ChildSpec(id="job", target=print, restart="sometimes")
    assert err.value.field == "restart" and "Restart.TRANSIENT" in str(err.value)
    with pytest.raises(SpecError) as err:
        SupervisorSpec(id="root", children=[ChildSpec(id="x", target=print)] * 2)
    assert err.value.field == "id" and "duplicate" in str(err.value)


def test_start_child_with_a_bad_spec_type_is_refused(tree):
    ref = tree(_spec())
    with pytest.raises(SpecError):
        ref.proxy().start_child("not a spec").get()


def test_command_not_found_fails_start_with_reason(tree):
    ref = tree(_spec(ChildSpec(id="a", command=["sleep", "60"])))
    with pytest.raises(StartError) as err:
        ref.proxy().start_child(ChildSpec(id="ghost", command=["/no/such/binary"])).get()
    assert err.value.child == "ghost"
    assert err.value.reason.kind is ExitKind.START_FAILURE
    assert "/no/such/binary" in str(err.value)
    assert "ghost" not in children_by_id(ref)  # a failed start_child keeps nothing
    assert children_by_id(ref)["a"].state == "running"  # the rest of the tree runs on


def test_init_failure_stops_started_children_in_reverse_and_names_the_child(tmp_path):
    path = tmp_path / "stops"
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(
                id="one", target=children.record_stop, args=(str(path), "one"), ready="notify"
            ),
            ChildSpec(
                id="two", target=children.record_stop, args=(str(path), "two"), ready="notify"
            ),
            ChildSpec(id="bad", command=["/no/such/binary"]),
            ChildSpec(id="never", command=["sleep", "60"]),
        ],
    )
    with pytest.raises(SupervisorStartError) as err:
        NannyActor.start(spec)
    assert err.value.child == "bad" and err.value.supervisor == "root"
    assert path.read_text().split() == ["two", "one"]


def test_unpicklable_target_fails_start_with_a_fix():
    import threading

    lock = threading.Lock()
    spec = SupervisorSpec(id="root", children=[ChildSpec(id="locky", target=lambda: lock)])
    with pytest.raises(SupervisorStartError) as err:
        NannyActor.start(spec)
    assert err.value.child == "locky"
    assert "cannot be pickled" in str(err.value)


def test_signal_pause_resume(tree):
    ref = tree(_spec(ChildSpec(id="a", target=children.sleep_forever, shutdown=5.0)))
    nanny = ref.proxy()
    pid = children_by_id(ref)["a"].pid
    nanny.pause_child("a").get()
    assert children_by_id(ref)["a"].state == "paused"
    import psutil

    from tests.support import wait_until

    wait_until(lambda: psutil.Process(pid).status() == psutil.STATUS_STOPPED, what="SIGSTOP")
    nanny.resume_child("a").get()
    assert children_by_id(ref)["a"].state == "running"
    nanny.pause_child("a").get()
    nanny.terminate_child("a").get()  # a paused child still stops (SIGCONT follows SIGTERM)
    assert wait_event(ref, EventKind.CHILD_TERMINATED, "a").reason.signal == signal.SIGTERM
    with pytest.raises(ChildNotRunning):
        nanny.pause_child("a").get()
    with pytest.raises(ChildNotRunning):
        nanny.signal_child("a", signal.SIGHUP).get()


def test_signal_child_delivers_the_signal(tree):
    ref = tree(_spec(ChildSpec(id="a", command=["sleep", "60"])))
    ref.proxy().signal_child("a", signal.SIGUSR1).get()
    reason = wait_event(ref, EventKind.CHILD_EXITED, "a").reason
    assert reason.kind is ExitKind.KILLED and reason.signal == signal.SIGUSR1


def test_events_are_ordered_records(tree):
    ref = tree(_spec(ChildSpec(id="a", command=["sleep", "60"])))
    events = ref.proxy().events().get()
    assert [e.context for e in events] == [EventKind.SUPERVISOR_STARTED, EventKind.CHILD_STARTED]
    assert events[1].supervisor == "root" and events[1].offender == "a" and events[1].pid


def test_a_tree_made_then_started_is_held_while_it_starts() -> None:
    """`Tree(spec)` then `tree.start()` (the run host holds the tree while it starts);
    a second start is refused, and `Tree.start(spec)` still makes and starts one."""
    from actors import Tree

    spec = SupervisorSpec(id="held", children=[ChildSpec("c", command=["sleep", "1000"])])
    tree = Tree(spec)
    with pytest.raises(RuntimeError, match="not started"):
        tree.ref  # noqa: B018
    try:
        assert tree.start() is tree
        pid = tree.nanny.which_child("c").get().pid
        assert pid is not None and psutil.pid_exists(pid)
        with pytest.raises(RuntimeError, match="already started"):
            tree.start()
    finally:
        tree.stop()
    assert not wait_gone([pid])
    other = Tree.start(spec)
    try:
        assert other.nanny.which_child("c").get().pid != pid
    finally:
        other.stop()
