"""crash() against an app's own `except Exception` (issue 38, item 5): testing.Crash
gets through; another exception that the app swallows is named when the wait ends."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from actors.testing import Crash, TreeHarness
from supervision import ChildSpec, EventKind, ExitKind, SupervisorSpec
from tests.targets import children


def _tree(nanny_tree: Callable[..., TreeHarness]) -> TreeHarness:
    child = ChildSpec("app", target=children.retry_forever)
    tree = nanny_tree(SupervisorSpec("t", intensity=5, children=[child]))
    tree.wait_output("app", "running")  # in its loop: a crash before would end its start
    return tree


def test_crash_gets_past_an_apps_except_exception(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = _tree(nanny_tree)
    pid = tree.crash("app", Crash("the disk is gone"))
    exited = tree.wait_for(EventKind.CHILD_EXITED, "app")
    assert exited.pid == pid
    assert exited.reason is not None and exited.reason.kind is ExitKind.EXCEPTION
    assert (exited.reason.exc_type or "").endswith("Crash")
    assert "the disk is gone" in exited.reason.message


def test_a_swallowed_crash_is_named_when_the_wait_ends(
    nanny_tree: Callable[..., TreeHarness],
) -> None:
    tree = _tree(nanny_tree)
    pid = tree.crash("app", ValueError("swallowed"))
    with pytest.raises(TimeoutError) as waited:
        tree.wait_for(EventKind.CHILD_EXITED, "app", timeout=1)
    said = str(waited.value)
    assert f"crash() raised ValueError('swallowed') in 'app' (pid {pid}), which still runs" in said
    assert "testing.Crash" in said
