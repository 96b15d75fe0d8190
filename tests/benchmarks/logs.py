"""What a kept log file costs: 50 MB of numbered lines through a child's file.

    python -m tests.benchmarks.logs [--megabytes 50] [--rounds 7]

One child writes the lines in 64 KiB writes (as a block-buffered program does;
the same block each time, so that the writer costs next to nothing),
its stdout and stderr to one file, in three ways, alternating round by round in
one session: `direct` (the file is the child's own fd: no launcher in the path),
`tee` (through the launcher's sink, as `nannytree run` does with rotation off)
and `rotating` (through the sink with log_max_bytes 4 MiB, log_backups 3, so it
rotates about a dozen times: docs/logs.md). A round's time runs from the spawn
to the exit the launcher reports (for a tee'd child: once its pipe is drained and
written). Figures only, never assertions: MB/s median and p95 (the slow end),
the ratios to `direct`, and the bytes left on disk by the rotating runs.
"""

from __future__ import annotations

import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from actors._process._client import LauncherClient, SpawnRequest

print = functools.partial(print, flush=True)
LIMIT, BACKUPS = 4 << 20, 3
WRITER = """
import os, sys
size = int(sys.argv[1])
lines = b"".join(b"%08d\\n" % n for n in range(8192))  # 72 KiB of numbered lines
block = lines[:65536]  # cut mid-line, as a block-buffered program's writes are
for _ in range(size // 65536):
    os.write(1, block)
"""


def one_round(launcher: LauncherClient, folder: Path, mode: str, size: int) -> tuple[float, int]:
    """(seconds, bytes on disk afterwards) for one child writing `size` bytes."""
    path = folder / f"{mode}.log"
    for old in folder.glob(f"{mode}.log*"):
        old.unlink()
    fields: dict[str, Any] = {"tee": () if mode == "direct" else (2,)}
    if mode == "rotating":
        fields.update(log_max_bytes=LIMIT, log_backups=BACKUPS)
    request = SpawnRequest(
        command=[sys.executable, "-c", WRITER, str(size)],
        stdout=str(path),
        stderr=str(path),
        name=mode,
        **fields,
    )
    template = launcher.define(request)
    started = time.monotonic()
    child = launcher.spawn(template, name=mode)
    exit = child.wait(600)
    took = time.monotonic() - started
    launcher.forget(template)
    if exit is None or exit.returncode != 0:
        raise RuntimeError(f"{mode}: the writer did not end well ({exit})")
    return took, sum(p.stat().st_size for p in folder.glob(f"{mode}.log*"))


def _p95_slow(xs: list[float]) -> float:
    """The 95th percentile of the time, as a rate: the slow end of the rounds."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.05 * (len(xs) - 1)))]


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    opts = parser.parse_args()
    size = opts.megabytes * 1_000_000 // 65536 * 65536
    modes = ("direct", "tee", "rotating")
    rates: dict[str, list[float]] = {m: [] for m in modes}
    disk: list[int] = []
    print(
        f"{size / 1e6:.1f} MB of numbered lines in 64 KiB writes, {opts.rounds} rounds "
        f"alternating; rotating: log_max_bytes {LIMIT >> 20} MiB, log_backups {BACKUPS}"
    )
    launcher = LauncherClient.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(opts.rounds):
                for mode in modes:
                    took, on_disk = one_round(launcher, Path(tmp), mode, size)
                    rates[mode].append(size / took / 1e6)
                    if mode == "rotating":
                        disk.append(on_disk)
    finally:
        launcher.close()
    base = statistics.median(rates["direct"])
    for mode in modes:
        median = statistics.median(rates[mode])
        print(
            f"  {mode:<9} {median:7.1f} MB/s median (p95 {_p95_slow(rates[mode]):7.1f})  "
            f"{median / base:5.2f} x direct"
        )
    bound = (BACKUPS + 1) * LIMIT
    print(
        f"  on disk after {size / 1e6:.1f} MB with rotation: {max(disk):,} bytes at most "
        f"({max(disk) / 2**20:.2f} MiB; the bound {(BACKUPS + 1)} x {LIMIT >> 20} MiB = "
        f"{bound:,})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
