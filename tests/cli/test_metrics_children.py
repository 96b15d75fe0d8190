"""Each child's exit counter from zero, its last exit code and its process's start time
in `nannytree run --metrics` (issue 37): scraped over HTTP from a real tree."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from tests.cli.test_commands import Proc, _env, cli, pids, status
from tests.cli.test_monitoring import Samples, child, until

TREE = """
[supervisor]
id = "mon"
intensity = 5
period = 600

[[supervisor.children]]
id = "web"
command = ["sleep", "600"]

[[supervisor.children]]
id = "quits"
command = ["sh", "-c", "trap 'exit 3' TERM; while :; do sleep 0.05; done"]
"""


def test_exits_count_from_zero_with_the_last_code_and_the_start_time(tmp_path: Path) -> None:
    env = _env(tmp_path)
    tree = tmp_path / "mon.toml"
    tree.write_text(TREE)
    sock = tmp_path / "m.sock"
    before = time.time()
    with Proc("run", str(tree), "--socket", str(sock), "--plain", "--metrics", "0", env=env) as run:
        url = run.expect(r"^nannytree: metrics: (http://\S+)$")[1]
        run.expect(r"mon/quits child_started")
        first = until(url, lambda s: child(s, "child_up", "quits") == 1, "quits up")
        started = pids(status(sock, env))
        for cid in ("web", "quits"):
            # Present at 0 before any exit: increase() sees the first one.
            assert child(first, "child_process_exits_total", cid) == 0
            assert child(first, "child_last_exit_code", cid) is None
            began = child(first, "child_start_time_seconds", cid)
            assert began is not None and before - 1 <= began <= time.time()
            proc = psutil.Process(started[f"mon/{cid}"])
            assert abs(began - proc.create_time()) < 0.01  # the process's own start

        # An exit with a code of its own (its TERM trap exits 3: not a stop).
        assert cli("signal", "quits", "TERM", "--socket", str(sock), env=env).returncode == 0

        def coded(s: Samples) -> bool:
            return (
                child(s, "child_last_exit_code", "quits") == 3
                and child(s, "child_process_exits_total", "quits") == 1
                and child(s, "child_up", "quits") == 1
            )

        after = until(url, coded, "quits' exit 3 counted")
        assert child(after, "child_exits_total", "quits", reason="exit_code") == 1
        assert (child(after, "child_start_time_seconds", "quits") or 0) > (began or 0) - 1

        # A death by a signal: -N, as Python's returncode.
        os.kill(pids(status(sock, env))["mon/quits"], signal.SIGKILL)
        killed = until(
            url,
            lambda s: child(s, "child_last_exit_code", "quits") == -signal.SIGKILL,
            "quits' SIGKILL as -9",
        )
        assert child(killed, "child_process_exits_total", "quits") == 2
        assert child(killed, "child_process_exits_total", "web") == 0

        # A stop is an exit too; a stopped child has no process, so no start time.
        assert cli("stop", "web", "--socket", str(sock), env=env).returncode == 0
        down = until(url, lambda s: child(s, "child_up", "web") == 0, "web down")
        assert child(down, "child_process_exits_total", "web") == 1
        assert child(down, "child_start_time_seconds", "web") is None
        rc, output = run.finish(signal.SIGINT)
    assert rc == 0, output
