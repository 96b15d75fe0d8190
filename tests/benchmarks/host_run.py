"""`nannytree run` of the README's first tree: the host's memory, and how soon the run
exits once its tree has stopped; before and after a change.

    python -m tests.benchmarks.host_run OLD [--rounds 5] [--metrics]

OLD is a checkout or a commit; the two sides alternate, round by round. Each round
starts `python -m actors.cli run shop.toml` (the README's tree, its port a free one)
with that side's code first on the path, waits until every child started and a
second more, then reads:

- the RSS and PSS (MB) and threads of the run host, its guardian and its launcher
  (the host's three processes; the children are not counted). The guardian and the
  launcher share the pages of their fork: their RSS counts those twice, PSS once;
- after a SIGTERM: the seconds until the run's process exited, counted from the
  root's `supervisor_stopped` line (the tree stopped) and from the signal.

Prints each figure as median / p95 (for the seconds, in ms). `--metrics` runs with
`--metrics 0`, as a monitored host would.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from tests.benchmarks.ab import HERE, checked_out, p95

SHOP = """
[supervisor]
id = "shop"
intensity = 5
period = 30

[[supervisor.children]]
id = "web"
command = ["python3", "-m", "http.server", "{port}", "--bind", "127.0.0.1"]
ready = {{ http = "http://127.0.0.1:{port}/" }}

[[supervisor.children]]
id = "workers"
type = "supervisor"
strategy = "one_for_all"
children = [
  {{ id = "mailer", command = ["sleep", "infinity"] }},
  {{ id = "indexer", command = ["sleep", "infinity"], stop_signal = "INT" }},
]
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_round(checkout: Path, metrics: bool) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="nt-host-"))
    tree = folder / "shop.toml"
    tree.write_text(SHOP.format(port=_port()))
    args = [sys.executable, "-m", "actors.cli", "run", str(tree)]
    args += ["--socket", str(folder / "s.sock")]
    if metrics:
        args += ["--metrics", "0"]
    env = dict(os.environ, PYTHONPATH=str(checkout), PYTHONUNBUFFERED="1")
    run = subprocess.Popen(
        args, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert run.stdout is not None
    exited: list[float] = []
    threading.Thread(target=lambda: (run.wait(), exited.append(time.monotonic()))).start()
    for line in run.stdout:
        if "shop/workers/indexer child_started" in line:
            break
    time.sleep(1.0)  # settled: the figures of a host at rest
    host = psutil.Process(run.pid)
    out: dict[str, float] = {}
    roles = {"run": host}
    for proc in host.children(recursive=True):
        title = " ".join(proc.cmdline())
        for role in ("guardian", "launcher"):
            if f"nannytree: {role}" in title:
                roles[role] = proc
    for role, proc in roles.items():
        full = proc.memory_full_info()
        out[f"rss_{role}"] = full.rss / 1e6
        out[f"pss_{role}"] = full.pss / 1e6  # its shared pages divided among their users
        out[f"threads_{role}"] = proc.num_threads()
    out["rss_host"] = sum(out[f"rss_{r}"] for r in roles)
    out["pss_host"] = sum(out[f"pss_{r}"] for r in roles)
    signalled = time.monotonic()
    run.send_signal(signal.SIGTERM)
    stopped = None
    for line in run.stdout:
        if stopped is None and " shop supervisor_stopped" in line:
            stopped = time.monotonic()
    while not exited:
        time.sleep(0.001)
    out["exit_after_stop"] = exited[0] - (stopped or signalled)
    out["exit_after_signal"] = exited[0] - signalled
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="a checkout or a commit of the code before the change")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--metrics", action="store_true", help="run with --metrics 0")
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    with checked_out(args.old) as old:
        for i in range(args.rounds):
            sides = [("before", old.resolve()), ("after", HERE)]
            for label, checkout in sides if i % 2 == 0 else reversed(sides):
                for name, value in one_round(checkout, args.metrics).items():
                    results[label].setdefault(name, []).append(value)
    names = list(results["after"])
    print(f"{'figure':<22} {'before (median / p95)':>24} {'after (median / p95)':>24}")
    for name in names:
        cells = []
        for label in ("before", "after"):
            xs = results[label].get(name, [])
            scale = 1000 if name.startswith("exit") else 1
            unit = "ms" if name.startswith("exit") else ("MB" if name[:3] in ("rss", "pss") else "")
            xs = [x * scale for x in xs]
            cells.append(f"{statistics.median(xs):7.1f} / {p95(xs):7.1f} {unit}" if xs else "-")
        print(f"{name:<22} {cells[0]:>24} {cells[1]:>24}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
