"""The short exit path (docs/acting-ahead.md, "The exit path"): the reader reports an
exit straight to the nanny, ahead of the worker, and an armed restart's start is
answered at the successor's birth, without a Start through the worker. On real
processes."""

from __future__ import annotations

import os
import signal
from typing import Any

import psutil
import pytest

from actors import Tree
from actors._shell import _worker
from supervision import ChildSpec, Event, EventKind, Restart, SupervisorSpec
from tests.support import wait_until

KILLS = 20


def test_an_armed_restart_is_started_at_its_successors_birth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    starts: list[int] = []
    start_now = _worker.WorkerActor.start_now

    def counted(self: Any, token: int, *args: Any, **kwargs: Any) -> None:
        starts.append(token)
        start_now(self, token, *args, **kwargs)

    monkeypatch.setattr(_worker.WorkerActor, "start_now", counted)
    spec = SupervisorSpec(
        id="root", intensity=10**6, period=1.0, children=[ChildSpec("c", command=["sleep", "1000"])]
    )
    with Tree(spec) as tree:
        for _ in range(KILLS):
            info = tree.nanny.which_child("c").get()
            tree.nanny.read_output("c").get()  # after the arm: the exit is armed
            os.kill(info.pid, signal.SIGKILL)

            def restarted(e: Event, n: int = info.incarnation) -> bool:
                return e.context is EventKind.CHILD_STARTED and e.incarnation == n + 1

            started = tree.log.wait_for(restarted, 10)
            now = tree.nanny.which_child("c").get()
            assert now.pid == started.pid != info.pid
            assert psutil.Process(now.pid).status() != psutil.STATUS_ZOMBIE
        # One Start, the first: every restart took the start its exit sent ahead.
        assert len(starts) == 1, starts
        assert not [e for e in tree.events() if e.context is EventKind.STALE_EXIT_IGNORED]


@pytest.mark.parametrize("round", range(3))
def test_armed_children_in_a_crash_loop_are_read_in_order_and_stop(round: int) -> None:
    """Each successor exits at once, its birth's answer racing the exit that announced
    it to the nanny (which defers exits behind a start): every start is answered, so
    the tree still stops, and the launcher runs nothing the tree does not know."""
    ids = [f"c{i}" for i in range(20)]
    children = [
        ChildSpec(i, command=["sh", "-c", "exit 3"], restart=Restart.TRANSIENT) for i in ids
    ]
    tree = Tree.start(SupervisorSpec("root", intensity=10**6, period=1.0, children=children))
    try:

        def each_exited_twice() -> bool:
            exits = [e.offender for e in tree.events() if e.context is EventKind.CHILD_EXITED]
            return all(exits.count(i) >= 2 for i in ids)

        wait_until(each_exited_twice, 20, "every child exited twice")
        launcher = tree.context.spawner
        assert launcher is not None
        launcher_pid = int(launcher.pid)  # type: ignore[attr-defined]
    finally:
        tree.stop(timeout=30)
    left = (
        [p for p in psutil.Process(launcher_pid).children() if p.is_running()]
        if (psutil.pid_exists(launcher_pid))
        else []
    )
    assert left == []
