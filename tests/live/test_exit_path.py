"""The short exit path (docs/acting-ahead.md, "The exit path"): the reader reports an
exit straight to the nanny, ahead of the worker. On real processes."""

from __future__ import annotations

import psutil
import pytest

from actors import Tree
from supervision import ChildSpec, EventKind, Restart, SupervisorSpec
from tests.support import wait_until

KILLS = 20


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
