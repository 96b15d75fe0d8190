"""compare()'s result: one row per spec, averaged over seeds, and its text rendering."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import SpecError
from ._metrics import DEFAULT_METRICS, Kind, MetricLike, all_metrics, kind_of, measure
from ._report import SimulationResult, format_seconds
from ._runs import Paired, Runs, by_columns, cell, compare_rows, header
from ._stats import Estimate


@dataclass(frozen=True)
class ComparisonRow:
    """One spec's figures over `runs` seeds; counts and times are means per run.

    `availability_min` is the worst run's; `gave_up_runs` counts the runs in
    which the tree gave up at least once; `time_to_give_up` is the mean over
    those runs of the first give-up's time (None if no run gave up).
    `seeds` are the runs' seeds; `values` every metric's figure in each run (the
    defaults, those of `compare(metrics=...)`, and each nested supervisor's
    give_ups(PATH)); `estimates` their means with intervals that fit each one.
    """

    name: str
    runs: int
    availability: float
    availability_min: float
    downtime: float
    restarts: float
    failures: float
    give_ups: float
    gave_up_runs: int
    time_to_give_up: float | None
    intensity_reached: float
    availability_ci: Estimate | None = None  # the mean with its 95% interval over the seeds
    seeds: tuple[int, ...] = ()
    values: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)
    estimates: Mapping[str, Estimate | None] = field(default_factory=dict)

    def defined(self, name: str) -> int:
        """How many of the runs define metric `name`."""
        return sum(1 for v in self.values.get(name, ()) if v is not None)


def summarize(
    name: str,
    results: Sequence[SimulationResult],
    metrics: Mapping[str, MetricLike] | None = None,
) -> ComparisonRow:
    """Average a spec's runs into one row; keep every run's figure of each metric."""
    n = len(results)
    trees = [r.tree for r in results]
    chosen = all_metrics(metrics or {})
    measured = [measure(chosen, r) for r in results]
    values = {m: tuple(f[m] for f in measured) for m in chosen}
    nested = sorted({p for t in trees for p in t.supervisor_give_ups if p})
    for p in nested:
        values[f"give_ups({p})"] = tuple(float(t.supervisor_give_ups.get(p, 0)) for t in trees)
    kinds = {m: kind_of(c) for m, c in chosen.items()}
    estimates = {
        m: Estimate.of([v for v in vs if v is not None], kinds.get(m, "count"))
        for m, vs in values.items()
    }
    firsts = [t.time_to_give_up for t in trees if t.time_to_give_up is not None]
    return ComparisonRow(
        name=name,
        runs=n,
        availability=sum(t.availability for t in trees) / n,
        availability_min=min(t.availability for t in trees),
        downtime=sum(t.downtime for t in trees) / n,
        restarts=sum(t.restarts for t in trees) / n,
        failures=sum(t.failures for t in trees) / n,
        give_ups=sum(t.give_ups for t in trees) / n,
        gave_up_runs=len(firsts),
        time_to_give_up=sum(firsts) / len(firsts) if firsts else None,
        intensity_reached=sum(t.intensity_reached for t in trees) / n,
        availability_ci=Estimate.of([t.availability for t in trees], "fraction"),
        seeds=tuple(r.seed for r in results),
        values=values,
        estimates=estimates,
    )


COLUMNS = (
    "spec",
    "availability %",
    "worst run",
    "downtime",
    "restarts",
    "failures",
    "give-ups",
    "runs gave up",
    "first give-up",
)


@dataclass(frozen=True)
class Table(Runs):
    """Rows of a comparison, in the order the specs were given.

    `str(table)` is a plain-text table; `rows` are `ComparisonRow`s for programs.
    Every run is kept: `to_records()` (one per spec x seed), `to_pandas()`,
    `to_csv(path)`, `to_parquet(path)`; `paired(a, b, metric)` compares two
    specs by name over their common seeds. `metrics` names the metrics of
    `compare(metrics=...)`, `kinds` every metric's kind (its interval).
    """

    rows: list[ComparisonRow]
    duration: float
    seeds: tuple[int, ...]
    metrics: tuple[str, ...] = ()
    kinds: Mapping[str, Kind] = field(default_factory=dict)

    def row(self, name: str) -> ComparisonRow:
        """The row of spec `name`."""
        for r in self.rows:
            if r.name == name:
                return r
        known = ", ".join(repr(r.name) for r in self.rows)
        raise SpecError(None, "spec", name, f"expected one of the compared specs: {known}")

    def columns(self) -> list[str]:
        """The columns of `to_records()`: spec, seed, the metrics, then each nested
        supervisor's give-ups as give_ups(PATH)."""
        return ["spec", "seed", *DEFAULT_METRICS, *self.metrics, *by_columns(self.rows)]

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per spec x seed (tidy): `spec`, `seed`, every metric."""
        names = self.columns()[2:]
        return [
            {"spec": r.name, "seed": seed, **{n: r.values[n][i] for n in names if n in r.values}}
            for r in self.rows
            for i, seed in enumerate(r.seeds)
        ]

    def paired(self, a: str, b: str, metric: str) -> Paired:
        """Spec `a` against spec `b` (by name) on `metric`: the mean difference a - b
        over the seeds both define it, with its 95% interval, beside the unpaired one."""
        return compare_rows(self.row(a), self.row(b), metric, self.kinds, repr(a), repr(b))

    def cells(self) -> list[list[str]]:
        """The table as text cells, header first."""
        out = [[*COLUMNS, *(header(n, self.kinds.get(n, "value")) for n in self.metrics)]]
        for r in self.rows:
            first = "never" if r.time_to_give_up is None else format_seconds(r.time_to_give_up)
            out.append(
                [
                    r.name,
                    _availability(r),
                    f"{r.availability_min * 100:.{_decimals(r)}f}",
                    format_seconds(r.downtime),
                    f"{r.restarts:.0f}",
                    f"{r.failures:.0f}",
                    f"{r.give_ups:.1f}",
                    f"{r.gave_up_runs}/{r.runs}",
                    first,
                    *(
                        cell(r.estimates.get(n), self.kinds.get(n, "value"), r.defined(n), r.runs)
                        for n in self.metrics
                    ),
                ]
            )
        return out

    def __str__(self) -> str:
        cells = self.cells()
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]

        def line(row: list[str]) -> str:
            first = row[0].ljust(widths[0])
            rest = (cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True))
            return "  ".join([first, *rest])

        rule = "  ".join("-" * w for w in widths)
        title = (
            f"{format_seconds(self.duration)} of virtual time, {len(self.seeds)} seeds; "
            "means per run"
        )
        return "\n".join([title, line(cells[0]), rule, *(line(r) for r in cells[1:]), LEGEND])


LEGEND = """\
availability %: share of the run with every worker up, mean ± 95% confidence half-width
  over the seeds (rounded to what they support); worst run: the lowest seed's.
downtime: mean time not available. restarts: automatic restarts of all workers per run;
  one_for_all and rest_for_one restart the siblings of a failed child too, so restarts
  can exceed failures. failures: abnormal exits per run. give-ups: times the root
  supervisor gave up per run. runs gave up: runs with at least one give-up.
first give-up: the first give-up's time, averaged over the runs that gave up only."""


def _decimals(row: ComparisonRow) -> int:
    est = row.availability_ci
    if est is None or not math.isfinite(est.half_width) or est.half_width <= 0:
        return 2
    return max(0, 1 - math.floor(math.log10(est.half_width * 100)))


def _availability(row: ComparisonRow) -> str:
    est = row.availability_ci
    if est is None:
        return f"{row.availability * 100:.2f}"
    return est.format(100.0)
