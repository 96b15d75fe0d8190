"""How a sweep scales on the cores it has: runs per second on 1 and 2 workers.

`actors.experiment.sweep` of two trees, each round running both worker counts in
turn (the machine's noise falls on both alike); median and p95 over the rounds:

- service: a three-worker service (one flaky worker, MTBF 5 min), 10 intensities
  x 20 seeds x 24 virtual hours (200 short runs: the pool's own costs show);
- wide: a 100-worker one_for_one tree (MTBF 1 h each), 4 intensities x 10 seeds
  x 6 virtual hours (40 longer runs of a larger spec).

    .venv/bin/python tests/benchmarks/bench_sweep.py [--rounds 5] [--workers 1 2]

It prints the load average first: the figures mean little on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from supervision import ChildSpec, SupervisorSpec
from supervision.simulate import Exponential, FaultModel

HOUR = 3600.0


def noop() -> None:
    """Never run: the simulation starts no processes."""


def service(intensity: int) -> SupervisorSpec:
    children = [ChildSpec(name, target=noop) for name in ("db", "api", "cache")]
    return SupervisorSpec("service", intensity=intensity, period=30.0, children=children)


SERVICE_FAULTS: dict[str, FaultModel] = {
    "db": Exponential(mtbf=HOUR, start_duration=2.0),
    "api": Exponential(mtbf=300.0, start_duration=0.5),
    "cache": Exponential(mtbf=HOUR, start_duration=0.3),
}


def wide(intensity: int) -> SupervisorSpec:
    children = [ChildSpec(f"w{i}", target=noop) for i in range(100)]
    return SupervisorSpec("wide", intensity=intensity, period=5.0, children=children)


WIDE_FAULTS: dict[str, FaultModel] = {f"w{i}": Exponential(mtbf=HOUR) for i in range(100)}

CASES: dict[str, tuple[Callable[[int], SupervisorSpec], dict[str, FaultModel], dict[str, Any]]] = {
    "service": (
        service,
        SERVICE_FAULTS,
        {"duration": 24 * HOUR, "seeds": range(20), "intensity": range(1, 11)},
    ),
    "wide": (
        wide,
        WIDE_FAULTS,
        {"duration": 6 * HOUR, "seeds": range(10), "intensity": [5, 10, 20, 40]},
    ),
}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def cpu() -> float:
    """CPU seconds of this process and of its reaped children (the pool's workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def runs_per_second(case: str, workers: int) -> tuple[float, float]:
    """Runs per wall-clock second, and CPU milliseconds per run (all processes)."""
    from actors.experiment import sweep

    build, faults, kw = CASES[case]
    started, used = time.perf_counter(), cpu()
    table = sweep(build, faults, root_restart_delay=30.0, workers=workers, **kw)
    wall, used = time.perf_counter() - started, cpu() - used
    runs = len(table.rows) * len(table.seeds)
    return runs / wall, used / runs * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    args = parser.parse_args()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} cores, load average {load} (1, 5, 15 min)")
    for case in args.cases:
        rates: dict[int, list[float]] = {w: [] for w in args.workers}
        costs: dict[int, list[float]] = {w: [] for w in args.workers}
        for _ in range(args.rounds):
            for workers in args.workers:
                rate, cost = runs_per_second(case, workers)
                rates[workers].append(rate)
                costs[workers].append(cost)
        one = statistics.median(rates[args.workers[0]])
        for workers, values in rates.items():
            median = statistics.median(values)
            slow = 1.0 / p95([1.0 / v for v in values])  # the p95 of seconds per run
            print(
                f"{case}: {workers} worker(s): {median:7.1f} runs/s median, "
                f"{slow:7.1f} at the p95 round (slowest), "
                f"{median / one:.2f}x of {args.workers[0]}; "
                f"{statistics.median(costs[workers]):.1f} CPU ms a run (n={len(values)})"
            )


if __name__ == "__main__":
    main()
