"""Rates of events from a history: the exponential MLE with its exact interval, a
Weibull beside it, and proportions (Wilson); the chi-square quantiles they need, with
no numerical library (supervision/ imports none)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._report import format_seconds


@dataclass(frozen=True)
class Rate:
    """`events` in `exposure` seconds: the rate's MLE and its exact 95% interval."""

    events: int
    exposure: float

    @property
    def rate(self) -> float:
        return self.events / self.exposure if self.exposure > 0 else math.nan

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The exact (chi-square) interval of the rate, per second."""
        if self.exposure <= 0:
            return (0.0, math.inf)
        tail = (1 - confidence) / 2
        k, two_t = self.events, 2 * self.exposure
        low = chi2_quantile(tail, 2 * k) / two_t if k else 0.0
        return low, chi2_quantile(1 - tail, 2 * k + 2) / two_t

    @property
    def mean_time(self) -> float:
        """The mean time between events (1 / rate): inf with none seen."""
        return self.exposure / self.events if self.events else math.inf

    def format(self) -> str:
        low, high = self.interval()
        between = f"{_seconds(_per(high))} to {_seconds(_per(low))}"
        if not self.events:
            longer = _seconds(_per(high))
            return f"none in {format_seconds(self.exposure)} (mean time > {longer})"
        return (
            f"{self.events} in {format_seconds(self.exposure)}: one every "
            f"{_seconds(self.mean_time)} (95%: {between})"
        )


def _seconds(value: float) -> str:
    """Seconds to three figures below a minute (a crash every 0.444 s), else as reports."""
    if not math.isfinite(value):
        return "never"
    return f"{value:.3g} s" if value < 60 else format_seconds(value)


def _per(rate: float) -> float:
    """The mean time of a rate: inf for none."""
    return 1 / rate if rate > 0 else math.inf


@dataclass(frozen=True)
class Proportion:
    """`hits` in `trials`: the fraction and its 95% Wilson interval."""

    hits: int
    trials: int

    @property
    def value(self) -> float:
        return self.hits / self.trials if self.trials else 0.0

    def interval(self, z: float = 1.959964) -> tuple[float, float]:
        n = self.trials
        if n == 0:
            return (0.0, 1.0)
        p = self.hits / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - half), min(1.0, centre + half)

    def format(self) -> str:
        low, high = self.interval()
        return f"{self.hits} of {self.trials} ({self.value:.1%}; 95%: {low:.1%} to {high:.1%})"


@dataclass(frozen=True)
class WeibullFit:
    """A Weibull fitted to the runs (shape, scale) and whether it beats the exponential."""

    shape: float
    scale: float
    statistic: float  # the likelihood ratio statistic, chi-square with 1 df
    better: bool  # the exponential is rejected at 5% (statistic > 3.841)


def fit_weibull(times: Sequence[float], ended: Sequence[bool]) -> WeibullFit | None:
    """The Weibull MLE of run lengths `times` (`ended`: the run ended by a failure, else
    censored) and its likelihood-ratio test against the exponential; None with fewer
    than 2 failures or a zero length."""
    d = sum(ended)
    if d < 2 or any(t <= 0 for t in times):
        return None
    logs = [math.log(t) for t in times]
    failed_logs = math.fsum(lg for lg, e in zip(logs, ended, strict=True) if e) / d
    top = max(logs)

    def score(k: float) -> float:  # the profile likelihood's derivative in the shape
        weights = [math.exp(k * (lg - top)) for lg in logs]  # t^k, scaled against overflow
        s = math.fsum(weights)
        return (
            1 / k + failed_logs - math.fsum(w * lg for w, lg in zip(weights, logs, strict=True)) / s
        )

    low, high = 1e-3, 50.0
    if score(high) > 0 or score(low) < 0:
        return None
    for _ in range(100):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if score(mid) > 0 else (low, mid)
    k = math.sqrt(low * high)
    s_k = math.fsum(math.exp(k * lg) for lg in logs)
    scale = (s_k / d) ** (1 / k)
    ll_weibull = d * math.log(k) - d * math.log(s_k / d) + (k - 1) * d * failed_logs - d
    ll_exponential = -d * math.log(math.fsum(times) / d) - d
    statistic = max(0.0, 2 * (ll_weibull - ll_exponential))
    return WeibullFit(k, scale, statistic, statistic > 3.841459)


def chi2_quantile(q: float, df: int) -> float:
    """The `q` quantile of the chi-square distribution with `df` degrees of freedom."""
    if df <= 0:
        return 0.0
    a = df / 2
    low, high = 0.0, max(1.0, df + 20 * math.sqrt(2 * df) + 50)
    for _ in range(200):  # bisection on the regularised lower incomplete gamma
        mid = (low + high) / 2
        if _gamma_p(a, mid / 2) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _gamma_p(a: float, x: float) -> float:
    """P(a, x), the regularised lower incomplete gamma function (series or fraction)."""
    if x <= 0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1 / a
        n = a
        for _ in range(1000):
            n += 1
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return total * math.exp(log_front)
    # Lentz's continued fraction for Q(a, x).
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return 1 - math.exp(log_front) * h
