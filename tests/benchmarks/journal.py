"""What `--child-output journal` costs a start: a child's spawn to its exit, its
stdout and stderr to a log file (the `auto` default) against a journal stream
each (two connects and headers in the launcher), alternating, in one session.

    python -m tests.benchmarks.journal [--starts 300]

The journal is tests/support/journal.py's fake stream server (a thread of this
process): a connect is the same kernel work as to journald, whose accept comes
after. No throughput figure: once connected, a child's stdout writes go to the
socket with nannytree out of the path, and a Python fake parsing each line would
measure itself. Figures only, never assertions.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from pathlib import Path

from actors._launcher._journal import SOCKET_ENV, destination
from actors._process._client import LauncherClient, SpawnRequest
from tests.support.journal import FakeJournal

print = functools.partial(print, flush=True)


def timed(launcher: LauncherClient, request: SpawnRequest) -> float:
    template = launcher.define(request)
    try:
        start = time.perf_counter()
        child = launcher.spawn(template, name=request.name)
        exit = child.wait(120)
        took = time.perf_counter() - start
    finally:
        launcher.forget(template)
    assert exit is not None and exit.returncode == 0
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ[SOCKET_ENV] = str(folder / "journal.sock")
        with FakeJournal(folder / "journal.sock"):
            launcher = LauncherClient.start()
            try:
                log = str(folder / "c.log")
                ways = {
                    "file": dict(stdout=log, stderr=log),
                    "journal": dict(stdout=destination("c"), stderr=destination("c")),
                }
                starts: dict[str, list[float]] = {w: [] for w in ways}
                for _ in range(args.starts):
                    for way, where in ways.items():
                        request = SpawnRequest(command=["true"], name="c", **where)
                        starts[way].append(timed(launcher, request))
                print(f"spawn to exit of `true`, {args.starts} each, alternating (ms):")
                for way, times in starts.items():
                    ms = sorted(t * 1000 for t in times)
                    p95 = ms[int(len(ms) * 0.95)]
                    print(f"  {way:8} median {statistics.median(ms):6.2f}  p95 {p95:6.2f}")
            finally:
                launcher.close()


if __name__ == "__main__":
    main()
