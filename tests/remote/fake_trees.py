"""Trees on a FakeEngine, for the remote tests: start one (stopped at the end of
the test by the `trees` fixture, tests/remote/conftest.py) and ask its root about
a child."""

from __future__ import annotations

from typing import Any

from actors import Tree
from actors.testing import FakeEngine
from supervision import SupervisorSpec


def start(trees: list[Tree], spec: SupervisorSpec, engine: FakeEngine) -> Tree:
    tree = Tree.start(spec, engine=engine)
    trees.append(tree)
    return tree


def info(tree: Tree, child: str = "ingest") -> Any:
    return tree.nanny.which_child(child).get()
