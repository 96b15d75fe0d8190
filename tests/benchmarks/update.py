"""What `nannytree update` costs when it changes only supervisors' settings: a nested
supervisor's intensity (three workers under it) and a pool's max_children (two
dynamic jobs in it). Wall time of the `update` command, median and p95, and how
many of the five processes it restarted or lost. With `--before CHECKOUT`, the
rounds alternate between that checkout and this one (the machine's noise falls on
both alike).

    .venv/bin/python tests/benchmarks/update.py [--rounds 10] [--before /tmp/old]

Measured on 2 cores (2026-11-28, 10 rounds each, alternating), an update that
replaced both supervisors (9b4b7ef) against one that changes them in place:

    before: median 3109 ms, p95 3141 ms; restarted 3 of 5, lost 2 of 2
    after:  median   99 ms, p95  123 ms; restarted 0 of 5, lost 0 of 2

(The 3 s before: each replaced supervisor's workers waited out the update's 1 s
settle, one after another.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "actors.cli"]


def tree_text(intensity: int, pool: str = "") -> str:
    workers = "".join(
        f'[[supervisor.children.children]]\nid = "w{i}"\ncommand = ["sleep", "600"]\n'
        for i in range(3)
    )
    return (
        '[supervisor]\nid = "b"\n'
        f'[[supervisor.children]]\nid = "apps"\nintensity = {intensity}\nperiod = 60\n'
        + workers
        + '[[supervisor.children]]\nid = "pool"\nstrategy = "simple_one_for_one"\n'
        + pool
        + '[[supervisor.children.children]]\nid = "job"\ncommand = ["sleep", "600"]\n'
        'restart = "temporary"\n'
    )


def worker_pids(sock: str, env: dict[str, str], cwd: Path) -> dict[str, int]:
    out = subprocess.run(
        [*CLI, "status", "--json", "--socket", sock],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    found: dict[str, int] = {}

    def walk(node: dict[str, Any]) -> None:
        if node.get("pid") and node.get("type") == "worker":
            found[node["path"]] = node["pid"]
        for child in node.get("children", []):
            walk(child)

    walk(json.loads(out.stdout)["tree"])
    return found


def one_round(checkout: Path) -> tuple[float, int, int, str]:
    """(seconds, processes restarted, processes lost, the answer) of one update."""
    env = dict(os.environ, PYTHONPATH=str(checkout))  # with cwd: `-m` puts it first
    with tempfile.TemporaryDirectory() as tmp:
        tree, sock = Path(tmp) / "b.toml", str(Path(tmp) / "b.sock")
        tree.write_text(tree_text(1))
        run = subprocess.Popen(
            [*CLI, "run", str(tree), "--socket", sock, "--plain", "--log-dir", tmp],
            env=env,
            cwd=checkout,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait = [*CLI, "wait", "--ready", "--socket", sock, "--timeout", "30"]
            subprocess.run(wait, env=env, cwd=checkout, capture_output=True, check=True)
            for _ in range(2):
                add = [*CLI, "add", "pool", "--socket", sock]
                subprocess.run(add, env=env, cwd=checkout, capture_output=True, check=True)
            before = worker_pids(sock, env, checkout)
            tree.write_text(tree_text(4, "max_children = 5\n"))
            started = time.perf_counter()
            out = subprocess.run(
                [*CLI, "update", "--socket", sock],
                env=env,
                cwd=checkout,
                capture_output=True,
                text=True,
            )
            took = time.perf_counter() - started
            after = worker_pids(sock, env, checkout)
        finally:
            stop = [*CLI, "shutdown", "--socket", sock]
            subprocess.run(stop, env=env, cwd=checkout, capture_output=True)
            run.wait(timeout=60)
    restarted = sum(1 for k, v in before.items() if after.get(k) not in (None, v))
    lost = sum(1 for k in before if k not in after)
    return took, restarted, lost, (out.stdout or out.stderr).strip()


def report(name: str, rounds: list[tuple[float, int, int, str]]) -> str:
    ms = sorted(r[0] * 1000 for r in rounds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    restarted = statistics.median(r[1] for r in rounds)
    lost = statistics.median(r[2] for r in rounds)
    return (
        f"{name}: median {statistics.median(ms):5.0f} ms, p95 {p95:5.0f} ms; "
        f"restarted {restarted:g} of 5, lost {lost:g} of 2  ({rounds[0][3]!r})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--before", type=Path, help="a checkout to compare with, in turns")
    args = parser.parse_args()
    checkouts = {"after": HERE} if args.before is None else {"before": args.before, "after": HERE}
    results: dict[str, list[tuple[float, int, int, str]]] = {name: [] for name in checkouts}
    for _ in range(args.rounds):
        for name, checkout in checkouts.items():
            results[name].append(one_round(checkout))
    for name, rounds in results.items():
        print(report(name, rounds))


if __name__ == "__main__":
    main()
