"""Estimates over seeds: a mean with its 95% confidence interval (Student's t).

Shared by sweep() and compare(); knows nothing of simulations.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Two-sided 95% Student t quantiles by degrees of freedom; 1.96 beyond the table.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def _t95(df: int) -> float:
    if df < 1:
        return math.inf
    return _T95[df - 1] if df <= len(_T95) else 1.96


@dataclass(frozen=True)
class Estimate:
    """A mean over `n` runs with its 95% confidence interval (Student's t).

    With one run the interval is unbounded (`low`/`high` are -inf/+inf).
    """

    mean: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @classmethod
    def of(cls, values: Sequence[float]) -> Estimate | None:
        """The estimate of `values`; None when there are none."""
        n = len(values)
        if n == 0:
            return None
        mean = math.fsum(values) / n
        if n == 1:
            return cls(mean, -math.inf, math.inf, 1)
        half = _t95(n - 1) * statistics.stdev(values) / math.sqrt(n)
        return cls(mean, mean - half, mean + half, n)

    def format(self, scale: float = 1.0, unit: str = "") -> str:
        """`mean ± half-width`, rounded to the half-width's first significant digits."""
        mean, half = self.mean * scale, self.half_width * scale
        if not math.isfinite(half):
            return f"{mean:.3g}{unit} ± ∞"
        if half == 0:
            return f"{mean:.6g}{unit} ± 0"
        decimals = max(0, 1 - math.floor(math.log10(half)))
        return f"{mean:.{decimals}f}{unit} ± {half:.{decimals}f}"
