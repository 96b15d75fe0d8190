"""Slow and failing starts for command children (issue 38, item 6), on real processes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.testing import TreeHarness, eventually, free_port, scripted
from supervision import ChildSpec, EventKind, ExitKind, SupervisorSpec, TcpProbe


def test_the_first_starts_fail_then_it_runs(
    nanny_tree: Callable[..., TreeHarness], tmp_path: Path
) -> None:
    flaky = scripted(ChildSpec("db", command=["sleep", "60"]), fail_starts=2, state_dir=tmp_path)
    tree = nanny_tree(SupervisorSpec("t", intensity=5, children=[flaky]))
    third = tree.wait_for(EventKind.CHILD_STARTED, "db", incarnation=3, since=0)
    exits = [e for e in tree.log.snapshot() if e.context is EventKind.CHILD_EXITED]
    assert [(e.incarnation, e.reason.code if e.reason else None) for e in exits] == [
        (1, 1),
        (2, 1),
    ]
    assert "scripted: start 2 of db fails (fail_starts=2)" in (exits[1].reason.stderr_tail or "")
    eventually(lambda: (tmp_path / "db.starts").read_text().strip() == "3")
    tree.expect_no_event(EventKind.CHILD_EXITED, "db", within=0.3, since=tree.mark())
    assert tree.pid("db") == third.pid


def test_a_start_fails_in_the_tree_s_start_saying_why(
    nanny_tree: Callable[..., TreeHarness], tmp_path: Path
) -> None:
    # Ready after 0.3 s up: an exit before that is a failed start, which fails the tree's.
    db = ChildSpec("db", command=["sleep", "60"], ready=0.3)
    flaky = scripted(db, fail_starts=1, state_dir=tmp_path)
    with pytest.raises(Exception, match=r"scripted: start 1 of db fails \(fail_starts=1\)"):
        nanny_tree(SupervisorSpec("t", children=[flaky]))


def test_a_slow_start_delays_its_readiness(nanny_tree: Callable[..., TreeHarness]) -> None:
    port = free_port()
    server = [sys.executable, "-m", "http.server", "-b", "127.0.0.1", str(port)]
    slow = scripted(ChildSpec("web", command=server, ready=TcpProbe(port)), start_delay=1.0)
    began = time.monotonic()
    tree = nanny_tree(SupervisorSpec("t", children=[slow]))
    assert time.monotonic() - began >= 1.0  # ready only once the program began
    assert tree.wait_ready("web").pid is not None


def test_a_crash_after_some_seconds_is_a_sigkill(nanny_tree: Callable[..., TreeHarness]) -> None:
    crashing = scripted(ChildSpec("w", command=["sleep", "60"]), crash_after=0.5)
    tree = nanny_tree(SupervisorSpec("t", intensity=5, children=[crashing]))
    pid = tree.pid("w")
    exited = tree.wait_for(EventKind.CHILD_EXITED, "w", since=0, timeout=30)
    assert exited.pid == pid  # the program itself: it kept the shell's pid
    assert exited.reason is not None and exited.reason.kind is ExitKind.KILLED
    assert tree.wait_restarted("w").pid != pid


def test_a_python_target_is_refused() -> None:
    with pytest.raises(TypeError, match="wraps a command"):
        scripted(ChildSpec("p", target=print))
