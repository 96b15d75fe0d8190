"""Sweeps on every core: `supervision.simulate.sweep` with a process pool's map.

The pure sweep in `supervision` runs its tasks through whatever `map` it is
given; this module gives it one that spreads them over worker processes (the
decision layer stays free of processes). Specs, fault models and the `build`
function must be picklable: define them at module level, and guard a script's
entry point with `if __name__ == "__main__":`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from supervision import SupervisorSpec
from supervision.simulate import (
    DEFAULT_ROOT_RESTART_DELAY,
    DEFAULT_SEEDS,
    FaultModel,
    SweepTable,
)
from supervision.simulate import sweep as pure_sweep

__all__ = ["process_map", "sweep"]

T = TypeVar("T")
R = TypeVar("R")


def process_map(
    workers: int | None = None,
) -> Callable[[Callable[[T], R], Iterable[T]], Iterator[R]]:
    """A `map` that runs calls in `workers` processes (default: every core), in order."""
    count = workers or os.cpu_count() or 1

    def mapper(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        tasks = list(items)
        if count == 1 or len(tasks) <= 1:
            yield from map(fn, tasks)
            return
        # Large chunks: a run takes milliseconds, a round trip to a worker about as long.
        chunk = max(1, len(tasks) // (count * 4))
        with ProcessPoolExecutor(max_workers=count) as pool:
            yield from pool.map(fn, tasks, chunksize=chunk)

    return mapper


def sweep(
    build: Callable[..., SupervisorSpec],
    faults: Mapping[str, FaultModel | Sequence[FaultModel]] | None = None,
    *,
    duration: float,
    seeds: Iterable[int] = DEFAULT_SEEDS,
    root_restart_delay: float | None = DEFAULT_ROOT_RESTART_DELAY,
    workers: int | None = None,
    cluster: Any = None,
    metrics: Mapping[str, Any] | None = None,
    **axes: Iterable[Any],
) -> SweepTable:
    """`supervision.simulate.sweep` on `workers` processes (default: every core)."""
    return pure_sweep(
        build,
        faults,
        duration=duration,
        seeds=seeds,
        root_restart_delay=root_restart_delay,
        map=process_map(workers),
        cluster=cluster,
        metrics=metrics,
        **axes,
    )
