"""What a tree file's default restart_limit costs on the restart path: a contained
child is not restarted ahead of the core's decision (docs/acting-ahead.md), so its
restart waits for the exit to reach the core.

    python -m tests.benchmarks.contain [--n 40] [--rounds 3]

SIGKILL of a command child -> the nanny's child_started for its replacement, for
the same child without a restart_limit (OTP charging: restarted ahead) and with
one that never gives up (contained), alternating rounds; median and p95 in ms.
"""

from __future__ import annotations

import argparse
import statistics

from actors import NannyActor
from supervision import ChildSpec, RestartLimit, SupervisorSpec
from tests.benchmarks.run import _kill_commands


def restarts(n: int, limit: RestartLimit | None) -> list[float]:
    spec = SupervisorSpec(
        id="bench",
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id="c0", command=["sleep", "100000"], restart_limit=limit)],
    )
    ref = NannyActor.start(spec)
    try:
        return _kill_commands(ref, n, 1)
    finally:
        ref.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    found: dict[str, list[float]] = {"charged (no limit)": [], "contained (limit)": []}
    for _ in range(args.rounds):
        found["charged (no limit)"] += restarts(args.n, None)
        found["contained (limit)"] += restarts(args.n, RestartLimit(10**6, 1.0))
    for name, samples in found.items():
        ms = sorted(s * 1000 for s in samples)
        p95 = ms[int(0.95 * (len(ms) - 1))]
        print(f"{name:20} median {statistics.median(ms):6.2f} ms  p95 {p95:6.2f} ms  n={len(ms)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
