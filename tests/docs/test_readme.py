"""The README's examples that Sybil cannot run alone (its pytest test, its tree file
under `check`), and the plugin's idioms on this repository's tests/support/health_service.py."""

import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from actors import testing
from actors.testing import free_port
from supervision import ChildSpec, EventKind, ExitKind, HttpProbe, Strategy, SupervisorSpec
from tests.support import run_pytest

SERVICE = str(Path(__file__).parents[1] / "support" / "health_service.py")


def test_the_service_comes_back_answering(nanny_tree):
    port = free_port()
    url = f"http://127.0.0.1:{port}/health"
    web = ChildSpec(id="web", command=[sys.executable, SERVICE, str(port)], ready=HttpProbe(url))
    tree = nanny_tree(SupervisorSpec(id="app", children=[web]), strict=True)
    assert urllib.request.urlopen(url).status == 200  # started = answering, on its own port
    tree.kill("web")
    tree.wait_ready("web")  # restarted, and answering again
    assert urllib.request.urlopen(url).status == 200


def test_the_service_from_a_tree_file(nanny_tree, tmp_path):
    (tmp_path / "tree.toml").write_text(
        f"""
[supervisor]
id = "app"

[[supervisor.children]]
id = "web"
command = ["{sys.executable}", "{SERVICE}", "${{PORT}}"]
ready = {{ http = "http://127.0.0.1:${{PORT}}/health" }}
"""
    )
    port = free_port()
    tree = nanny_tree(tmp_path / "tree.toml", vars={"PORT": port}, strict=True)
    assert tree.child("web").state == "running"
    assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health").status == 200


def test_pool_restarts_together(nanny_tree):
    tree = nanny_tree(
        SupervisorSpec(
            id="pool",
            strategy=Strategy.ONE_FOR_ALL,
            children=[
                ChildSpec(id="a", target=testing.ready_after, args=(0.1,), ready="notify"),
                ChildSpec(id="b", target=testing.run_forever),
            ],
        )
    )
    probe = tree.probe()  # records events from now on
    tree.kill("a")  # SIGKILL (or tree.kill("a", signal.SIGTERM))
    tree.wait_for(EventKind.CHILD_STARTED, "b", where=lambda e: e.incarnation == 2)
    assert probe.contexts("b")[:2] == [EventKind.CHILD_TERMINATED, EventKind.CHILD_STARTED]


def test_crash_with_an_exception(nanny_tree):
    tree = nanny_tree(
        SupervisorSpec(
            id="root", children=[ChildSpec(id="w", target=testing.run_forever, restart="temporary")]
        )
    )
    tree.crash("w", ValueError("injected"))  # raised inside the running target
    reason = tree.wait_for(EventKind.CHILD_EXITED, "w").reason
    assert reason.kind is ExitKind.EXCEPTION and reason.exc_type == "ValueError"


def _readme_block(language: str, containing: str) -> str:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    blocks = re.findall(rf"```{language}\n(.*?)```", readme, re.DOTALL)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"README: one {language} block with {containing!r}"
    return found[0]


def test_the_readme_s_test_example_passes_under_pytest(tmp_path: Path) -> None:
    """Sybil runs the README's blocks, which only defines the test: pytest runs it."""
    (tmp_path / "test_readme_web.py").write_text(_readme_block("python", "def test_"))
    done = run_pytest("-q", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_readme_s_tree_file_passes_check(tmp_path: Path) -> None:
    (tmp_path / "shop.toml").write_text(_readme_block("toml", "[supervisor]"))
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "check", str(tmp_path / "shop.toml")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert done.returncode == 0, done.stdout + done.stderr
