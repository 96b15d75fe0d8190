"""Sweeps: a grid of specs over many seeds of one fault model, with confidence intervals.

Pure: the runs are handed to a `map` function, `builtins.map` by default (one
core). `actors.experiment.sweep` passes a process pool's map, so the same
sweep runs on every core; the tasks and their results are small picklable
records (no event lists cross the process boundary).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import SpecError
from ..spec._spec import SupervisorSpec
from ._defaults import DEFAULT_ROOT_RESTART_DELAY, DEFAULT_SEEDS
from ._faults import FaultEntry
from ._nodes import Cluster
from ._run import simulate
from ._stats import Estimate


@dataclass(frozen=True)
class RunFigures:
    """What one run contributes to a sweep (small: crosses process boundaries)."""

    availability: float
    restarts: int
    give_ups: int
    time_to_give_up: float | None
    unhealthy: int = 0  # exits with reason unhealthy (stopped by a liveness probe)


@dataclass(frozen=True)
class SweepTask:
    """One run of a sweep: the point's index, its spec, one seed."""

    point: int
    spec: SupervisorSpec
    faults: Mapping[str, FaultEntry]
    duration: float
    seed: int
    root_restart_delay: float | None
    cluster: Cluster | None = None  # nodes and node faults, for subtrees with a placement


def run_task(task: SweepTask) -> tuple[int, RunFigures]:
    """Run one task (module level, so a process pool can pickle it)."""
    result = simulate(
        task.spec,
        task.faults,
        duration=task.duration,
        seed=task.seed,
        root_restart_delay=task.root_restart_delay,
        keep_events=False,
        cluster=task.cluster,
    )
    tree = result.tree
    return task.point, RunFigures(
        tree.availability, tree.restarts, tree.give_ups, tree.time_to_give_up, tree.unhealthy
    )


@dataclass(frozen=True)
class SweepRow:
    """One grid point: its parameters and the estimates over its seeds.

    `availability` is the fraction of the run in which every worker was up;
    `restarts` the automatic restarts of all workers per run; `give_ups` the
    root's give-ups per run; `time_to_give_up` the first give-up's time,
    averaged over the `gave_up_runs` runs that gave up (None if none did);
    `unhealthy` the workers' liveness stops (exits with reason unhealthy) per run.
    """

    params: Mapping[str, Any]
    runs: int
    availability: Estimate
    restarts: Estimate
    give_ups: Estimate
    time_to_give_up: Estimate | None
    gave_up_runs: int
    unhealthy: Estimate | None = None  # None: a row built without it

    def metric(self, name: str) -> float | None:
        """The mean of a metric by name (None: time_to_give_up when no run gave up)."""
        if name not in METRICS:
            raise SpecError(None, "metric", name, f"expected one of {METRICS}")
        value = getattr(self, name)
        return None if value is None else float(value.mean)


METRICS = ("availability", "restarts", "give_ups", "time_to_give_up", "unhealthy")
"""The metrics a sweep row holds, by name (`SweepRow.metric`, a heatmap's `metric`)."""


@dataclass(frozen=True)
class SweepTable:
    """A sweep's rows, in grid order; `str()` renders it with 95% intervals."""

    axes: Mapping[str, tuple[Any, ...]]
    rows: list[SweepRow]
    duration: float
    seeds: tuple[int, ...]

    def row(self, **params: Any) -> SweepRow:
        for r in self.rows:
            if all(r.params.get(k) == v for k, v in params.items()):
                return r
        raise LookupError(f"no row with {params}")

    def __str__(self) -> str:
        names = list(self.axes)
        head = [*names, "availability %", "restarts", "give-ups", "runs gave up", "first give-up s"]
        # Liveness stops get a column when a run had one.
        probed = any(r.unhealthy is not None and r.unhealthy.mean > 0 for r in self.rows)
        if probed:
            head.append("unhealthy")
        cells = [head]
        for r in self.rows:
            first = r.time_to_give_up.format() if r.time_to_give_up is not None else "never"
            cells.append(
                [
                    *(_label(r.params[n]) for n in names),
                    r.availability.format(100.0),
                    r.restarts.format(),
                    r.give_ups.format(),
                    f"{r.gave_up_runs}/{r.runs}",
                    first,
                ]
                + ([r.unhealthy.format() if r.unhealthy is not None else "-"] if probed else [])
            )
        widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
        lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
        title = (
            f"{self.duration:g} s of virtual time x {len(self.seeds)} seeds per point; "
            "mean ± 95% confidence half-width per run"
        )
        return "\n".join([title, *lines])


