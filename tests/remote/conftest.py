"""Remote subtrees' tests: the modules that start Ray run on one worker, in turn."""

from __future__ import annotations

from types import ModuleType

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    """A module that imports Ray starts a cluster (a one-node Ray or a mini-cluster);
    two at once would starve 2 cores: one group, one module after another
    (tests/conftest.py starts it first, the longest)."""
    module = getattr(item, "module", None)
    if isinstance(vars(module).get("ray") if module else None, ModuleType):
        item.add_marker(pytest.mark.xdist_group("ray"))
