"""`nannytree run` exits promptly once its tree has stopped (issue 37: it took 2.9 s):
no wait of the view's refresh period for a stop already done, the event log's writer
woken to close, no collection of the host's heap at the interpreter's exit.

The deadline is generous (a loaded CI machine): it is a test that the run does not
linger, not a figure; tests/benchmarks/host_run.py measures it.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.cli.test_commands import Proc, env, pids, status

__all__ = ["env"]

PROMPT = 3.0  # seconds from the tree's last event to the process's exit, at most

TREE = """
[defaults]
restart_limit = false  # its crash is the root's to count: the tree gives up

[supervisor]
id = "brief"
intensity = {intensity}

[[supervisor.children]]
id = "svc"
command = ["sleep", "600"]

[[supervisor.children]]
id = "flaky"
command = ["sh", "-c", "test -e {go} && exit 3; exec sleep 600"]
"""


def _exit_after(run: Proc, last_line: str) -> float:
    run.expect(last_line)
    seen = time.monotonic()
    run.p.wait(60)
    return time.monotonic() - seen


@pytest.mark.parametrize("metrics", [[], ["--metrics", "0"]])
def test_run_exits_promptly_after_a_stop(tmp_path, env, metrics):
    tree = tmp_path / "brief.toml"
    tree.write_text(TREE.format(intensity=3, go=tmp_path / "go"))
    sock = tmp_path / "b.sock"
    log = tmp_path / "events.jsonl"
    with Proc(
        "run", str(tree), "--socket", str(sock), "--event-log", str(log), *metrics, env=env
    ) as run:
        run.expect(r"brief/flaky child_started")
        run.p.send_signal(signal.SIGTERM)
        took = _exit_after(run, r"^\S+ brief supervisor_stopped")
        assert run.p.returncode == 0
        assert took < PROMPT, f"exited {took:.2f}s after its tree stopped"
    assert "supervisor_stopped" in log.read_text().splitlines()[-1]  # written in full


def test_run_exits_promptly_after_its_tree_gave_up(tmp_path, env):
    tree = tmp_path / "brief.toml"
    tree.write_text(TREE.format(intensity=0, go=tmp_path / "go"))
    sock = tmp_path / "b.sock"
    with Proc("run", str(tree), "--socket", str(sock), env=env) as run:
        run.expect(r"brief/flaky child_started")
        os.kill(pids(status(sock, env))["brief/flaky"], signal.SIGKILL)  # intensity 0
        took = _exit_after(run, r"^\S+ brief supervisor_stopped")
        assert run.p.returncode == 1  # it gave up
        assert took < PROMPT, f"exited {took:.2f}s after its tree gave up"
