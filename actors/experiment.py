"""Sweeps on every core: `supervision.simulate.sweep` with a process pool's map.

The pure sweep in `supervision` runs its tasks through whatever `map` it is
given; this module gives it one that spreads them over worker processes (the
decision layer stays free of processes) and shows a progress bar. What the
tasks refer to (the points' specs, the fault models, the run function) goes to
each worker once, when it starts (by cloudpickle: a spec may name a function of
a script); the tasks travel in chunks, by reference to it. The `build` function
runs here, never in a worker. Guard a script's entry point with
`if __name__ == "__main__":`.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Protocol, TypeVar

import cloudpickle

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

# Chunks per worker: enough that the workers finish together and the bar moves
# often, few enough that a round trip (about a millisecond) stays small beside them.
CHUNKS_PER_WORKER = 16
INSTALL = "pip install 'nannytree[experiment]'"


class _Bar(Protocol):
    def update(self, n: int = 1) -> object: ...
    def close(self) -> None: ...


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _tqdm() -> Any:
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]
    except ImportError as error:
        raise ImportError(
            f"a sweep's progress bar needs tqdm: {INSTALL} (or pass progress=False)"
        ) from error
    return tqdm


def _bar(total: int, progress: bool | None, description: str) -> _Bar:
    """A bar of `total` runs: done, left and an estimate of the time left. `progress`
    None: only when stderr is a terminal (and tqdm is there)."""
    if progress is None:
        progress = sys.stderr.isatty()
        if progress:
            try:
                _tqdm()
            except ImportError:
                return _NoBar()  # not asked for: no bar rather than an error
    if not progress:
        return _NoBar()
    tqdm = _tqdm()

    class RunsBar(tqdm):  # type: ignore[misc, valid-type]
        @property
        def format_dict(self) -> dict[str, Any]:
            fields: dict[str, Any] = super().format_dict
            fields["left"] = (fields["total"] or 0) - fields["n"]  # runs left
            return fields

    bar: _Bar = RunsBar(
        total=total,
        desc=description,
        unit="run",
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} runs done, "
        "{left} left [{elapsed} elapsed, about {remaining} to go, {rate_fmt}]",
        dynamic_ncols=True,
    )
    return bar


def process_map(
    workers: int | None = None,
    *,
    progress: bool | None = None,
    description: str = "sweep",
) -> Callable[[Callable[[T], R], Iterable[T]], Iterator[R]]:
    """A `map` that runs calls in `workers` processes (default: every core), in order.

    `progress`: a bar on stderr (tqdm) with the runs done, the runs left and an
    estimate of the time left; None (default) shows it when stderr is a terminal,
    True always (an ImportError naming `pip install 'nannytree[experiment]'` without
    tqdm), False never. With one worker (or one task) the calls run here.
    """
    count = workers or os.cpu_count() or 1
    if progress:
        _tqdm()  # fail now, before any run, rather than at the first result

    def mapper(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        tasks = list(items)
        bar = _bar(len(tasks), progress, description)
        try:
            if count == 1 or len(tasks) <= 1:
                for task in tasks:
                    result = fn(task)
                    bar.update(1)
                    yield result
                return
            shared = _shared(tasks)
            table = cloudpickle.dumps((fn, shared))
            index = {id(obj): i for i, obj in enumerate(shared)}
            size = max(1, -(-len(tasks) // (count * CHUNKS_PER_WORKER)))
            blobs = [_dumps(tasks[i : i + size], index) for i in range(0, len(tasks), size)]
            workers_needed = min(count, len(blobs))
            pool = ProcessPoolExecutor(workers_needed, initializer=_start, initargs=(table,))
            try:
                for results in pool.map(_run_chunk, blobs):
                    bar.update(len(results))
                    yield from results
            finally:  # also when the caller stops early (or Ctrl-C): no run left queued
                pool.shutdown(wait=True, cancel_futures=True)
        finally:
            bar.close()

    return mapper


# -- what the workers share -----------------------------------------------------------


def _shared(tasks: Sequence[Any]) -> list[Any]:
    """What the tasks refer to beside numbers and text (a point's spec, the fault
    models, a cluster), once each: the fields of dataclass tasks, by identity. Each
    worker gets them all at its start, by cloudpickle (a spec may name a function
    that no module holds)."""
    found: dict[int, Any] = {}
    for task in tasks:
        if not dataclasses.is_dataclass(task) or isinstance(task, type):
            continue
        for field in dataclasses.fields(task):
            value = getattr(task, field.name)
            if value is not None and not isinstance(value, int | float | str | bytes):
                found.setdefault(id(value), value)
    return list(found.values())


class _SharedPickler(pickle.Pickler):
    """Pickles a shared object as its place in the worker's table."""

    def __init__(self, file: io.BytesIO, index: Mapping[int, int]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._index = index

    def persistent_id(self, obj: Any) -> int | None:
        return self._index.get(id(obj))


class _SharedUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, shared: Sequence[Any]) -> None:
        super().__init__(file)
        self._shared = shared

    def persistent_load(self, pid: Any) -> Any:
        return self._shared[pid]


def _dumps(chunk: list[Any], index: Mapping[int, int]) -> bytes:
    out = io.BytesIO()
    _SharedPickler(out, index).dump(chunk)
    return out.getvalue()


# A worker's run function and shared objects, set once by `_start` (a pool's
# initializer: this module's state lives only in the pool's worker processes).
_worker: tuple[Callable[[Any], Any], list[Any]] | None = None


def _start(table: bytes) -> None:
    global _worker
    _worker = pickle.loads(table)


def _run_chunk(blob: bytes) -> list[Any]:
    assert _worker is not None, "a chunk outside a pool's worker"
    fn, shared = _worker
    return [fn(task) for task in _SharedUnpickler(io.BytesIO(blob), shared).load()]


def sweep(
    build: Callable[..., SupervisorSpec],
    faults: Mapping[str, FaultModel | Sequence[FaultModel]] | None = None,
    *,
    duration: float,
    seeds: Iterable[int] = DEFAULT_SEEDS,
    root_restart_delay: float | None = DEFAULT_ROOT_RESTART_DELAY,
    workers: int | None = None,
    progress: bool | None = None,
    cluster: Any = None,
    metrics: Mapping[str, Any] | None = None,
    **axes: Iterable[Any],
) -> SweepTable:
    """`supervision.simulate.sweep` on `workers` processes (default: every core).

    `progress`: a progress bar of the runs (see `process_map`): None (default)
    when stderr is a terminal, True always (needs tqdm), False never.
    """
    return pure_sweep(
        build,
        faults,
        duration=duration,
        seeds=seeds,
        root_restart_delay=root_restart_delay,
        map=process_map(workers, progress=progress),
        cluster=cluster,
        metrics=metrics,
        **axes,
    )
