"""Estimates over seeds: a mean with a 95% confidence interval that fits the quantity.

A share (availability) gets Student's t interval kept within [0, 1]; a count, t
kept at or above 0; a time, a percentile bootstrap of the mean (skewed and
positive: a symmetric t interval would go below 0); anything else, plain t.
The bootstrap draws from its own seeded generator (a 64-bit LCG, no `random`):
the same values always give the same interval. Shared by sweep() and compare();
knows nothing of simulations.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["fraction", "count", "time", "value"]

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
    """A mean over `n` runs with its 95% confidence interval.

    `Estimate.of(values, kind)` chooses the interval for the quantity (see the
    module). With one run the interval is unbounded (-inf/+inf, clipped to the
    quantity's range: [0, 1] for a share, [0, inf) for a count or a time).
    """

    mean: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def symmetric(self) -> bool:
        """Whether the mean is the interval's midpoint (then `format` reads mean ± half)."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return math.isinf(self.low) and math.isinf(self.high)
        return math.isclose(self.mean - self.low, self.high - self.mean, rel_tol=1e-9, abs_tol=0)

    @classmethod
    def of(cls, values: Sequence[float], kind: Kind = "value") -> Estimate | None:
        """The estimate of `values` with the interval that fits `kind`; None if none."""
        n = len(values)
        if n == 0:
            return None
        mean = math.fsum(values) / n
        if kind == "time" and n > 1:
            low, high = bootstrap(values)
            return cls(mean, low, high, n)
        if n == 1:
            low, high = -math.inf, math.inf
        else:
            half = _t95(n - 1) * statistics.stdev(values) / math.sqrt(n)
            low, high = mean - half, mean + half
        if kind == "fraction":
            low, high = max(0.0, low), min(1.0, high)
        elif kind in ("count", "time"):
            low = max(0.0, low)
        return cls(mean, low, high, n)

    def format(self, scale: float = 1.0, unit: str = "") -> str:
        """`mean ± half-width`, or `mean [low, high]` when the interval is not centred on
        the mean (clipped, or a bootstrap's); rounded to the interval's first significant
        digits."""
        mean, low, high = self.mean * scale, self.low * scale, self.high * scale
        half = (high - low) / 2
        if not math.isfinite(half):
            if self.symmetric:
                return f"{mean:.3g}{unit} ± ∞"
            return f"{mean:.3g}{unit} [{low:.3g}, {high:.3g}]"
        if half == 0:
            return f"{mean:.6g}{unit} ± 0"
        decimals = max(0, 1 - math.floor(math.log10(half)))
        if self.symmetric:
            return f"{mean:.{decimals}f}{unit} ± {half:.{decimals}f}"
        return f"{mean:.{decimals}f}{unit} [{low:.{decimals}f}, {high:.{decimals}f}]"


_ROUNDS = 2000
_MASK = (1 << 64) - 1


def bootstrap(values: Sequence[float], rounds: int = _ROUNDS, seed: int = 0) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean of `values` (deterministic).

    Within the values' range, so a positive quantity's interval stays positive.
    """
    n = len(values)
    state = (seed * 0x9E3779B97F4A7C15 + 1) & _MASK
    means = []
    for _ in range(rounds):
        total = 0.0
        for _ in range(n):
            # Knuth's MMIX LCG; the high bits index the sample.
            state = (state * 6364136223846793005 + 1442695040888963407) & _MASK
            total += values[(state >> 32) * n >> 32]
        means.append(total / n)
    means.sort()
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]


def paired(a: Sequence[float | None], b: Sequence[float | None], kind: Kind) -> Estimate | None:
    """The mean of the differences a - b over the runs both define, with its 95%
    interval (a time's by the bootstrap, anything else Student's t): the paired
    comparison of two settings run on the same seeds. None if no run pairs up."""
    diffs = [x - y for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return Estimate.of(diffs, "time" if kind == "time" else "value") if diffs else None


def unpaired(a: Sequence[float | None], b: Sequence[float | None]) -> Estimate | None:
    """The difference of the two means with Welch's 95% interval, as if the runs
    shared nothing (to set beside `paired`)."""
    xs = [x for x in a if x is not None]
    ys = [y for y in b if y is not None]
    if len(xs) < 2 or len(ys) < 2:
        return None
    va, vb = statistics.variance(xs) / len(xs), statistics.variance(ys) / len(ys)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(xs) - 1) + vb**2 / (len(ys) - 1)) if se > 0 else 1.0
    diff = math.fsum(xs) / len(xs) - math.fsum(ys) / len(ys)
    half = _t95(int(df)) * se
    return Estimate(diff, diff - half, diff + half, min(len(xs), len(ys)))
