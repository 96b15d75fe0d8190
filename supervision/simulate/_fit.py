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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import NannyError
from .._reasons import ExitReason
from ..spec._probes import LIVENESS_PERIOD
from ..spec._spec import ChildSpec, SupervisorSpec
from ._faults import CRASH, Exponential, FaultModel, Flapping, Hang, Healthy
from ._journal import MAX_LINES, Journal, JournalEvent, read_journal, shown
from ._rates import Proportion, Rate, WeibullFit, fit_weibull
from ._report import format_seconds
from ._stats import Estimate

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