def _label(value: Any) -> str:
    return str(getattr(value, "value", value))


def grid(**axes: Iterable[Any]) -> list[dict[str, Any]]:
    """Every combination of the axes' values, the last axis varying fastest."""
    names = list(axes)
    values = [tuple(v) for v in axes.values()]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


Mapper = Callable[
    [Callable[[SweepTask], tuple[int, RunFigures]], Iterable[SweepTask]],
    Iterable[tuple[int, RunFigures]],
]


def sweep(
    build: Callable[..., SupervisorSpec],
    faults: Mapping[str, FaultEntry] | None = None,
    *,
    duration: float,
    seeds: Iterable[int] = DEFAULT_SEEDS,
    root_restart_delay: float | None = DEFAULT_ROOT_RESTART_DELAY,
    map: Mapper = map,
    cluster: Cluster | None = None,
    **axes: Iterable[Any],
) -> SweepTable:
    """Run `build(**point)` for every point of the grid of `axes`, over `seeds`.

    `build` takes one keyword per axis and returns the SupervisorSpec of that
    point, e.g. `sweep(build, faults, duration=86400, intensity=[1, 5],
    period=[5, 30])`. The same seeds are used at every point, so points share
    their faults as far as the runs allow. `map` runs the tasks: the builtin
    (default, one core) or a pool's, e.g. `actors.experiment.sweep` (every core).
    `root_restart_delay` and `cluster` (nodes and node faults for the subtrees
    with a placement) have `simulate()`'s meaning and default.
    """
    if not axes:
        raise SpecError(None, "axes", axes, "expected at least one axis, e.g. intensity=[1, 5]")
    axis_values = {name: tuple(values) for name, values in axes.items()}
    points = grid(**axis_values)
    seed_list = tuple(seeds)
    if not seed_list:
        raise SpecError(None, "seeds", seeds, "expected at least one seed")
    specs = []
    for point in points:
        spec = build(**point)
        if not isinstance(spec, SupervisorSpec):
            raise SpecError(None, "build", spec, f"build({point}) must return a SupervisorSpec")
        specs.append(spec)
    fault_map = dict(faults or {})
    tasks: Iterator[SweepTask] = (
        SweepTask(i, spec, fault_map, float(duration), seed, root_restart_delay, cluster)
        for i, spec in enumerate(specs)
        for seed in seed_list
    )
    figures: list[list[RunFigures]] = [[] for _ in points]
    for index, run in map(run_task, tasks):
        figures[index].append(run)
    rows = [_row(point, runs) for point, runs in zip(points, figures, strict=True)]
    return SweepTable(axis_values, rows, float(duration), seed_list)


def _row(point: Mapping[str, Any], runs: Sequence[RunFigures]) -> SweepRow:
    firsts = [r.time_to_give_up for r in runs if r.time_to_give_up is not None]
    availability = Estimate.of([r.availability for r in runs])
    restarts = Estimate.of([float(r.restarts) for r in runs])
    give_ups = Estimate.of([float(r.give_ups) for r in runs])
    unhealthy = Estimate.of([float(r.unhealthy) for r in runs])
    assert availability is not None and restarts is not None and give_ups is not None
    return SweepRow(
        params=dict(point),
        runs=len(runs),
        availability=availability,
        restarts=restarts,
        give_ups=give_ups,
        time_to_give_up=Estimate.of(firsts),
        gave_up_runs=len(firsts),
        unhealthy=unhealthy,
    )
