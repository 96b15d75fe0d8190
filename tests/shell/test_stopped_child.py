"""A stopped (SIGSTOPped) child stops fast (issue 37): SIGCONT follows the stop
signal whenever the process may be stopped, as systemd does, so a frozen child acts
on its SIGTERM at once instead of costing its whole `shutdown` and a SIGKILL.

Each child here was frozen by someone else (not by `pause_child`), has a SIGTERM
handler that leaves a mark and exits 0, and a `shutdown` of 5 s: the mark is there
only if the handler ran, which a SIGKILL at the end of its shutdown never lets happen.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from actors import Tree
from actors.testing import wait_gone
from supervision import ChildSpec, EventKind, ExecProbe, ExitKind, Liveness, SupervisorSpec
from tests.support import children_by_id, wait_event, wait_until

CHILD = textwrap.dedent(
    """
    import os, signal, socket, sys, time
    marks = sys.argv[1]

    def term(*_):
        with open(os.path.join(marks, "term"), "a") as f:
            f.write(f"{os.getpid()}\\n")
        sys.exit(0)

    signal.signal(signal.SIGTERM, term)
    with open(os.path.join(marks, "up"), "a") as f:
        f.write(f"{os.getpid()}\\n")
    where = os.environ.get("NOTIFY_SOCKET")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) if where else None
    address = "\\0" + where[1:] if where and where.startswith("@") else where
    while True:
        if sock is not None:
            sock.sendto(b"WATCHDOG=1", address)
        time.sleep(0.05)
    """
)


def frozen_child(marks: Path, **kw: Any) -> ChildSpec:
    return ChildSpec(
        id="frozen", command=[sys.executable, "-c", CHILD, str(marks)], shutdown=5.0, **kw
    )


def pids_in(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def freeze(marks: Path) -> int:
    """SIGSTOP the child once its handler is set; its pid, once the OS says stopped."""
    wait_until(lambda: pids_in(marks / "up") != [], what="the child set its handler")
    pid = pids_in(marks / "up")[-1]
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: _state(pid) == "T", what=f"pid {pid} stopped")
    return pid


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize("kill_mode", ["group", "main"])
def test_a_frozen_child_acts_on_its_stop_signal_at_a_stop(tmp_path: Path, kill_mode: str) -> None:
    tree = Tree.start(
        SupervisorSpec("root", children=[frozen_child(tmp_path, kill_mode=kill_mode)])
    )
    try:
        pid = freeze(tmp_path)
        tree.nanny.terminate_child("frozen").get()
        assert pids_in(tmp_path / "term") == [pid]  # its handler ran: graceful
        stop = next(e for e in tree.events() if e.context is EventKind.CHILD_TERMINATED)
        assert stop.reason.is_normal and stop.reason.signal is None, stop.reason
    finally:
        tree.stop(timeout=30)


def test_a_frozen_child_is_restarted_gracefully(tmp_path: Path) -> None:
    tree = Tree.start(SupervisorSpec("root", children=[frozen_child(tmp_path)]))
    try:
        pid = freeze(tmp_path)
        assert tree.restart_all() == ["frozen"]  # the operator's `restart all`
        assert pids_in(tmp_path / "term") == [pid]
        wait_until(lambda: len(pids_in(tmp_path / "up")) == 2, what="the new process")
    finally:
        tree.stop(timeout=30)


def test_a_frozen_child_in_a_tree_shutdown_stops_gracefully(tmp_path: Path) -> None:
    tree = Tree.start(
        SupervisorSpec(
            "root", children=[frozen_child(tmp_path), ChildSpec("b", command=["sleep", "60"])]
        )
    )
    pid = freeze(tmp_path)
    tree.stop(timeout=30)
    assert pids_in(tmp_path / "term") == [pid]
    assert wait_gone([pid]) == []


def test_a_frozen_child_misses_its_watchdog_and_its_kill_is_graceful(tree, tmp_path: Path) -> None:
    ref = tree(SupervisorSpec("root", children=[frozen_child(tmp_path, watchdog=1.0)]))
    pid = freeze(tmp_path)
    exited = wait_event(ref, EventKind.CHILD_EXITED, "frozen")
    assert exited.reason.kind is ExitKind.WATCHDOG
    assert pids_in(tmp_path / "term") == [pid]  # the kill's SIGTERM was acted on
    wait_until(lambda: len(pids_in(tmp_path / "up")) == 2, what="the restart")


def test_a_frozen_child_failing_its_liveness_is_killed_gracefully(tree, tmp_path: Path) -> None:
    sick = tmp_path / "sick"
    probe = ExecProbe(["sh", "-c", f"test ! -e {sick}"], period=0.1)
    ref = tree(
        SupervisorSpec(
            "root", children=[frozen_child(tmp_path, liveness=Liveness(probe, failures=1))]
        )
    )
    wait_until(lambda: children_by_id(ref)["frozen"].pid is not None, what="started")
    pid = freeze(tmp_path)
    sick.touch()
    exited = wait_event(ref, EventKind.CHILD_EXITED, "frozen")
    assert exited.reason.kind is ExitKind.UNHEALTHY, exited.reason
    assert pids_in(tmp_path / "term") == [pid]
    sick.unlink()
    wait_until(lambda: len(pids_in(tmp_path / "up")) == 2, what="the restart")
