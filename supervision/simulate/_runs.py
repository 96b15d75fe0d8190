"""Every run of a sweep or a comparison kept: paired comparisons and tidy export.

A row of such a table (a sweep's point, a compared spec) keeps `seeds` and, by
metric, its figure in each run (`values`). Two rows compare run by run over their
common seeds (`Paired`). A table gives `to_records()`, one dict per run (a point
or spec x a seed), its columns in a fixed order; the rest is pandas's (an optional
dependency, imported when asked for, so `supervision` itself needs none):
`to_pandas()`, and `to_csv`, `to_parquet` (pyarrow) through it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._errors import SpecError
from ._metrics import Kind
from ._stats import Estimate, paired, unpaired


class KeptRow(Protocol):
    """A row that keeps its runs: their seeds, and each metric's figure in each."""

    @property
    def seeds(self) -> tuple[int, ...]: ...

    @property
    def values(self) -> Mapping[str, tuple[float | None, ...]]: ...


INSTALL = "pip install 'nannytree[experiment]'"


def _module(name: str, what: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ImportError(f"{what} needs {name}, which is not installed: {INSTALL}") from error


class Runs:
    """The export of a table whose `to_records()` lists its runs."""

    def to_records(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def columns(self) -> list[str]:
        raise NotImplementedError

    def to_pandas(self) -> Any:
        """The runs as a pandas DataFrame: one row per run, the columns of `to_records()`."""
        pandas = _module("pandas", "to_pandas()")
        return pandas.DataFrame.from_records(self.to_records(), columns=self.columns())

    def to_csv(self, path: Any) -> None:
        """Write the runs to `path` as CSV (through pandas; no index column)."""
        self.to_pandas().to_csv(path, index=False)

    def to_parquet(self, path: Any) -> None:
        """Write the runs to `path` as Parquet (through pandas and pyarrow)."""
        _module("pyarrow", "to_parquet()")
        frame = self.to_pandas()
        # Axis values of no common type (an enum, a tuple) go as their text.
        for name in frame.columns:
            if frame[name].dtype == object:
                frame[name] = frame[name].map(lambda v: v if v is None else _text(v))
        frame.to_parquet(path, index=False)


def _text(value: Any) -> Any:
    if isinstance(value, str | int | float | bool):
        return value
    return str(getattr(value, "value", value))


@dataclass(frozen=True)
class Paired:
    """Two settings compared on one metric over the same seeds.

    `difference`: the mean of a - b over the `difference.n` seeds where both
    define the metric, with its 95% interval (Student's t; a time's by the
    bootstrap); `unpaired`: the difference of the two means with Welch's interval,
    as if the runs shared nothing (None with fewer than 2 runs each). With common
    random numbers the paired interval is the tighter one. `str()` gives a share's
    difference in percentage points.
    """

    a: str
    b: str
    metric: str
    difference: Estimate
    unpaired: Estimate | None
    kind: Kind = "value"

    def __str__(self) -> str:
        scale, unit = (100.0, " points") if self.kind == "fraction" else (1.0, "")
        d = self.difference
        line = f"{self.metric}: {self.a} - {self.b} = {d.format(scale)}{unit} over {d.n} seeds"
        if self.unpaired is not None:
            line += f" (unpaired: {self.unpaired.format(scale)}{unit})"
        return line


def compare_rows(
    a: KeptRow, b: KeptRow, metric: str, kinds: Mapping[str, Kind], a_name: str, b_name: str
) -> Paired:
    """The paired comparison of two rows (a SweepRow or a ComparisonRow) on `metric`."""
    for row in (a, b):
        if metric not in row.values:
            known = ", ".join(row.values)
            raise SpecError(None, "metric", metric, f"expected one of the table's: {known}")
    common = [s for s in a.seeds if s in b.seeds]
    xs = [a.values[metric][a.seeds.index(s)] for s in common]
    ys = [b.values[metric][b.seeds.index(s)] for s in common]
    kind = kinds.get(metric, "value")
    difference = paired(xs, ys, kind)
    if difference is None:
        raise SpecError(
            None,
            "metric",
            metric,
            f"no seed defines it for both {a_name} and {b_name}; nothing to pair",
        )
    return Paired(a_name, b_name, metric, difference, unpaired(xs, ys), kind)


def by_columns(rows: Sequence[KeptRow]) -> list[str]:
    return sorted({n for r in rows for n in r.values if n.startswith("give_ups(")})


def header(name: str, kind: Kind) -> str:
    return f"{name} %" if kind == "fraction" else f"{name} s" if kind == "time" else name


def cell(est: Estimate | None, kind: Kind, defined: int, runs: int) -> str:
    if est is None:
        return "-" if defined == runs else f"- (0/{runs})"
    text = est.format(100.0) if kind == "fraction" else est.format()
    return text if defined == runs else f"{text} ({defined}/{runs})"
