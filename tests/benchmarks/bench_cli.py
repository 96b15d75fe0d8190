"""How fast the client commands answer: wall time of `nannytree ...` as a user
runs it (a fresh interpreter each time), median and p95 over many samples,
against a running tree of three children.

    .venv/bin/python tests/benchmarks/bench_cli.py [--samples 30]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "actors.cli"]
TREE = """
[supervisor]
id = "bench"
[[supervisor.children]]
id = "a"
command = ["sleep", "600"]
[[supervisor.children]]
id = "b"
command = ["sleep", "600"]
stderr = "capture"
[[supervisor.children]]
id = "c"
command = ["sleep", "600"]
"""

COMMANDS = {
    "--help": ["--help"],
    "--version": ["--version"],
    "status": ["status"],
    "status --json": ["status", "--json"],
    "status ID": ["status", "b"],
    "logs ID": ["logs", "b"],
    "events -n 5": ["events", "-n", "5"],
    "ls": ["ls"],
    "signal ID": ["signal", "a", "CONT"],
    "check FILE": ["check", "{tree}"],
    # stop and start alternate, so each stop stops a running child and each start
    # starts a stopped one; restart restarts a running one.
    "stop ID": ["stop", "c"],
    "start ID": ["start", "c"],
    "restart ID": ["restart", "c"],
}


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _client(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], capture_output=True, env=env, cwd=ROOT, check=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=30)
    samples = parser.parse_args().samples
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "XDG_RUNTIME_DIR": tmp, "NANNYTREE_LOG_DIR": tmp, "COLUMNS": "120"}
        tree = Path(tmp) / "bench.toml"
        tree.write_text(TREE)
        run = subprocess.Popen(
            [*CLI, "run", str(tree), "--plain"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=ROOT,
        )
        try:
            assert run.stdout is not None
            for line in run.stdout:
                if "bench/c child_started" in line:
                    break
            print(f"{'command':<16}{'median ms':>10}{'p95 ms':>10}   ({samples} samples)")
            for name, template in COMMANDS.items():
                args = [a.format(tree=tree) for a in template]
                walls = []
                for _ in range(samples):
                    if name == "start ID":  # untimed: the child must be stopped first
                        _client(COMMANDS["stop ID"], env)
                    started = time.perf_counter()
                    done = _client(args, env)
                    walls.append(1000 * (time.perf_counter() - started))
                    assert done.returncode in (0, 3), (name, done.stderr)
                    if name == "stop ID":  # untimed: running again for the next stop
                        _client(COMMANDS["start ID"], env)
                print(f"{name:<16}{statistics.median(walls):>10.0f}{_p95(walls):>10.0f}")
        finally:
            run.send_signal(signal.SIGINT)
            run.wait(30)


if __name__ == "__main__":
    main()
