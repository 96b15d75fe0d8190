"""compare()'s result: one row per spec, averaged over seeds, and its text rendering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._sim_report import SimulationResult, format_seconds


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
    )


COLUMNS = (
    "spec",
    "availability",
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
                    f"{r.availability:.4%}",
                    f"{r.availability_min:.4%}",
                    format_seconds(r.downtime),
                    f"{r.restarts:.1f}",
                    f"{r.failures:.1f}",
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
        return "\n".join([title, line(cells[0]), rule, *(line(r) for r in cells[1:])])
