"""How fast a tree is tuned from its history: the fit's journal lines per second, and a
tune's CPU time on the tutorial's journal and tree (examples/tutorials/tuning/).

1. `read_journal` + `fit` over a journal of N lines (the tutorial's, repeated with
   shifted times), median and p95 over samples, in lines per CPU-second.
2. `tune` with the tutorial's objective and constraint, 22 points x 10 seeds of 600
   virtual seconds, plus 2 x 10 held out: CPU-seconds, median over samples.

    .venv/bin/python tests/benchmarks/bench_tune.py [--samples 5] [--lines 200000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from actors import load_tree_file
from supervision.simulate import fit, read_journal, tune

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tutorials" / "tuning"


def long_journal(lines: int) -> list[str]:
    """The tutorial's journal repeated, each copy after the last, to `lines` lines."""
    base = [json.loads(x) for x in (EXAMPLE / "events.jsonl").read_text().splitlines()]
    span = base[-1]["time"] - base[0]["time"] + 1.0
    out: list[str] = []
    copy = 0
    while len(out) < lines:
        for record in base:
            out.append(json.dumps({**record, "time": record["time"] + copy * span}))
        copy += 1
    return out[:lines]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--lines", type=int, default=200_000)
    args = parser.parse_args()

    journal = long_journal(args.lines)
    rates = []
    for _ in range(args.samples):
        began = time.process_time()
        fit(read_journal(journal))
        rates.append(len(journal) / (time.process_time() - began))
    print(
        f"fit: {len(journal)} lines: median {statistics.median(rates):,.0f} lines/CPU-s, "
        f"p95 (slowest) {percentile(rates, 0.05):,.0f}"
    )

    spec = load_tree_file(EXAMPLE / "pool.toml", resolve_targets=False)
    history = fit((EXAMPLE / "events.jsonl").read_text().splitlines(), spec)
    took = []
    for _ in range(args.samples):
        began = time.process_time()
        tune(
            spec,
            history,
            objective="max availability(pool/web)",
            require=["availability(pool/jobs) >= 60%"],
            seeds=range(10),
            holdout=range(100_000, 100_010),
        )
        took.append(time.process_time() - began)
    print(
        f"tune: 22 points x 10 seeds + 2 x 10 held out, 600 s each: median "
        f"{statistics.median(took):.2f} CPU-s, p95 {percentile(took, 0.95):.2f}"
    )


if __name__ == "__main__":
    main()
