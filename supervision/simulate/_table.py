"""compare()'s result: one row per spec, averaged over seeds, and its text rendering."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._report import SimulationResult, format_seconds
from ._stats import Estimate


@dataclass(frozen=True)
class ComparisonRow:
    """One spec's figures over `runs` seeds; counts and times are means per run.

    `availability_min` is the worst run's; `gave_up_runs` counts the runs in
    which the tree gave up at least once; `time_to_give_up` is the mean over
    those runs of the first give-up's time (None if no run gave up).
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


def summarize(name: str, results: Sequence[SimulationResult]) -> ComparisonRow:
    """Average a spec's runs into one row."""
    n = len(results)
    trees = [r.tree for r in results]
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
        availability_ci=Estimate.of([t.availability for t in trees]),
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
class Table:
    """Rows of a comparison, in the order the specs were given.

    `str(table)` is a plain-text table; `rows` are `ComparisonRow`s for programs.
    """

    rows: list[ComparisonRow]
    duration: float
    seeds: tuple[int, ...]

    def cells(self) -> list[list[str]]:
        """The table as text cells, header first."""
        out = [list(COLUMNS)]
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
                ]
            )
        return out

    def __str__(self) -> str:
        cells = self.cells()
        widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]

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
