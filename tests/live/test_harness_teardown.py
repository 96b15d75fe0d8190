"""What a test pays for its tree's teardown, and the pid after a kill (issue 38, item 5)."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil

from actors.testing import TreeHarness
from supervision import ChildSpec, SupervisorSpec

DEAF = ["sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"]


def test_a_child_that_ignores_sigterm_costs_the_teardown_1_s_not_its_shutdown() -> None:
    spec = SupervisorSpec("t", children=[ChildSpec("deaf", command=DEAF, shutdown=30)])
    with TreeHarness(spec) as tree:
        pid = tree.pid("deaf")
        began = time.monotonic()
    took = time.monotonic() - began
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert took < 20, took  # 1 s and the kill, not the child's 30 s


def test_teardown_shutdown_none_gives_each_child_its_own_shutdown() -> None:
    graceful = ["sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.05; done"]
    spec = SupervisorSpec("t", children=[ChildSpec("g", command=graceful, shutdown=30)])
    with TreeHarness(spec, teardown_shutdown=None) as tree:
        tree.wait_ready("g")
    exits = [e for e in tree.log.snapshot() if e.offender == "g" and e.reason is not None]
    assert exits and exits[-1].reason.code == 7, exits  # its handler ran: no kill


def test_the_pid_right_after_a_kill_is_never_the_killed_one(
    nanny_tree: Callable[..., TreeHarness],
) -> None:
    spec = SupervisorSpec("t", intensity=10, children=[ChildSpec("w", command=["sleep", "60"])])
    tree = nanny_tree(spec)
    for _ in range(5):
        killed = tree.kill("w")
        try:
            now = tree.pid("w")
        except LookupError as e:
            assert "wait_restarted('w')" in str(e)
        else:
            assert now != killed
        assert tree.wait_restarted("w").pid != killed
