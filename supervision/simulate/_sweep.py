"""Sweeps: a grid of specs over many seeds of one fault model, with confidence intervals.

Pure: the runs are handed to a `map` function, `builtins.map` by default (one
core). `actors.experiment.sweep` passes a process pool's map, so the same
sweep runs on every core; the tasks and their results are small picklable
records (no event lists cross the process boundary: a run keeps its events
only while a metric that reads them is measured). Every run's figures are kept,
per point and seed, for export and paired comparisons.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import SpecError
from ..spec._spec import SupervisorSpec
from ._defaults import DEFAULT_ROOT_RESTART_DELAY, DEFAULT_SEEDS
from ._faults import FaultEntry
from ._metrics import (
    DEFAULT_METRICS,
    Kind,
    MetricLike,
    all_metrics,
    check_metrics,
    kind_of,
    measure,
    needs_events,
)
from ._nodes import Cluster
from ._run import simulate
from ._runs import Paired, Runs, by_columns, cell, compare_rows, header
from ._stats import Estimate


@dataclass(frozen=True)
class RunFigures:
    """What one run contributes to a sweep (small: crosses process boundaries).

    `values`: each metric's figure by name (the defaults first); `give_ups_by`:
    each nested supervisor's give-ups by path.
    """

    seed: int
    values: Mapping[str, float | None]
    give_ups_by: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepTask:
    """One run of a sweep: the point's index, its spec, one seed, the metrics to take."""

    point: int
    spec: SupervisorSpec
    faults: Mapping[str, FaultEntry]
    duration: float
    seed: int
    root_restart_delay: float | None
    cluster: Cluster | None = None  # nodes and node faults, for subtrees with a placement
    metrics: Mapping[str, MetricLike] = field(default_factory=dict)  # the user's


def run_task(task: SweepTask) -> tuple[int, RunFigures]:
    """Run one task (module level, so a process pool can pickle it)."""
    chosen = all_metrics(task.metrics)
    result = simulate(
        task.spec,
        task.faults,
        duration=task.duration,
        seed=task.seed,
        root_restart_delay=task.root_restart_delay,
        # The events only when a metric reads them: a run is faster without.
        keep_events=any(needs_events(m) for m in task.metrics.values()),
        cluster=task.cluster,
    )
    nested = {p: n for p, n in result.tree.supervisor_give_ups.items() if p}
    return task.point, RunFigures(task.seed, measure(chosen, result), nested)


@dataclass(frozen=True)
class SweepRow:
    """One grid point: its parameters and the estimates over its seeds.

    `availability` is the fraction of the run in which every worker was up;
    `restarts` the automatic restarts of all workers per run; `give_ups` the
    root's give-ups per run; `time_to_give_up` the first give-up's time,
    averaged over the `gave_up_runs` runs that gave up (None if none did), with
    a bootstrap interval; `unhealthy` the workers' liveness stops (exits with
    reason unhealthy) per run. `give_ups_by` holds each nested supervisor's
    give-ups per run, by its path. `seeds` are the runs' seeds, in order;
    `values` every metric's figure in each of them (None: not defined in that
    run), and `estimates` its mean and interval over the runs that define it,
    the defaults' and those of `sweep(metrics=...)`.
    """

    params: Mapping[str, Any]
    runs: int
    availability: Estimate
    restarts: Estimate
    give_ups: Estimate
    time_to_give_up: Estimate | None
    gave_up_runs: int
    unhealthy: Estimate | None = None  # None: a row built without it
    give_ups_by: Mapping[str, Estimate] = field(default_factory=dict)
    seeds: tuple[int, ...] = ()
    values: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)
    estimates: Mapping[str, Estimate | None] = field(default_factory=dict)

    def metric(self, name: str) -> float | None:
        """The mean of a metric by name (None: no run defined it, e.g. time_to_give_up
        when no run gave up)."""
        return None if (est := self.estimate(name)) is None else float(est.mean)

    def estimate(self, name: str) -> Estimate | None:
        """A metric's mean with its interval, by name (None: no run defined it)."""
        if name in METRICS and name not in self.estimates:
            value = getattr(self, name)  # a row built by hand
            return value if value is None or isinstance(value, Estimate) else None
        if name not in self.estimates:
            known = (*METRICS, *(n for n in self.estimates if n not in METRICS))
            raise SpecError(None, "metric", name, f"expected one of {known}")
        return self.estimates[name]

    def defined(self, name: str) -> int:
        """How many of the runs define metric `name` (a time: the runs in which it happened)."""
        return sum(1 for v in self.values.get(name, ()) if v is not None)


METRICS = tuple(DEFAULT_METRICS)
"""The metrics every sweep row holds, by name (`SweepRow.metric`, a heatmap's `metric`)."""


