"""One-for-one supervision of real OS processes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from actors._shell._messages import ChildExited
from actors.testing import wait_gone
from supervision import (
    ChildSpec,
    EventKind,
    ExitKind,
    Restart,
    SupervisorSpec,
)
from tests.support import children_by_id, event_log, wait_event
from tests.targets import children


def test_sigkilled_child_comes_back_with_new_pid_siblings_keep_theirs(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=3,
            children=[
                ChildSpec(id="cmd", command=["sleep", "60"]),
                ChildSpec(id="py", target=children.sleep_forever),
                ChildSpec(id="last", command=["sleep", "60"]),
            ],
        )
    )
    before = children_by_id(ref)
    assert all(c.state == "running" and c.pid for c in before.values())
    os.kill(before["py"].pid, signal.SIGKILL)
    event = wait_event(ref, EventKind.CHILD_STARTED, "py", where=lambda e: e.incarnation == 2)
    exited = wait_event(ref, EventKind.CHILD_EXITED, "py")
    assert exited.reason.kind is ExitKind.KILLED and exited.reason.signal == signal.SIGKILL
    after = children_by_id(ref)
    assert after["py"].pid == event.pid != before["py"].pid
    assert after["py"].restarts == 1 and after["py"].incarnation == 2
    assert after["cmd"].pid == before["cmd"].pid and after["last"].pid == before["last"].pid
    assert wait_gone([before["py"].pid]) == []


def test_command_child_restarts_after_kill(tree):
    ref = tree(SupervisorSpec(id="root", children=[ChildSpec(id="c", command=["sleep", "60"])]))
    pid = children_by_id(ref)["c"].pid
    os.kill(pid, signal.SIGKILL)
    event = wait_event(ref, EventKind.CHILD_STARTED, "c", where=lambda e: e.incarnation == 2)
    assert event.pid != pid


def test_lambda_with_closure_runs_as_child(tree, tmp_path):
    out = tmp_path / "out.txt"
    word = "closure-value"

    def target() -> None:
        out.write_text(word)
        children.sleep_forever()

    ref = tree(
        SupervisorSpec(
            id="root",
            children=[ChildSpec(id="lam", target=lambda: target())],
        )
    )
    from tests.support import wait_until

    wait_until(lambda: out.exists() and out.read_text() == word, what="closure wrote its file")
    assert children_by_id(ref)["lam"].state == "running"


def test_transient_child_not_restarted_after_normal_exit(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(id="t", target=children.exit_with, args=(0,), restart=Restart.TRANSIENT)
            ],
        )
    )
    exited = wait_event(ref, EventKind.CHILD_EXITED, "t")
    assert exited.reason.kind is ExitKind.NORMAL
    info = children_by_id(ref)["t"]
    assert info.state == "stopped" and info.pid is None and info.restarts == 0
    # The transient child stays stopped: no start follows its exit.
    starts = [e for e in ref.proxy().events().get() if e.context is EventKind.CHILD_STARTED]
    assert len(starts) == 1


def test_transient_child_restarted_after_abnormal_exit(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=5,
            children=[
                ChildSpec(
                    id="t", target=children.crash_after, args=(0.2, 3), restart=Restart.TRANSIENT
                )
            ],
        )
    )
    exited = wait_event(ref, EventKind.CHILD_EXITED, "t")
    assert exited.reason.kind is ExitKind.EXIT_CODE and exited.reason.code == 3
    wait_event(ref, EventKind.CHILD_STARTED, "t", where=lambda e: e.incarnation == 2)


def test_temporary_child_never_restarted_and_forgotten(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(id="tmp", target=children.exit_with, args=(7,), restart="temporary"),
                ChildSpec(id="stay", command=["sleep", "60"]),
            ],
        )
    )
    wait_event(ref, EventKind.CHILD_DELETED, "tmp")
    assert set(children_by_id(ref)) == {"stay"}
    assert ref.proxy().count_children().get().specs == 1


def test_python_exception_is_the_exit_reason(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="boom",
                    target=children.raise_value_error,
                    args=("bad input 42",),
                    restart="temporary",
                )
            ],
        )
    )
    reason = wait_event(ref, EventKind.CHILD_EXITED, "boom").reason
    assert reason.kind is ExitKind.EXCEPTION
    assert reason.exc_type == "ValueError"
    assert reason.message == "bad input 42"
    assert "raise_value_error" in reason.traceback
    assert not reason.is_normal


def test_intensity_exceeded_ends_tree_and_leaves_no_process(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=2,
            period=30.0,
            children=[
                ChildSpec(id="steady", command=["sleep", "60"]),
                ChildSpec(id="crashy", target=children.exit_with, args=(1,)),
            ],
        )
    )
    log = event_log(ref)
    gave_up = log.wait_for(lambda e: e.context is EventKind.MAX_INTENSITY_REACHED, 10)
    assert gave_up.offender == "crashy"
    log.wait_for(lambda e: e.context is EventKind.SUPERVISOR_STOPPED, 10)
    pids = [e.pid for e in log.snapshot() if e.context is EventKind.CHILD_STARTED]
    assert len(pids) == 1 + 3  # steady once; crashy started, restarted twice, then gave up
    terminated = [e.offender for e in log.snapshot() if e.context is EventKind.CHILD_TERMINATED]
    assert terminated == ["steady"]
    assert wait_gone(pids) == []
    ref.actor_stopped.wait(10)
    assert not ref.is_alive()


def test_child_ignoring_sigterm_is_killed_after_shutdown_time(tree, tmp_path):
    marker = tmp_path / "ignoring"
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="stubborn",
                    target=children.ignore_sigterm,
                    args=(str(marker),),
                    shutdown=0.3,
                )
            ],
        )
    )
    from tests.support import wait_until

    wait_until(marker.exists, what="child installed SIG_IGN")
    pid = children_by_id(ref)["stubborn"].pid
    ref.proxy().terminate_child("stubborn").get()
    event = wait_event(ref, EventKind.CHILD_TERMINATED, "stubborn")
    assert event.reason.kind is ExitKind.SHUTDOWN
    assert event.reason.signal == signal.SIGKILL
    assert "ignored SIGTERM" in event.reason.message
    assert wait_gone([pid]) == []
    assert children_by_id(ref)["stubborn"].state == "stopped"


def test_python_child_finally_runs_on_stop(tree, tmp_path):
    path = tmp_path / "stops"
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(
                    id="a", target=children.record_stop, args=(str(path), "a"), ready="notify"
                )
            ],
        )
    )
    ref.proxy().terminate_child("a").get()
    assert path.read_text() == "a\n"


def test_children_stop_in_reverse_start_order(tmp_path):
    from actors import NannyActor

    path = tmp_path / "stops"
    ids = ["first", "second", "third", "fourth"]
    ref = NannyActor.start(
        SupervisorSpec(
            id="root",
            children=[
                ChildSpec(id=i, target=children.record_stop, args=(str(path), i), ready="notify")
                for i in ids
            ],
        )
    )
    starts = [
        e.offender for e in ref.proxy().events().get() if e.context is EventKind.CHILD_STARTED
    ]
    assert starts == ids
    ref.stop()
    assert path.read_text().split() == list(reversed(ids))


def test_stale_exit_notification_restarts_nothing(tree):
    ref = tree(SupervisorSpec(id="root", children=[ChildSpec(id="c", command=["sleep", "60"])]))
    before = children_by_id(ref)["c"]
    from supervision import ExitReason

    ref.tell(ChildExited("c", before.incarnation - 1, 12345, ExitReason(ExitKind.KILLED, signal=9)))
    ignored = wait_event(ref, EventKind.STALE_EXIT_IGNORED, "c")
    assert ignored.incarnation == before.incarnation - 1
    after = children_by_id(ref)["c"]
    assert (after.pid, after.incarnation, after.restarts) == (before.pid, before.incarnation, 0)


def test_old_incarnation_exit_after_restart_is_ignored(tree):
    ref = tree(
        SupervisorSpec(
            id="root", intensity=3, children=[ChildSpec(id="c", command=["sleep", "60"])]
        )
    )
    first = children_by_id(ref)["c"]
    os.kill(first.pid, signal.SIGKILL)
    wait_event(ref, EventKind.CHILD_STARTED, "c", where=lambda e: e.incarnation == 2)
    from supervision import ExitReason

    # The first incarnation's exit, delivered again late: it must not restart incarnation 2.
    ref.tell(ChildExited("c", 1, first.pid, ExitReason(ExitKind.KILLED, signal=9)))
    wait_event(ref, EventKind.STALE_EXIT_IGNORED, "c")
    info = children_by_id(ref)["c"]
    assert info.incarnation == 2 and info.restarts == 1 and info.state == "running"
    assert Path(f"/proc/{info.pid}").exists()


@pytest.mark.parametrize("shutdown", ["brutal_kill", 2.0, "infinity"])
def test_terminate_child_honours_shutdown_values(tree, shutdown):
    ref = tree(
        SupervisorSpec(
            id="root",
            children=[ChildSpec(id="c", target=children.sleep_forever, shutdown=shutdown)],
        )
    )
    pid = children_by_id(ref)["c"].pid
    ref.proxy().terminate_child("c").get()
    reason = wait_event(ref, EventKind.CHILD_TERMINATED, "c").reason
    assert reason.kind is ExitKind.SHUTDOWN
    expected = signal.SIGKILL if shutdown == "brutal_kill" else signal.SIGTERM
    assert reason.signal == expected
    assert wait_gone([pid]) == []
