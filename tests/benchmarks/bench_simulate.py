"""How fast the simulator runs: virtual hours per wall-clock second.

Three workers that each crash every 60 s on average, over 1000 virtual hours
(about 180,000 crashes and restarts), with and without keeping the events.

    .venv/bin/python tests/benchmarks/bench_simulate.py
"""

from __future__ import annotations

import statistics
import time

from supervision import ChildSpec, Strategy, SupervisorSpec
from supervision.simulate import Exponential, simulate

HOURS = 1000.0


def noop() -> None:
    """Never run: the simulation starts no processes."""


def spec(strategy: Strategy) -> SupervisorSpec:
    children = [ChildSpec(name, target=noop) for name in ("a", "b", "c")]
    # Lax enough never to give up: every crash is a restart.
    return SupervisorSpec("root", strategy=strategy, intensity=100, period=5.0, children=children)


def main() -> None:
    faults = {name: Exponential(mtbf=60.0) for name in ("a", "b", "c")}
    for strategy in (Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL):
        for keep_events in (False, True):
            walls = []
            for seed in range(3):
                started = time.perf_counter()
                result = simulate(
                    spec(strategy),
                    faults,
                    duration=HOURS * 3600,
                    seed=seed,
                    keep_events=keep_events,
                )
                walls.append(time.perf_counter() - started)
            wall = statistics.median(walls)
            print(
                f"{strategy.value:<12} keep_events={keep_events!s:<5} "
                f"{HOURS:.0f} h in {wall:.2f} s = {HOURS / wall:,.0f} virtual h/s "
                f"({result.tree.failures:,} crashes, {len(result.events):,} events kept)"
            )


if __name__ == "__main__":
    main()
