"""A crashing start's report: the child's traceback once, the test's line named, no
internal frames (issue 38, item 3). Measured on the README's test with its server
misspelt: 105 lines and 4 tracebacks before, under 70 lines and 1 now."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from tests.support import run_pytest

CRASHING = textwrap.dedent(
    """
    import sys

    from actors.testing import free_port
    from supervision import ChildSpec, HttpProbe, SupervisorSpec


    def test_the_service_comes_back_answering(nanny_tree):
        port = free_port()
        web = ChildSpec(
            id="web",
            command=[sys.executable, "-c", "import http.sevrer", str(port)],
            ready=HttpProbe(f"http://127.0.0.1:{port}/"),
        )
        tree = nanny_tree(SupervisorSpec(id="app", children=[web]), strict=True)
        tree.wait_ready("web")
    """
)


def _write(tmp_path: Path) -> Path:
    (tmp_path / "test_web.py").write_text(CRASHING)
    return tmp_path


@pytest.mark.parametrize("on_ci", [False, True], ids=["terminal", "ci"])
def test_a_crashing_start_shows_its_traceback_once_at_the_tests_line(
    tmp_path: Path, on_ci: bool
) -> None:
    # On CI pytest prints the whole message in the short summary: the output's
    # quote must not come back there.
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    if on_ci:
        env["CI"] = "true"
    out = run_pytest("-p", "no:randomly", "-n", "0", cwd=_write(tmp_path), env=env)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    assert len(text.splitlines()) < 70, text
    # The traceback once; its last line, the cause, also leads the reason.
    assert text.count("Traceback (most recent call last)") == 1, text
    cause = "ModuleNotFoundError: No module named 'http.sevrer'"
    assert text.index(cause) < text.index("its output ended with"), text
    assert "test_web.py:15: SupervisorStartError" in text, text
    summary = text[text.index("short test summary info") :]
    assert "FAILED test_web.py::test_the_service_comes_back_answering" in summary, text
    if on_ci:  # whole, not trimmed to the terminal's width
        assert "No module named 'http.sevrer'" in summary, text
    assert "its output ended with" not in summary, text
    # No frame of the harness, the tree, the nanny or pykka.
    assert not re.search(r"(_harness|_tree|_nanny|pykka/_threading|pytest_plugin)\.py:\d+", text), (
        text
    )


def test_tb_line_names_the_tests_line(tmp_path: Path) -> None:
    out = run_pytest("-p", "no:randomly", "-n", "0", "--tb=line", cwd=_write(tmp_path))
    text = out.stdout + out.stderr
    assert re.search(r"test_web\.py:15: supervision\.SupervisorStartError", text), text
