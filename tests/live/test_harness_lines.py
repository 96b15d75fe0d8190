"""Counting or refuting a child's lines over a block (issue 38, item 6: Akka's
EventFilter with occurrences), on real processes."""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest

from actors.testing import TreeHarness, eventually
from supervision import ChildSpec, SupervisorSpec

# Says "starting" once, "retrying" on each SIGUSR1, "ERROR" on SIGUSR2 (on stderr).
TALKER = [
    "sh",
    "-c",
    "trap 'echo retrying >&2' USR1; trap 'echo ERROR >&2' USR2; echo starting >&2; "
    "while :; do sleep 0.05; done",
]


def _retry(tree: TreeHarness) -> None:
    """SIGUSR1, then wait for its line: two signals close together may be one (a
    standard signal is not queued), and the test counts lines."""
    said = tree.output("w").count("retrying")
    tree.signal("w", signal.SIGUSR1)
    eventually(lambda: tree.output("w").count("retrying") > said)


def _tree(nanny_tree: Callable[..., TreeHarness]) -> TreeHarness:
    child = ChildSpec("w", command=TALKER, stderr="capture")
    tree = nanny_tree(SupervisorSpec("t", intensity=5, children=[child]))
    tree.wait_output("w", "starting")
    return tree


def test_lines_written_during_the_block_are_counted(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = _tree(nanny_tree)
    with tree.expect_lines("w", "retrying", count=2):
        _retry(tree)
        _retry(tree)
    with tree.expect_lines("w", "retry", at_least=1, at_most=1):
        _retry(tree)
    with tree.expect_lines("w", "starting", count=0):  # written before the block: not counted
        _retry(tree)


def test_a_wrong_count_fails_naming_what_was_found(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = _tree(nanny_tree)
    with (
        pytest.raises(
            AssertionError,
            match=r"expected exactly 3 line\(s\) matching 'retrying' "
            r"on the stderr of 'w' during the block; found 2",
        ),
        tree.expect_lines("w", "retrying", count=3, timeout=0.5),
    ):
        _retry(tree)
        _retry(tree)


def test_never_printed_fails_when_it_was(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = _tree(nanny_tree)
    with tree.expect_lines("w", "ERROR", count=0):
        _retry(tree)
    refused = pytest.raises(AssertionError, match=r"expected exactly 0 .* found 1")
    with refused, tree.expect_lines("w", "ERROR", count=0):
        tree.signal("w", signal.SIGUSR2)
        tree.wait_output("w", "ERROR")


def test_lines_are_counted_across_a_restart(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = _tree(nanny_tree)
    with tree.expect_lines("w", "retrying|starting", count=2):
        _retry(tree)  # the first run says it
        tree.wait_output("w", "retrying")
        tree.kill("w")
        tree.wait_restarted("w")  # the second run says "starting"


def test_bad_expectations_are_refused(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = _tree(nanny_tree)
    with (
        pytest.raises(ValueError, match="not both"),
        tree.expect_lines("w", "x", count=1, at_most=2),
    ):
        pass
    refused = pytest.raises(ValueError, match="more than at_most")
    with refused, tree.expect_lines("w", "x", at_least=3, at_most=2):
        pass
