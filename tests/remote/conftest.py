"""Remote subtrees' tests: the trees a FakeEngine test starts, stopped at its end;
and the modules that start Ray, on one worker, in turn."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from actors import Tree


@pytest.fixture
def trees() -> Iterator[list[Tree]]:
    """The trees a test started (it appends them): each stopped at teardown."""
    started: list[Tree] = []
    yield started
    for tree in started:
        tree.stop(timeout=30)


def pytest_itemcollected(item: pytest.Item) -> None:
    """A module that imports Ray starts a cluster (a one-node Ray or a mini-cluster);
    two at once would starve 2 cores: one group, one module after another
    (tests/conftest.py starts it first, the longest)."""
    module = getattr(item, "module", None)
    if isinstance(vars(module).get("ray") if module else None, ModuleType):
        item.add_marker(pytest.mark.xdist_group("ray"))
