"""The nannytree pytest plugin: active once nannytree is installed.

    def test_worker_comes_back(nanny_tree):
        tree = nanny_tree(SupervisorSpec(id="root", children=[...]))
        pid = tree.kill("worker")
        tree.wait_for(EventKind.CHILD_STARTED, "worker", where=lambda e: e.pid != pid)

Every tree started through the fixture is stopped at teardown, and the test
fails if any of its processes is still alive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from supervision import SupervisorSpec

from .testing import TreeHarness


def _trees() -> Iterator[Callable[..., TreeHarness]]:
    started: list[TreeHarness] = []

    def start(spec: SupervisorSpec, **start_kwargs: Any) -> TreeHarness:
        harness = TreeHarness(spec, **start_kwargs).start()
        started.append(harness)
        return harness

    yield start
    leaks = {h.spec.id: left for h in started if (left := h.stop())}
    if leaks:
        pytest.fail(f"trees left processes behind: {leaks}")


@pytest.fixture
def nanny_tree() -> Iterator[Callable[..., TreeHarness]]:
    """Start trees with nanny_tree(spec); each is stopped and checked for leftovers."""
    yield from _trees()


@pytest.fixture(scope="module")
def nanny_tree_module() -> Iterator[Callable[..., TreeHarness]]:
    """As nanny_tree, but the trees live until the module's last test (a tree
    that is slow to start, shared by several tests)."""
    yield from _trees()


@pytest.fixture(scope="session")
def nanny_tree_session() -> Iterator[Callable[..., TreeHarness]]:
    """As nanny_tree, for the whole session."""
    yield from _trees()
