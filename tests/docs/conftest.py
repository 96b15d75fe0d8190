"""The docs site's tests: one build per session, and one worker for all of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    """The tests of the built site share one build, into one picture cache: one group
    (tests/conftest.py starts it early)."""
    if "built_site" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.xdist_group("docs"))


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site, built once per session with `mkdocs build --strict` (the first
    build of a checkout also draws its pictures: docs/_hooks/pictures.py)."""
    root = Path(__file__).resolve().parents[2]
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
