"""A tree's own history read back into fault models: lines of an event journal in,
per-worker rates with their uncertainty and the simulator's models out.

The journal is what `nannytree run --event-log` writes (one JSON object a line:
`time`, `who`, `what`, `reason`, `detail`, ...). Its text is data from a file and,
through reasons and details, from children: every line is bounded in bytes, the
number of lines read is bounded, names are kept short and printed escaped, and a
line that is not an event is counted and skipped.

What is measured, per worker (a `who` that no `supervisor_started` names):
- exposure: the seconds its processes were up, from each `child_started` to the
  exit, the stop, the first failing liveness probe before a liveness kill, or the
  journal's end (a censored run);
- crashes: exits by itself, except watchdog and liveness kills (those are hangs);
  the rate is the exponential MLE crashes / exposure with its exact 95% interval
  (chi-square: [chi2(2k, .025), chi2(2k + 2, .975)] / 2T for k events in T seconds);
  with 10 or more complete runs a Weibull is fitted too and said to fit better
  when the likelihood-ratio test rejects the exponential at 5%;
- hangs: watchdog and liveness kills over the same exposure, the same interval;
- start duration: from the supervisor's previous event (the child's own exit, or
  the supervisor's start) to `child_started`: it includes the restart's own
  latency (milliseconds live);
- stop duration: from the supervisor's previous event (the exit, stop or request
  that made it stop the child) to `child_terminated`;
- start failures: `start_failed` over start attempts (Wilson interval);
- probe flakiness: the failed probes of failing streaks that recovered (each
  `probe_failed` before a `child_healthy`; where a journal has no `probe_failed`
  events, one per `child_unhealthy` streak: a lower bound) over the probes made
  (probed uptime / the probe period: from the tree's spec when given, else the
  default 10 s).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import NannyError
from .._reasons import ExitReason
from ..spec._probes import LIVENESS_PERIOD
from ..spec._spec import ChildSpec, SupervisorSpec
from ._faults import CRASH, Exponential, FaultModel, Flapping, Hang, Healthy
from ._report import format_seconds
from ._stats import Estimate

MAX_LINES = 2_000_000
"""Lines read from a journal at most (10 MB files, 6 of them, hold fewer)."""
MAX_LINE_BYTES = 64 * 1024
"""A longer line is skipped: the journal's own lines are a few hundred bytes."""
MAX_TIME = 1e11
"""Seconds (since the epoch, or virtual) a line's time may not exceed: year 5138."""
MAX_NAME = 200
"""Characters of a `who` kept; a longer name is not a child of a tree file."""
SHORTEST = 1e-3
"""A model's mean time at least (seconds): runs that ended as they began."""
MIN_EVENTS = 1
"""Starts a worker needs in the journal before its rates are fitted."""

_HANG_KINDS = ("watchdog", "unhealthy")
_STOP_CAUSES = frozenset(
    (
        "child_exited",
        "child_terminated",
        "operator_action",
        "reached_max_restart_intensity",
        "auto_shutdown",
    )
)


class NotEnoughHistory(NannyError, ValueError):
    """The journal holds too few events of a child to fit it, or names no child asked for."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


# -- reading the journal --------------------------------------------------------------


@dataclass(frozen=True)
class JournalEvent:
    """One line of a journal, as much of it as the fit reads."""

    time: float
    who: str
    what: str
    reason: str = ""
    detail: str = ""

    @property
    def reason_kind(self) -> str:
        """The reason's first word: "watchdog", "unhealthy", "exit code 1" -> "exit code 1"."""
        return self.reason.split(":", 1)[0].strip()


@dataclass(frozen=True)
class Journal:
    """A journal's events in time order, and what reading it left out."""

    events: tuple[JournalEvent, ...]
    skipped: int = 0  # lines that are not events (bad JSON, too long, missing fields)
    truncated: bool = False  # more than MAX_LINES lines: the rest was not read

    @property
    def span(self) -> float:
        """Seconds from the first event to the last."""
        return self.events[-1].time - self.events[0].time if self.events else 0.0


