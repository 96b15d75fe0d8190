"""Daemons that fork themselves (issue 16, point 4): pid_file (systemd's Type=forking),
MAINPID= over sd_notify, and a clear error for a program that daemonized unasked.

Real processes: a Python script that double-forks into its own session, as
nginx and redis do with `daemon on` / `--daemonize yes`.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from actors import Tree
from supervision import ChildSpec, EventKind, ExitKind, StartError, SupervisorSpec
from tests.support import wait_event, wait_until

# argv: pid_file mode marker. The first process exits 0 at once; the daemon (in its
# own session, re-parented away) writes its pid to `marker`, then, unless mode is
# "silent", to the pid file (mode "late": after 0.3 s). SIGTERM: it writes
# "stopped" next to the marker and exits.
DAEMON = textwrap.dedent(
    """
    import os, signal, sys, time
    pid_file, mode, marker = sys.argv[1], sys.argv[2], sys.argv[3]
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    def stop(signum, frame):
        open(marker + ".stopped", "w").write(str(os.getpid()))
        os._exit(0)
    signal.signal(signal.SIGTERM, stop)
    with open(marker + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(marker + ".tmp", marker)
    if mode == "late":
        time.sleep(0.3)
    if mode != "silent":
        with open(pid_file + ".tmp", "w") as f:
            f.write(f"{os.getpid()}\\n")
        os.rename(pid_file + ".tmp", pid_file)
    while True:
        time.sleep(1)
    """
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] not in (b"Z", b"X")


def _spec(tmp_path: Path, mode: str, **fields: object) -> tuple[ChildSpec, Path, Path]:
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    pid_file, marker = tmp_path / "d.pid", tmp_path / "marker"
    fields.setdefault("pid_file", str(pid_file))
    spec = ChildSpec(
        id="d",
        command=[sys.executable, str(script), str(pid_file), mode, str(marker)],
        **fields,  # type: ignore[arg-type]
    )
    return spec, pid_file, marker


def _marked(marker: Path) -> int:
    wait_until(marker.exists, 20, "the daemon to write its pid")
    return int(marker.read_text())


@pytest.mark.parametrize("mode", ["prompt", "late"])
def test_a_forking_daemon_is_supervised_through_its_pid_file(tmp_path: Path, mode: str) -> None:
    spec, pid_file, marker = _spec(tmp_path, mode, start_timeout=3.0)
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        daemon = _marked(marker)
        info = tree.nanny.which_child("d").get()
        assert info.state == "running" and info.pid == daemon  # the daemon, not the first
        assert int(pid_file.read_text()) == daemon
        started = [e for e in tree.events() if e.context is EventKind.CHILD_STARTED]
        assert [e.pid for e in started] == [daemon]
        # A stop reaches the daemon (its own session and group), which cleans up.
        tree.nanny.terminate_child("d").get()
        reason = tree.nanny.which_child("d").get().last_exit
        assert Path(str(marker) + ".stopped").read_text() == str(daemon)
        assert reason.kind is ExitKind.SHUTDOWN and "SIGKILL" not in reason.message
        assert not _alive(daemon)
    finally:
        tree.stop()


def test_a_killed_daemon_is_restarted_and_its_new_pid_followed(tmp_path: Path) -> None:
    spec, pid_file, marker = _spec(tmp_path, "prompt", start_timeout=20.0)
    tree = Tree.start(SupervisorSpec(id="root", children=[spec], intensity=3))
    try:
        first = _marked(marker)
        marker.unlink()
        pid_file.unlink()
        os.kill(first, signal.SIGKILL)
        exited = wait_event(tree.ref, EventKind.CHILD_EXITED, "d")
        assert exited.pid == first and exited.reason is not None
        assert exited.reason.kind is ExitKind.KILLED
        second = _marked(marker)
        restarted = wait_event(
            tree.ref, EventKind.CHILD_STARTED, "d", where=lambda e: e.pid != first
        )
        assert restarted.pid == second != first
        assert tree.nanny.which_child("d").get().pid == second
    finally:
        tree.stop()
    assert not _alive(second)


def test_no_pid_file_within_start_timeout_fails_the_start_and_kills_the_daemon(
    tmp_path: Path,
) -> None:
    spec, pid_file, marker = _spec(tmp_path, "silent", start_timeout=1.0)
    with pytest.raises(StartError) as info:
        Tree.start(SupervisorSpec(id="root", children=[spec]))
    reason = info.value.reason
    assert reason.kind is ExitKind.START_FAILURE
    assert str(pid_file) in reason.message and "does not exist" in reason.message
    assert "start_timeout" in reason.message
    daemon = _marked(marker)
    wait_until(lambda: not _alive(daemon), 10, "the daemon that wrote no pid file to be killed")


def test_a_pid_file_naming_a_stranger_is_refused(tmp_path: Path) -> None:
    spec, pid_file, marker = _spec(tmp_path, "silent", start_timeout=1.0)
    pid_file.write_text(f"{os.getpid()}\n")  # a live process, not the child's
    with pytest.raises(StartError) as info:
        Tree.start(SupervisorSpec(id="root", children=[spec]))
    assert "not a process this child started" in info.value.reason.message
    assert _alive(os.getpid())
    daemon = _marked(marker)
    wait_until(lambda: not _alive(daemon), 10, "the daemon to be killed")


@pytest.mark.parametrize("how", ["setsid", "group"])
def test_a_program_that_daemonizes_without_a_pid_file_is_told_what_to_set(
    tmp_path: Path, how: str
) -> None:
    if how == "setsid":
        spec, _, marker = _spec(tmp_path, "silent", pid_file=None, restart="temporary")
    else:  # a background job that stays in the child's process group
        marker = tmp_path / "marker"
        script = f"sleep 300 & echo $! > {marker}.tmp; mv {marker}.tmp {marker}; exit 0"
        spec = ChildSpec(id="d", command=["sh", "-c", script], restart="temporary")
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        exited = wait_event(tree.ref, EventKind.CHILD_EXITED, "d")
        reason = exited.reason
        assert reason is not None and reason.kind is ExitKind.DAEMONIZED
        assert not reason.is_normal
        assert "daemonized itself" in reason.message and "pid_file" in reason.message
        left = [int(p) for p in re.findall(r"\d+", reason.message.split("pid ", 1)[1])[:1]]
        assert left and left[0] != exited.pid
        if how == "group":
            assert left == [_marked(marker)]  # the background job the shell started
        wait_until(lambda: not _alive(left[0]), 10, "what it left running to be killed")
    finally:
        tree.stop()


def test_a_permanent_child_that_daemonizes_is_left_failed_not_restarted(tmp_path: Path) -> None:
    """A restart would fork away again: the child is failed at once (a configuration
    error), its sibling keeps running, and nothing is started again for it."""
    marker = tmp_path / "marker"
    script = f"sleep 300 & echo $! > {marker}.tmp; mv {marker}.tmp {marker}; exit 0"
    spec = SupervisorSpec(
        id="root",
        strategy="one_for_all",
        intensity=1,
        children=[
            ChildSpec(id="web", command=["sleep", "300"]),
            ChildSpec(id="d", command=["sh", "-c", script]),
        ],
    )
    tree = Tree.start(spec)
    try:
        web = tree.nanny.which_child("web").get().pid
        failed = wait_event(tree.ref, EventKind.CHILD_FAILED, "d")
        assert failed.reason is not None and failed.reason.kind is ExitKind.DAEMONIZED
        assert "set pid_file" in failed.detail
        infos = {c.id: c for c in tree.nanny.which_children().get()}
        assert infos["d"].state == "failed" and infos["d"].pid is None
        assert infos["web"].state == "running" and infos["web"].pid == web
        starts = [
            e for e in tree.events() if e.context is EventKind.CHILD_STARTED and e.offender == "d"
        ]
        assert len(starts) == 1
        wait_until(lambda: not _alive(_marked(marker)), 10, "what it left to be killed")
    finally:
        tree.stop()


# The first process forks the daemon, says READY=1 and MAINPID=<daemon>, and exits 0.
MAINPID = textwrap.dedent(
    """
    import os, signal, socket, sys, time
    marker = sys.argv[1]
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(w)
        os.read(r, 1)  # until the first process has said MAINPID=
        def stop(signum, frame):
            open(marker + ".stopped", "w").write(str(os.getpid()))
            os._exit(0)
        signal.signal(signal.SIGTERM, stop)
        while True:
            time.sleep(1)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.sendto(f"READY=1\\nSTATUS=serving\\nMAINPID={child}".encode(), os.environ["NOTIFY_SOCKET"])
    with open(marker + ".tmp", "w") as f:
        f.write(str(child))
    os.rename(marker + ".tmp", marker)
    os._exit(0)
    """
)


def test_mainpid_makes_the_forked_process_the_main_one(tmp_path: Path) -> None:
    script, marker = tmp_path / "mainpid.py", tmp_path / "marker"
    script.write_text(MAINPID)
    spec = ChildSpec(
        id="d",
        command=[sys.executable, str(script), str(marker)],
        ready="sd_notify",
        start_timeout=20.0,
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        daemon = _marked(marker)
        note = wait_event(tree.ref, EventKind.CHILD_NOTE, "d", where=lambda e: e.pid == daemon)
        assert "MAINPID" in str(note.detail)
        assert tree.nanny.which_child("d").get().pid == daemon
        assert not any(e.context is EventKind.CHILD_EXITED for e in tree.events())
        tree.nanny.terminate_child("d").get()
        assert Path(str(marker) + ".stopped").read_text() == str(daemon)
    finally:
        tree.stop()
    assert not _alive(daemon)


LATER_STATUS = textwrap.dedent(
    """
    import os, socket, sys, time
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.sendto(b"READY=1\\nSTATUS=starting up", os.environ["NOTIFY_SOCKET"])
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    sock.sendto(b"STATUS=serving 42 clients", os.environ["NOTIFY_SOCKET"])
    while True:
        time.sleep(1)
    """
)


def test_status_sent_after_the_start_is_read(tmp_path: Path) -> None:
    """Nobody waits on the socket after READY=1, yet later STATUS= lines are read."""
    script, go = tmp_path / "status.py", tmp_path / "go"
    script.write_text(LATER_STATUS)
    spec = ChildSpec(
        id="d", command=[sys.executable, str(script), str(go)], ready="sd_notify", start_timeout=20
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        worker = tree.ref._actor_weakref()._children.workers["d"]  # type: ignore[attr-defined]
        assert worker.proxy().status.get() == "starting up"
        go.touch()
        wait_until(lambda: worker.proxy().status.get() == "serving 42 clients", 20, "STATUS=")
    finally:
        tree.stop()


def test_pid_file_for_a_program_that_stays_in_the_foreground_says_so() -> None:
    spec = ChildSpec(id="d", command=["sleep", "60"], pid_file="/tmp/x.pid", start_timeout=0.5)
    with pytest.raises(StartError) as info:
        Tree.start(SupervisorSpec(id="root", children=[spec]))
    reason = info.value.reason
    assert reason.kind is ExitKind.START_TIMEOUT
    assert "first process did not exit" in reason.message and "drop pid_file" in reason.message


WATCHDOG_ENV = textwrap.dedent(
    """
    import os, socket, sys, time
    with open(sys.argv[1], "w") as f:
        f.write(f"{os.getpid()} {os.environ.get('WATCHDOG_PID')} {os.environ.get('WATCHDOG_USEC')}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
    while True:
        sock.sendto(b"WATCHDOG=1", os.environ["NOTIFY_SOCKET"])
        time.sleep(0.5)
    """
)


def test_a_watched_command_gets_watchdog_pid_and_usec_as_systemd_sets_them(
    tmp_path: Path,
) -> None:
    script, out = tmp_path / "wd.py", tmp_path / "env"
    script.write_text(WATCHDOG_ENV)
    spec = ChildSpec(
        id="d",
        command=[sys.executable, str(script), str(out)],
        ready="sd_notify",
        watchdog=5.0,
        start_timeout=20,
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        pid, watchdog_pid, usec = out.read_text().split()
        assert watchdog_pid == pid == str(tree.nanny.which_child("d").get().pid)
        assert usec == "5000000"
    finally:
        tree.stop()


def test_a_watched_command_that_cannot_be_executed_fails_to_start(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\nexit 0\n")
    spec = ChildSpec(id="d", command=[str(script)], ready="sd_notify", watchdog=5.0)
    with pytest.raises(StartError) as info:
        Tree.start(SupervisorSpec(id="root", children=[spec]))
    assert info.value.reason.kind is ExitKind.START_FAILURE
    assert "ermission" in info.value.reason.message or "executable" in info.value.reason.message


FLOOD = textwrap.dedent(
    """
    import os, socket, sys
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = os.environ["NOTIFY_SOCKET"]
    sock.sendto(b"READY=1", path)
    for i in range(20000):
        sock.sendto(f"STATUS=step {i}".encode() + b"x" * 2000, path)
    sock.sendto(b"STATUS=done", path)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write("sent")
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    sock.close()
    import time
    while True:
        time.sleep(1)
    """
)


def test_a_child_flooding_its_notify_socket_is_read_and_never_blocked(tmp_path: Path) -> None:
    """20,000 datagrams of 2 KB after READY=1: the child is never left blocked on a
    full socket (the tree keeps reading it), the tree keeps answering, and the
    last STATUS= wins."""
    script, sent = tmp_path / "flood.py", tmp_path / "sent"
    script.write_text(FLOOD)
    spec = ChildSpec(
        id="d",
        command=[sys.executable, str(script), str(sent)],
        ready="sd_notify",
        start_timeout=20,
    )
    tree = Tree.start(SupervisorSpec(id="root", children=[spec]))
    try:
        wait_until(sent.exists, 60, "the child to get every datagram out")
        assert tree.nanny.which_child("d").get(timeout=5).state == "running"
        wait_until(lambda: tree.nanny.child_status("d").get(timeout=5) == "done", 30, "STATUS")
    finally:
        tree.stop()


def test_a_daemon_that_leaves_its_group_after_writing_its_pid_file_is_stopped(
    tmp_path: Path,
) -> None:
    """nginx writes its pid file in its first process and calls setsid in the daemon
    just after: the group the launcher saw at the hand-over is gone by the stop. The
    stop signals the group the daemon is in now (it used to signal the old one, get
    ESRCH, and then retry its SIGKILL there forever). Looped: each round stops it
    once it has left."""
    pid_file = tmp_path / "d.pid"
    script = f"( sleep 0.05; exec setsid sleep 1000 ) & echo $! > {pid_file}"
    spec = ChildSpec(id="d", command=["sh", "-c", script], pid_file=str(pid_file), shutdown=5.0)
    with Tree(SupervisorSpec(id="root", intensity=100, children=[spec])) as tree:
        for round in range(10):
            if round:
                tree.nanny.restart_child("d").get()
            pid: int = tree.nanny.which_child("d").get().pid
            first_group = os.getpgid(pid)
            wait_until(functools.partial(_leads_its_group, pid), 5.0, f"round {round}: setsid")
            assert first_group != pid  # it did leave the group it was named in
            tree.nanny.terminate_child("d").get()
            stopped = wait_event(
                tree.ref, EventKind.CHILD_TERMINATED, "d", where=lambda e, p=pid: e.pid == p
            )
            assert stopped.reason is not None and not stopped.reason.message  # no SIGKILL
            wait_until(functools.partial(_zombie, pid), 5.0, f"round {round}: pid {pid} gone")


def _leads_its_group(pid: int) -> bool:
    return os.getpgid(pid) == pid


def _zombie(pid: int) -> bool:
    """Gone, or a zombie (ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