@dataclass(frozen=True)
class SweepTable(Runs):
    """A sweep's rows, in grid order; `str()` renders it with 95% intervals.

    Every run is kept: `to_records()` (one per point x seed), `to_pandas()`,
    `to_csv(path)`, `to_parquet(path)`; `paired(a, b, metric)` compares two
    points over their common seeds. `metrics` names the metrics of
    `sweep(metrics=...)`, `kinds` every metric's kind (its interval).
    """

    axes: Mapping[str, tuple[Any, ...]]
    rows: list[SweepRow]
    duration: float
    seeds: tuple[int, ...]
    metrics: tuple[str, ...] = ()
    kinds: Mapping[str, Kind] = field(default_factory=dict)

    def row(self, **params: Any) -> SweepRow:
        for r in self.rows:
            if all(r.params.get(k) == v for k, v in params.items()):
                return r
        raise LookupError(f"no row with {params}")

    def columns(self) -> list[str]:
        """The columns of `to_records()`: the axes, seed, the metrics, then each nested
        supervisor's give-ups as give_ups(PATH)."""
        return [*self.axes, "seed", *METRICS, *self.metrics, *by_columns(self.rows)]

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per point x seed (tidy): the axes' values, `seed`, every metric."""
        names = [*METRICS, *self.metrics]
        by = by_columns(self.rows)
        out: list[dict[str, Any]] = []
        for r in self.rows:
            for i, seed in enumerate(r.seeds):
                record: dict[str, Any] = {a: r.params[a] for a in self.axes}
                record["seed"] = seed
                record.update((n, r.values[n][i]) for n in names)
                record.update((c, r.values[c][i]) for c in by)
                out.append(record)
        return out

    def paired(self, a: Mapping[str, Any], b: Mapping[str, Any], metric: str) -> Paired:
        """Point `a` against point `b` (each a dict of axis values, as `row()` takes)
        on `metric`: the mean difference a - b over the seeds both define it, with its
        95% interval; beside it the unpaired one, as if the runs shared no seed."""
        return compare_rows(self.row(**a), self.row(**b), metric, self.kinds, _point(a), _point(b))

    def __str__(self) -> str:
        names = list(self.axes)
        head = [*names, "availability %", "restarts", "give-ups", "runs gave up", "first give-up s"]
        # Liveness stops get a column when a run had one.
        probed = any(r.unhealthy is not None and r.unhealthy.mean > 0 for r in self.rows)
        if probed:
            head.append("unhealthy")
        # A nested supervisor's give-ups get a column when it gave up in a run.
        nested = sorted({p for r in self.rows for p, e in r.give_ups_by.items() if e.mean > 0})
        head += [f"give-ups {p}" for p in nested]
        head += [header(n, self.kinds.get(n, "value")) for n in self.metrics]
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
                + [cell(r.give_ups_by.get(p), "count", r.runs, r.runs) for p in nested]
                + [
                    cell(r.estimates.get(n), self.kinds.get(n, "value"), r.defined(n), r.runs)
                    for n in self.metrics
                ]
            )
        widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
        lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
        skewed = any("[" in c for row in cells[1:] for c in row)
        lines.insert(1, "  ".join("-" * w for w in widths))
        title = (
            f"{self.duration:g} s of virtual time x {len(self.seeds)} seeds per point; "
            "mean ± 95% confidence half-width per run"
            + (" ([low, high] where not centred)" if skewed else "")
        )
        return "\n".join([title, *lines])


def _point(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={_label(v)}" for k, v in params.items())


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
    metrics: Mapping[str, MetricLike | str] | None = None,
    **axes: Iterable[Any],
) -> SweepTable:
    """Run `build(**point)` for every point of the grid of `axes`, over `seeds`.

    `build` takes one keyword per axis and returns the SupervisorSpec of that
    point, e.g. `sweep(build, faults, duration=86400, intensity=[1, 5],
    period=[5, 30])`. The same seeds are used at every point, so points share
    their faults as far as the runs allow. `map` runs the tasks: the builtin
    (default, one core) or a pool's, e.g. `actors.experiment.sweep` (every core).
    `root_restart_delay` and `cluster` (nodes and node faults for the subtrees
    with a placement) have `simulate()`'s meaning and default. `metrics`: named
    metrics of your own (`metric("k_of_n(1, web/a, web/b)")`, a module-level
    function of a run, or the text) kept per run beside the five defaults.
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
    chosen = check_metrics(metrics)
    kinds = {n: kind_of(m) for n, m in all_metrics(chosen).items()}
    fault_map = dict(faults or {})
    tasks: Iterator[SweepTask] = (
        SweepTask(i, spec, fault_map, float(duration), seed, root_restart_delay, cluster, chosen)
        for i, spec in enumerate(specs)
        for seed in seed_list
    )
    figures: list[list[RunFigures]] = [[] for _ in points]
    for index, run in map(run_task, tasks):
        figures[index].append(run)
    rows = [
        _row(point, runs, kinds, seed_list) for point, runs in zip(points, figures, strict=True)
    ]
    return SweepTable(axis_values, rows, float(duration), seed_list, tuple(chosen), kinds)


def _row(
    point: Mapping[str, Any],
    runs: Sequence[RunFigures],
    kinds: Mapping[str, Kind],
    seeds: Sequence[int],
) -> SweepRow:
    order = {s: i for i, s in enumerate(seeds)}
    runs = sorted(runs, key=lambda r: order[r.seed])  # in whatever order the map gave them
    values = {n: tuple(r.values[n] for r in runs) for n in kinds}
    nested = sorted({p for r in runs for p in r.give_ups_by})
    for p in nested:
        values[f"give_ups({p})"] = tuple(float(r.give_ups_by.get(p, 0)) for r in runs)
    estimates = {
        n: Estimate.of([v for v in vs if v is not None], kinds.get(n, "count"))
        for n, vs in values.items()
    }
    availability, restarts = estimates["availability"], estimates["restarts"]
    give_ups = estimates["give_ups"]
    assert availability is not None and restarts is not None and give_ups is not None
    by = {p: estimates[f"give_ups({p})"] for p in nested}
    return SweepRow(
        params=dict(point),
        runs=len(runs),
        availability=availability,
        restarts=restarts,
        give_ups=give_ups,
        time_to_give_up=estimates["time_to_give_up"],
        gave_up_runs=sum(1 for v in values["time_to_give_up"] if v is not None),
        unhealthy=estimates["unhealthy"],
        give_ups_by={p: e for p, e in by.items() if e is not None},
        seeds=tuple(r.seed for r in runs),
        values=values,
        estimates=estimates,
    )