def read_journal(lines: Iterable[str | bytes], *, max_lines: int = MAX_LINES) -> Journal:
    """The events of a journal's lines (several files' lines may be chained)."""
    events: list[JournalEvent] = []
    skipped = 0
    truncated = False
    for n, line in enumerate(lines):
        if n >= max_lines:
            truncated = True
            break
        if len(line) > MAX_LINE_BYTES:
            skipped += 1
            continue
        event = _event(line)
        if event is None:
            if line.strip():
                skipped += 1
            continue
        events.append(event)
    events.sort(key=lambda e: e.time)  # rotated files may be chained in any order
    return Journal(tuple(events), skipped, truncated)


def _event(line: str | bytes) -> JournalEvent | None:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested deep
        return None
    if not isinstance(data, dict):
        return None
    t, who, what = data.get("time"), data.get("who"), data.get("what")
    if isinstance(t, bool) or not isinstance(t, int | float):
        return None
    try:
        t = float(t)
    except OverflowError:  # an integer of 400 digits
        return None
    if not abs(t) <= MAX_TIME:  # NaN too
        return None
    if not isinstance(who, str) or not isinstance(what, str) or not who or len(who) > MAX_NAME:
        return None
    reason, detail = data.get("reason"), data.get("detail")
    return JournalEvent(
        t,
        who,
        what[:64],
        reason[:200] if isinstance(reason, str) else "",
        detail[:200] if isinstance(detail, str) else "",
    )


def shown(text: str) -> str:
    """A name from a journal made safe to print: control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# -- estimates ---------------------------------------------------------------------------


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


# -- the fit ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChildFit:
    """What the journal says of one worker: its rates, durations and fault models.

    `path` is below the root, as the simulator's faults are keyed ("pool/w1").
    """

    path: str
    starts: int
    crashes: Rate
    hangs: Rate
    start_failures: Proportion
    flaps: Proportion
    start_duration: Estimate | None
    stop_duration: Estimate | None
    weibull: WeibullFit | None
    probe_period: float | None  # of the spec's liveness probe, None without one
    normal_exits: int = 0

    @property
    def models(self) -> list[FaultModel]:
        """Every model that applies, as a combined list: the child's start and stop
        times and start failures on the first model only (a list's models each draw
        their own start failures)."""
        found: list[FaultModel] = []
        if self.crashes.events:
            reason = CRASH if self.crashes.events > self.normal_exits else _NORMAL
            found.append(Exponential(max(self.crashes.mean_time, SHORTEST), reason))
        if self.hangs.events:
            found.append(Hang(mean=max(self.hangs.mean_time, SHORTEST)))
        if self.flaps.hits:
            found.append(Flapping(probability=self.flaps.value))
        first = found[0] if found else Healthy()
        return [dataclasses.replace(first, **self._common()), *found[1:]]

    def _common(self) -> dict[str, Any]:
        return {
            "start_duration": self.start_duration.mean if self.start_duration else 0.0,
            "stop_duration": self.stop_duration.mean if self.stop_duration else 0.0,
            "start_failure_probability": self.start_failures.value,
        }

    def __str__(self) -> str:
        lines = [f"{shown(self.path)}: {self.starts} starts"]
        lines.append(f"  crashes       {self.crashes.format()}")
        if self.weibull is not None:
            w = self.weibull
            verdict = (
                f"a Weibull of shape {w.shape:.2f} fits better (LR {w.statistic:.1f} > 3.84)"
                if w.better
                else f"exponential fits (Weibull shape {w.shape:.2f}, LR {w.statistic:.1f} <= 3.84)"
            )
            lines.append(f"  distribution  {verdict}")
        lines.append(f"  hangs         {self.hangs.format()}")
        for name, estimate in (("start", self.start_duration), ("stop", self.stop_duration)):
            text = (
                "not seen"
                if estimate is None
                else (f"{estimate.format(unit=' s')} (n={estimate.n})")
            )
            lines.append(f"  {name + ' time':<13} {text}")
        lines.append(f"  start fails   {self.start_failures.format()}")
        if self.probe_period is not None or self.flaps.hits:
            lines.append(f"  probe flaps   {self.flaps.format()}")
        lines.append("  models        " + ", ".join(_model_text(m) for m in self.models))
        return "\n".join(lines)


_NORMAL = ExitReason.normal()


def _model_text(model: FaultModel) -> str:
    if isinstance(model, Exponential):
        return f"Exponential(mtbf={model.mtbf:.3g})"
    if isinstance(model, Hang):
        return f"Hang(mean={model.mean:.3g})"
    if isinstance(model, Flapping):
        return f"Flapping(probability={model.probability:.3g})"
    return type(model).__name__ + "()"


@dataclass(frozen=True)
class Fit:
    """A journal's fit: one `ChildFit` per worker, by path below the root."""

    children: dict[str, ChildFit]
    span: float  # seconds the journal covers
    root: str  # the root supervisor's id
    skipped: int = 0
    truncated: bool = False
    notes: tuple[str, ...] = field(default=())

    def faults(self) -> dict[str, FaultModel | list[FaultModel]]:
        """The simulator's `faults`: each worker's model, or its models combined when
        several apply (crashes, hangs, a flapping probe: supervision/simulate/_faults.py)."""
        return {
            path: models[0] if len(models) == 1 else models
            for path, models in ((p, c.models) for p, c in self.children.items())
        }

    def __getitem__(self, path: str) -> ChildFit:
        try:
            return self.children[path]
        except KeyError:
            known = ", ".join(shown(p) for p in self.children) or "none"
            raise NotEnoughHistory(
                f"the journal has no worker '{shown(path)}'; its workers: {known}"
            ) from None

    def __str__(self) -> str:
        head = f"journal of tree '{shown(self.root)}': {format_seconds(self.span)}"
        if self.skipped:
            head += f"; {self.skipped} lines that are not events skipped"
        if self.truncated:
            head += f"; only the first {MAX_LINES} lines read"
        return "\n".join([head, *self.notes, *(str(c) for c in self.children.values())])


