"""python -m tests.chaos --schedules N --seed S: see tests/chaos/__init__.py."""

from __future__ import annotations

import argparse
import sys
import time

from ._oracle import MARGIN, Totals, run_schedule


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--schedules", type=int, default=10, help="how many (seeds S, S+1...)")
    parser.add_argument("--seed", type=int, default=0, help="the first schedule's seed")
    parser.add_argument("--seconds", type=float, default=None, help="stop after, at most")
    parser.add_argument("--margin", type=float, default=MARGIN, help="seconds off a window's edge")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every schedule")
    opts = parser.parse_args(argv)
    totals = Totals()
    deadline = None if opts.seconds is None else time.monotonic() + opts.seconds
    for seed in range(opts.seed, opts.seed + opts.schedules):
        if deadline is not None and time.monotonic() > deadline:
            break
        outcome = run_schedule(seed, opts.margin)
        totals.add(outcome)
        c = outcome.comparison
        verdict = "agree" if outcome.agrees else "TIMING" if outcome.timing else "DIFFER"
        print(
            f"seed {seed}: {verdict}, {len(outcome.live.injected)} faults, "
            f"{c.compared} decisions, lag {c.lag * 1000:.1f} ms",
            flush=True,
        )
        if opts.verbose or not outcome.agrees:
            print(outcome.explain(), flush=True)
    print(totals.summary(opts.margin), flush=True)
    return 1 if totals.differences else 0


if __name__ == "__main__":
    sys.exit(main())
