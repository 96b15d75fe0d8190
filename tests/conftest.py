from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest
from hypothesis import HealthCheck, settings

from supervision import SupervisorSpec
from tests.support import fail_if_left_behind, forget_log, remember_log

LEAK_DEADLINE = 15.0  # a stopped tree's processes gone, on a busy machine too

# No example may fail for being slow: on a busy machine every example is (pytest-timeout
# ends a real hang). A test's own settings still override these.
settings.register_profile("nannytree", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("nannytree")


@pytest.fixture(autouse=True, scope="session")
def children_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`nannytree run` keeps its children's logs under /var/log/nannytree as root:
    a test's runs (in process or not: they inherit this) use a temporary folder."""
    saved = os.environ.get("NANNYTREE_LOG_DIR")
    os.environ["NANNYTREE_LOG_DIR"] = str(tmp_path_factory.mktemp("children-logs"))
    yield
    if saved is None:
        os.environ.pop("NANNYTREE_LOG_DIR", None)
    else:
        os.environ["NANNYTREE_LOG_DIR"] = saved


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Every test must leave no process and no actor behind (invariant 4)."""
    yield
    fail_if_left_behind("test", LEAK_DEADLINE)


@pytest.fixture
def tree(
    nanny_tree: Callable[..., Any],
) -> Iterator[Callable[[SupervisorSpec], pykka.ActorRef[Any]]]:
    """Start trees with tree(spec) -> ActorRef, through the nannytree pytest plugin
    (each is stopped at teardown, and the test fails if it left a process)."""
    refs: list[pykka.ActorRef[Any]] = []

    def start(spec: SupervisorSpec) -> pykka.ActorRef[Any]:
        harness = nanny_tree(spec)
        remember_log(harness.ref, harness.log)
        refs.append(harness.ref)
        return harness.ref

    yield start
    for ref in refs:
        forget_log(ref)


# -- the suite on four workers -----------------------------------------------------

# The groups that take longest, started first, longest first: each begins at once on a
# worker of its own and the rest of the suite fills the others around them (the Ray
# modules, about 5 minutes on 2 cores, would otherwise start late and end last). Each
# folder's conftest.py marks its own groups: remote/ "ray", docs/ "docs"; the soak
# tests, in any folder, are "soak" (here); each page's examples, the root conftest.py.
LONG_GROUPS = ("ray", "docs", "soak")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dist", "no") == "loadgroup" and _groups_ignored():
        raise pytest.UsageError(
            "pytest-xdist ignores test groups under pytest 9.2 (pytest-xdist#1386), and this "
            "suite needs them: install 'pytest<9.2' (as the test extra does) or run with -n 0"
        )
    if "PYTEST_XDIST_WORKER" in os.environ:
        # execnet gives xdist's workers COLUMNS=80 and LINES=24: without them a worker
        # runs the CLI as a plain `pytest` does, with no terminal (160 columns).
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)


def _groups_ignored() -> bool:
    import xdist

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())

    return version(pytest.__version__) >= (9, 2) and version(xdist.__version__) <= (3, 8)


def group(item: pytest.Item) -> str | None:
    """The xdist group an item was put in, if any."""
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker and marker.args else None


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The suite runs on 4 xdist workers (`-n 4 --dist loadgroup`, pyproject.toml);
    what must not be split or run twice at once goes to one worker as a group. Each
    folder's conftest.py puts its items in their group as they are collected; here,
    the soak tests, one after another beside the rest of the suite; then the long
    groups go first, longest first (a stable sort: the order within is kept)."""
    for item in items:
        if item.get_closest_marker("soak") and group(item) is None:
            item.add_marker(pytest.mark.xdist_group("soak"))
    rank = {name: place for place, name in enumerate(LONG_GROUPS)}
    items.sort(key=lambda item: rank.get(group(item) or "", len(rank)))