@dataclass
class _Tally:
    starts: int = 0
    attempts_failed: int = 0
    up_since: float | None = None
    exposure: float = 0.0
    crashes: int = 0
    normal_exits: int = 0
    hangs: int = 0
    failing_since: float | None = None  # the first failing probe of the current streak
    streak: int = 0  # its failed attempts, where the journal has probe_failed events
    flaps: int = 0
    probed: float = 0.0
    runs: list[tuple[float, bool]] = field(default_factory=list)  # (length, ended by a crash)
    starts_took: list[float] = field(default_factory=list)
    stops_took: list[float] = field(default_factory=list)

    def close(self, now: float, *, crashed: bool = False, hung: bool = False) -> None:
        if self.up_since is None:
            return
        end = self.failing_since if hung and self.failing_since is not None else now
        length = max(0.0, end - self.up_since)
        self.exposure += length
        self.probed += length
        self.runs.append((length, crashed))
        self.up_since = None
        self.failing_since = None
        self.streak = 0


def fit(
    journal: Journal | Iterable[str | bytes],
    spec: SupervisorSpec | None = None,
    *,
    min_starts: int = MIN_EVENTS,
    children: Iterable[str] | None = None,
) -> Fit:
    """Fit each worker of a journal (a `Journal`, or its lines): see the module's text.

    `spec`, the tree's, gives the liveness probes' periods. `children` (paths below
    the root) picks the workers to fit; each must have `min_starts` starts, else
    `NotEnoughHistory` names it, with how many it has. Without `children`, workers
    with fewer starts are left out and said so in the fit's notes.
    """
    if not isinstance(journal, Journal):
        journal = read_journal(journal)
    events = journal.events
    supervisors = {e.who for e in events if e.what == "supervisor_started"}
    if not supervisors:
        raise NotEnoughHistory(
            "the journal has no supervisor_started event: is it a nannytree event log "
            "(nannytree run --event-log)?"
        )
    root = min(supervisors, key=lambda s: s.count("/")).split("/")[0]
    periods = _probe_periods(spec) if spec is not None else {}
    tallies: dict[str, _Tally] = {}
    last_by_supervisor: dict[str, JournalEvent] = {}
    end = events[-1].time
    for e in events:
        parent, _, _ = e.who.rpartition("/")
        if e.who in supervisors or not parent or e.who.split("/")[0] != root:
            if e.what == "supervisor_stopped":  # its workers are down from here
                for below, running in tallies.items():
                    if f"{root}/{below}".startswith(e.who + "/"):
                        running.close(e.time)
            # A child_* event about a nested supervisor is its parent's to report.
            by = parent if parent and e.what.startswith("child_") else e.who
            last_by_supervisor[by] = e
            continue
        path = e.who.split("/", 1)[1]
        t = tallies.setdefault(path, _Tally())
        before = last_by_supervisor.get(parent)
        if e.what == "child_started":
            t.close(e.time)  # an exit the journal missed (a dropped line)
            t.starts += 1
            t.up_since = e.time
            if before is not None and (
                before.what == "supervisor_started"
                or (before.who == e.who and before.what in ("child_exited", "start_failed"))
            ):
                t.starts_took.append(e.time - before.time)
        elif e.what == "child_exited":
            hung = e.reason_kind in _HANG_KINDS
            if hung:
                t.hangs += 1
            elif e.reason_kind == "normal":
                t.normal_exits += 1
            if not hung:
                t.crashes += 1
            t.close(e.time, crashed=not hung, hung=hung)
        elif e.what == "child_terminated":
            if before is not None and before.what in _STOP_CAUSES and before.who != e.who:
                t.stops_took.append(e.time - before.time)
            t.close(e.time)
        elif e.what == "start_failed":
            t.attempts_failed += 1
        elif e.what in ("child_unhealthy", "probe_failed"):
            if t.failing_since is None:
                t.failing_since = e.time
            t.streak += e.what == "probe_failed"
        elif e.what == "child_healthy" and t.failing_since is not None:
            t.flaps += max(1, t.streak)  # one a streak, where attempts are not reported
            t.failing_since, t.streak = None, 0
        last_by_supervisor[parent] = e
    for open_run in tallies.values():
        open_run.close(end)

    wanted = list(children) if children is not None else None
    notes: list[str] = []
    fitted: dict[str, ChildFit] = {}
    for path in wanted if wanted is not None else list(tallies):
        tally = tallies.get(path)
        if tally is None:
            known = ", ".join(shown(p) for p in tallies) or "none"
            raise NotEnoughHistory(
                f"the journal has no worker '{shown(path)}' (its workers: {known}); "
                "name a child by its path below the root, e.g. 'pool/w1'"
            )
        if tally.starts < min_starts:
            text = (
                f"worker '{shown(path)}' has {tally.starts} starts in the journal; the fit needs "
                f"at least {min_starts}: let the tree run longer, or lower min_starts"
            )
            if wanted is not None:
                raise NotEnoughHistory(text)
            notes.append(f"left out: {text}")
            continue
        fitted[path] = _child_fit(path, tally, periods.get(path))
    if not fitted and not notes:
        raise NotEnoughHistory("the journal names no worker: no child_started event")
    if not fitted:
        raise NotEnoughHistory("; ".join(n.removeprefix("left out: ") for n in notes))
    return Fit(fitted, journal.span, root, journal.skipped, journal.truncated, tuple(notes))


