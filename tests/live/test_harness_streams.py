"""A child's streams called by their names (issue 38, item 2): stdout is never shown as
stderr; a stream that is not kept says how to keep it; one pipe for both is "both"."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.testing import TreeHarness
from supervision import ChildSpec, EventKind, Restart, SupervisorSpec

SAYS = ["sh", "-c", "echo OUT; echo ERR >&2; exec sleep 60"]


def test_captured_streams_are_read_apart(nanny_tree: Callable[..., TreeHarness]) -> None:
    child = ChildSpec("w", command=SAYS, stdout="capture", stderr="capture")
    tree = nanny_tree(SupervisorSpec("t", children=[child]))
    tree.wait_output("w", "OUT", stream="stdout")
    tree.wait_output("w", "ERR")
    assert tree.output("w", "stdout") == "OUT\n"
    assert tree.output("w", "stderr") == tree.output("w") == "ERR\n"
    with pytest.raises(ValueError, match="keeps its streams apart"):
        tree.output("w", "both")


def test_one_file_for_both_is_read_as_both_never_as_stderr(
    nanny_tree: Callable[..., TreeHarness], tmp_path: Path
) -> None:
    log = str(tmp_path / "w.log")
    child = ChildSpec("w", command=SAYS, stdout=log, stderr=log)
    tree = nanny_tree(SupervisorSpec("t", children=[child]))
    tree.wait_output("w", "OUT\nERR")
    assert tree.output("w") == tree.output("w", "both") == "OUT\nERR\n"
    for stream in ("stdout", "stderr"):
        with pytest.raises(ValueError, match=r'one pipe for both.*stream="both"'):
            tree.output("w", stream)
    assert Path(log).read_text() == "OUT\nERR\n"


def test_a_stream_not_kept_says_how_to_keep_it(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = nanny_tree(
        SupervisorSpec("t", children=[ChildSpec("w", command=SAYS, stderr="capture")])
    )
    with pytest.raises(ValueError, match=r'does not keep its stdout.*stdout="capture"'):
        tree.output("w", "stdout")
    with pytest.raises(ValueError, match=r'does not keep its stdout.*stdout="capture"'):
        tree.wait_output("w", "OUT", stream="stdout")


def test_the_report_names_both_streams_when_they_share_a_pipe(
    nanny_tree: Callable[..., TreeHarness], tmp_path: Path
) -> None:
    log = str(tmp_path / "w.log")
    script = "echo OUT; echo ERR >&2; exit 3"
    child = ChildSpec(
        "w", command=["sh", "-c", script], stdout=log, stderr=log, restart=Restart.TEMPORARY
    )
    tree = nanny_tree(SupervisorSpec("t", children=[child]))
    tree.wait_for(EventKind.CHILD_EXITED, "w", since=0)
    titles = [title for title, _ in tree.report_sections()]
    assert any("stderr (stdout too, where both share one pipe)" in t for t in titles), titles


def test_the_default_streams_under_2_to_1_are_both(tmp_path: Path) -> None:
    """This process's stdout and stderr as one file (a CI log, `2>&1`): the child's
    default streams share one pipe, read as "both"."""
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from actors.testing import TreeHarness
            from supervision import ChildSpec, SupervisorSpec
            spec = SupervisorSpec("t", children=[ChildSpec("w", command={SAYS!r})])
            with TreeHarness(spec) as tree:
                tree.wait_output("w", "OUT\\nERR")
                both = tree.output("w")
                try:
                    tree.output("w", "stdout")
                except ValueError as e:
                    refused = str(e)
                said = "refused" if "stream=\\"both\\"" in refused else refused
                print("RESULT", repr(both), said)
            """
        )
    )
    with open(tmp_path / "out", "wb") as out:
        subprocess.run(
            [sys.executable, str(script)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=True,
        )
    text = (tmp_path / "out").read_text()
    assert "RESULT 'OUT\\nERR\\n' refused" in text, text
