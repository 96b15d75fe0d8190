from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest
from hypothesis import HealthCheck, settings

from supervision import SupervisorSpec
from tests.support import fail_if_left_behind, forget_log, remember_log
from tests.users import User, real_user

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


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site, built once per session with `mkdocs build --strict` (the first
    build of a checkout also draws its pictures: docs/_hooks/pictures.py)."""
    root = Path(__file__).resolve().parents[1]
    out = tmp_path_factory.mktemp("site")
    # Its pictures from the site's cache if fresh (CI's build made them), else drafts
    # of them: the same generators on less data (docs/_hooks/pictures.py). The full
    # experiment takes about 45 s of both cores and buys this test nothing.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "NANNYTREE_DOCS_DRAFT": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-6000:]}"
    return out


@pytest.fixture
def child_user() -> Iterator[User]:
    """A real unprivileged user for one test's child (tests/users.py; needs root)."""
    with real_user("ntc") as user:
        yield user


@pytest.fixture
def other_user() -> Iterator[User]:
    """A second real user: a neighbour of the child, or a stranger to the tree."""
    with real_user("nto") as user:
        yield user