def _child_fit(path: str, t: _Tally, probe_period: float | None) -> ChildFit:
    period = probe_period if probe_period is not None else LIVENESS_PERIOD
    probes = int(t.probed / period) if (probe_period is not None or t.flaps) else 0
    runs = [(length, crashed) for length, crashed in t.runs if length > 0]  # 0: no news
    weibull = (
        fit_weibull([r for r, _ in runs], [c for _, c in runs])
        if sum(c for _, c in runs) >= 10
        else None
    )
    return ChildFit(
        path=path,
        starts=t.starts,
        crashes=Rate(t.crashes, t.exposure),
        hangs=Rate(t.hangs, t.exposure),
        start_failures=Proportion(t.attempts_failed, t.starts + t.attempts_failed),
        flaps=Proportion(t.flaps, max(probes, t.flaps)),
        start_duration=Estimate.of(t.starts_took),
        stop_duration=Estimate.of(t.stops_took),
        weibull=weibull,
        probe_period=probe_period,
        normal_exits=t.normal_exits,
    )


def _probe_periods(spec: SupervisorSpec, prefix: str = "") -> Mapping[str, float]:
    found: dict[str, float] = {}
    for child in spec.children:
        path = prefix + child.id
        if isinstance(child, SupervisorSpec):
            found.update(_probe_periods(child, path + "/"))
        elif isinstance(child, ChildSpec) and child.liveness is not None:
            found[path] = child.liveness.period
    return found
