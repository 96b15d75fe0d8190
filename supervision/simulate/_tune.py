"""Settings searched for an objective under constraints, on a tree's fitted history.

`tune(spec, fitted, objective="max availability(pool/web)", require=[...])` runs the
simulator on the fitted fault models (`_fit.fit`) at the current settings and at
the points of a grid of knobs (each supervisor's intensity and period; each failing
worker's backoff and restart_limit; each probed worker's liveness period and
failures), every point on the same seeds (common random numbers: differences
between points are the settings', not the draws'). The search is coordinate-wise:
one knob at a time over its values, keeping a change that improves, until a round
changes nothing. The recommendation is then replayed with the current settings on
fresh seeds, not used in the search (the held-out replay), paired seed by seed.

A point is feasible when the mean of each constraint's metric over the seeds meets
it. Feasible beats infeasible; two infeasible points compare by how far they miss
(relative to each bound); two feasible ones by the objective's mean.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import NannyError, SpecError
from ..spec._fields import Backoff
from ..spec._restart_limit import RestartLimit
from ..spec._spec import ChildSpec, SupervisorSpec
from ._faults import FaultEntry, FaultModel, Healthy
from ._fit import Fit
from ._journal import shown
from ._metrics import Kind, KOfN, Metric, kind_of, metric
from ._run import simulate
from ._stats import Estimate, paired

DEFAULT_SEARCH_SEEDS = range(20)
DEFAULT_HOLDOUT_SEEDS = range(100_000, 100_020)
"""Fresh seeds for the held-out replay: never among the search's by default."""
MIN_REPLAY = 600.0
MAX_REPLAY = 86_400.0
"""A replay lasts the history's span, within these bounds by default (seconds): a
short history replayed as is would weigh the first start more than a tree's life does."""
MAX_POINTS = 400
"""Points a search evaluates at most: a wider grid is refused, naming its size."""


class TuneError(NannyError, ValueError):
    """A tuning request that cannot be carried out: an unknown metric or child, a bad
    constraint or knob. The message names it and what is known."""


# -- metrics ---------------------------------------------------------------------------


def _metric(text: str, paths: Sequence[str]) -> Metric:
    """The built-in metric `text` names (`_metrics.metric`), its paths checked against
    the tree's (`paths`, below the root) before any run."""
    try:
        found = metric(text)
    except SpecError as e:
        raise TuneError(f"metric {text!r}: {e.expected}") from None
    named = found.paths() if isinstance(found, KOfN) else {getattr(found, "path", None) or ""}
    for path in sorted(named - {""}):
        if path not in paths:
            raise TuneError(
                f"metric {text!r} names no child of the tree: '{shown(path)}'; "
                f"its children: {', '.join(paths)}"
            )
    return found


@dataclass(frozen=True)
class Objective:
    """What to optimise: `metric` (its text), `maximise` or not."""

    text: str
    maximise: bool

    @classmethod
    def parse(cls, text: str) -> Objective:
        """ "max availability(web)", "min restarts" (also maximise/minimise)."""
        words = text.strip().split(None, 1)
        if len(words) == 2 and words[0] in ("max", "maximise", "maximize", "min", "minimise"):
            return cls(words[1], words[0].startswith("max"))
        if len(words) == 2 and words[0] == "minimize":
            return cls(words[1], False)
        raise TuneError(
            f"objective {text!r}: write 'max METRIC' or 'min METRIC', e.g. "
            "'max availability(web)' or 'min restarts'"
        )

    def __str__(self) -> str:
        return f"{'max' if self.maximise else 'min'} {self.text}"


@dataclass(frozen=True)
class Constraint:
    """`metric` (its text) `op` ("<=" or ">=") `bound`."""

    text: str
    op: str
    bound: float

    @classmethod
    def parse(cls, text: str) -> Constraint:
        """ "availability(web) >= 99.9%", "restarts <= 100", "give_ups <= 0"."""
        found = re.match(r"^\s*(.+?)\s*(<=|>=)\s*([-+0-9.eE]+)\s*(%?)\s*$", text)
        if found is None:
            raise TuneError(
                f"constraint {text!r}: write 'METRIC >= NUMBER' or 'METRIC <= NUMBER', "
                "e.g. 'availability(web) >= 99.9%'"
            )
        try:
            bound = float(found[3]) / (100 if found[4] else 1)
        except ValueError:
            raise TuneError(f"constraint {text!r}: {found[3]!r} is not a number") from None
        return cls(found[1], found[2], bound)

    def miss(self, value: float) -> float:
        """How far `value` misses the bound, relative to it (0: met; 1 when no run
        defines the metric, e.g. a time to give up in runs that never gave up)."""
        if math.isnan(value):
            return 1.0
        gap = self.bound - value if self.op == ">=" else value - self.bound
        return max(0.0, gap) / max(abs(self.bound), 1e-9)

    def __str__(self) -> str:
        return f"{self.text} {self.op} {self.bound:g}"


# -- knobs ---------------------------------------------------------------------------------

KNOB_FIELDS = ("intensity", "period", "backoff", "restart_limit", "liveness")


@dataclass(frozen=True)
class Knob:
    """A searchable setting: `field` of the supervisor or child at `path` (from the
    root's id, as the journal names it: "svc/pool/web"), and the `values` tried.
    `liveness` values are (probe period, failures) pairs."""

    path: str
    field: str
    values: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{self.path} {self.field}"


def default_knobs(spec: SupervisorSpec, faults: Mapping[str, FaultEntry]) -> list[Knob]:
    """A grid around the current values: each supervisor's intensity (x1/2 to x10) and
    period (x1/2, x2); each worker with a fault model: backoff (none, 0.1 s, 1 s) and
    restart_limit (none, 10 in 60 s); each worker with a liveness probe: its period
    (x1/2, x2) by failures (1, 2, 3, 5)."""
    knobs: list[Knob] = []
    failing = {p for p, m in faults.items() if not _healthy(m)}
    for path, node, below in _walk(spec):
        if isinstance(node, SupervisorSpec):
            i, p = node.intensity, node.period
            more = [max(1, i // 2), 2 * i, 5 * i, 10 * i]
            knobs.append(Knob(path, "intensity", _around(i, more)))
            knobs.append(Knob(path, "period", _around(p, [p / 2, 2 * p])))
            continue
        if below in failing:
            knobs.append(
                Knob(
                    path,
                    "backoff",
                    _around(node.backoff, [None, Backoff(0.1, max=1.0), Backoff(1.0, max=10.0)]),
                )
            )
            limits = [None, RestartLimit(10, 60.0)]
            knobs.append(Knob(path, "restart_limit", _around(node.restart_limit, limits)))
        if node.liveness is not None:
            period, failures = node.liveness.period, node.liveness.failures
            pairs = [(pp, f) for pp in (period / 2, period, 2 * period) for f in (1, 2, 3, 5)]
            knobs.append(Knob(path, "liveness", _around((period, failures), pairs)))
    return knobs


def _healthy(entry: FaultEntry) -> bool:
    models = [entry] if isinstance(entry, FaultModel) else entry
    return all(isinstance(m, Healthy) for m in models)


def _around(current: Any, others: Iterable[Any]) -> tuple[Any, ...]:
    values = [current]
    for v in others:
        if v not in values:
            values.append(v)
    return tuple(values)


def _walk(
    spec: SupervisorSpec, prefix: str = "", below: str = ""
) -> Iterable[tuple[str, ChildSpec | SupervisorSpec, str]]:
    """(path from the root's id, node, path below the root) of every node."""
    path = prefix + spec.id
    yield path, spec, below.rstrip("/")
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            yield from _walk(child, path + "/", below + child.id + "/")
        else:
            yield f"{path}/{child.id}", child, below + child.id


def apply(spec: SupervisorSpec, settings: Mapping[tuple[str, str], Any]) -> SupervisorSpec:
    """`spec` with each (path, field) set to its value (specs are checked anew)."""
    return _apply(spec, spec.id, settings)


def _apply(
    node: SupervisorSpec, path: str, settings: Mapping[tuple[str, str], Any]
) -> SupervisorSpec:
    children = [
        _apply(c, f"{path}/{c.id}", settings)
        if isinstance(c, SupervisorSpec)
        else _set(c, f"{path}/{c.id}", settings)
        for c in node.children
    ]
    changes = {f: v for (p, f), v in settings.items() if p == path}
    return dataclasses.replace(node, children=children, **changes)


def _set(child: ChildSpec, path: str, settings: Mapping[tuple[str, str], Any]) -> ChildSpec:
    changes: dict[str, Any] = {}
    for (p, f), v in settings.items():
        if p != path:
            continue
        if f == "liveness":
            assert child.liveness is not None
            period, failures = v
            probe = dataclasses.replace(child.liveness.probe, period=period)
            changes[f] = dataclasses.replace(child.liveness, probe=probe, failures=failures)
        else:
            changes[f] = v
    return dataclasses.replace(child, **changes) if changes else child


def _value_text(field: str, value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, Backoff):
        return f"{value.initial:g} s x{value.factor:g} up to {value.max:g} s"
    if isinstance(value, RestartLimit):
        return f"{value.intensity} in {value.period:g} s"
    if field == "liveness":
        return f"every {value[0]:g} s, {value[1]} failures"
    return f"{value:g}" if isinstance(value, float) else str(value)


# -- the search ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """Settings and their figures over seeds: the objective's and each constraint's."""

    settings: tuple[tuple[tuple[str, str], Any], ...]  # ((path, field), value), knob order
    objective: tuple[float | None, ...]  # per seed; None: not defined in that run
    constraints: tuple[tuple[float | None, ...], ...]  # per constraint, per seed
    kinds: tuple[Kind, ...] = ()  # the objective's interval's, then each constraint's

    def estimate(self) -> Estimate | None:
        """The objective's mean over the runs that define it, with its 95% interval."""
        return _estimate(self.objective, self.kinds[0] if self.kinds else "value")

    def constraint_estimates(self) -> list[Estimate | None]:
        value: tuple[Kind, ...] = ("value",)
        kinds = self.kinds[1:] or value * len(self.constraints)
        return [_estimate(v, k) for v, k in zip(self.constraints, kinds, strict=True)]


def _estimate(values: Sequence[float | None], kind: Kind) -> Estimate | None:
    return Estimate.of([v for v in values if v is not None], kind)


def _mean(values: Sequence[float | None]) -> float:
    """The mean over the runs that define it; nan when none does."""
    defined = [v for v in values if v is not None]
    return math.fsum(defined) / len(defined) if defined else math.nan


@dataclass(frozen=True)
class Tuning:
    """A search's outcome: the `current` and `recommended` points on the search's
    seeds, both replayed on the held-out seeds (`holdout_current`,
    `holdout_recommended`), and the paired difference of the objective there
    (recommended - current, per seed) with its 95% interval."""

    objective: Objective
    constraints: tuple[Constraint, ...]
    knobs: tuple[Knob, ...]
    duration: float
    current: Point
    recommended: Point
    holdout_current: Point
    holdout_recommended: Point
    difference: Estimate | None  # None: no held-out run defines the objective in both
    evaluated: int  # points the search ran

    @property
    def changes(self) -> dict[tuple[str, str], tuple[Any, Any]]:
        """(path, field) -> (current, recommended) of each setting that changed."""
        now = dict(self.current.settings)
        return {k: (now[k], v) for k, v in self.recommended.settings if now[k] != v}

    def feasible(self, point: Point) -> bool:
        return all(c.miss(m) == 0 for c, m in zip(self.constraints, _means(point), strict=True))

    @property
    def beats(self) -> bool:
        """On the held-out replay: the recommendation meets the constraints, and either
        the current settings do not, or its objective is better (the paired 95%
        interval excludes 0)."""
        if not self.feasible(self.holdout_recommended):
            return False
        if not self.feasible(self.holdout_current):
            return True
        d = self.difference
        return d is not None and (d.low > 0 if self.objective.maximise else d.high < 0)

    def __str__(self) -> str:
        lines = [
            f"objective: {self.objective}"
            + (f"; require {', '.join(map(str, self.constraints))}" if self.constraints else ""),
            f"searched {self.evaluated} points over {len(self.current.objective)} seeds, "
            f"{self.duration:g} s each; "
            f"held out: {len(self.holdout_current.objective)} fresh seeds",
            "",
        ]
        changes = self.changes
        if not changes:
            lines.append("recommended: keep the current settings")
        else:
            lines.append("recommended settings:")
            for (path, field), (old, new) in changes.items():
                lines.append(
                    f"  {path} {field}: {_value_text(field, old)} -> {_value_text(field, new)}"
                )
        lines.append("")
        lines.append(f"{'held-out replay':<32} {'current':>22} {'recommended':>22}")
        rows = [
            (
                str(self.objective.text),
                self.holdout_current.estimate(),
                self.holdout_recommended.estimate(),
            )
        ]
        rows += [
            (str(c), a, b)
            for c, a, b in zip(
                self.constraints,
                self.holdout_current.constraint_estimates(),
                self.holdout_recommended.constraint_estimates(),
                strict=True,
            )
        ]
        for name, a, b in rows:
            lines.append(f"{name:<32} {_shown(a):>22} {_shown(b):>22}")
        lines.append(f"paired difference (recommended - current): {_shown(self.difference)}")
        met = {True: "met", False: "not met"}
        lines.append(
            f"constraints: current {met[self.feasible(self.holdout_current)]}, "
            f"recommended {met[self.feasible(self.holdout_recommended)]}; "
            + (
                "the recommendation beats the current settings"
                if self.beats
                else "the recommendation does not beat the current settings"
            )
        )
        return "\n".join(lines)


def _means(point: Point) -> list[float]:
    return [_mean(v) for v in point.constraints]


def _shown(estimate: Estimate | None) -> str:
    return "not defined" if estimate is None else estimate.format()


def tune(
    spec: SupervisorSpec,
    fitted: Fit | Mapping[str, FaultEntry],
    *,
    objective: str | Objective,
    require: Iterable[str | Constraint] = (),
    knobs: Sequence[Knob] | None = None,
    duration: float | None = None,
    seeds: Iterable[int] = DEFAULT_SEARCH_SEEDS,
    holdout: Iterable[int] = DEFAULT_HOLDOUT_SEEDS,
    root_restart_delay: float | None = None,
    max_points: int = MAX_POINTS,
) -> Tuning:
    """Search `knobs` (default: `default_knobs`) for `objective` under `require`.

    `fitted` is a `Fit` (its fault models; its span the default `duration`, within
    MIN_REPLAY and MAX_REPLAY) or the simulator's faults. Every point runs on `seeds`;
    the recommendation and the current settings run again on `holdout`, which must not
    share a seed with them.
    `root_restart_delay` as `simulate()`'s (None: a root's give-up ends the run).
    """
    faults = fitted.faults() if isinstance(fitted, Fit) else dict(fitted)
    if duration is None:
        if not isinstance(fitted, Fit):
            raise TuneError("give duration= (seconds to simulate): faults carry no history")
        duration = min(max(fitted.span, MIN_REPLAY), MAX_REPLAY)
    if not duration > 0:
        raise TuneError(f"duration is {duration!r}; expected seconds > 0 (a longer history)")
    goal = objective if isinstance(objective, Objective) else Objective.parse(objective)
    bounds = tuple(c if isinstance(c, Constraint) else Constraint.parse(c) for c in require)
    paths = [below for _, _, below in _walk(spec) if below]
    for path in faults:
        if path not in paths:
            raise TuneError(
                f"the history names child '{shown(path)}', which the tree has not; "
                f"its children: {', '.join(paths)}"
            )
    score = _metric(goal.text, paths)
    checks = [_metric(c.text, paths) for c in bounds]
    kinds = tuple(kind_of(m) for m in (score, *checks))
    grid = tuple(knobs) if knobs is not None else tuple(default_knobs(spec, faults))
    _check_knobs(spec, grid)
    search, fresh = list(seeds), list(holdout)
    if not search or not fresh:
        raise TuneError("seeds and holdout need a seed each at least")
    if set(search) & set(fresh):
        raise TuneError("the held-out seeds must differ from the search's: pass other holdout=")
    budget = sum(len(k.values) for k in grid) * 3 + 1
    if budget > max_points:
        raise TuneError(
            f"the grid could take {budget} points (knob values x 3 rounds); the bound is "
            f"{max_points}: pass fewer knobs= or values, or a larger max_points="
        )

    def run(settings: tuple[tuple[tuple[str, str], Any], ...], on: list[int]) -> Point:
        point_spec = apply(spec, dict(settings))
        results = [
            simulate(
                point_spec,
                faults,
                duration=duration,
                seed=s,
                root_restart_delay=root_restart_delay,
                keep_events=False,
            )
            for s in on
        ]
        try:
            return Point(
                settings,
                tuple(score(r) for r in results),
                tuple(tuple(check(r) for r in results) for check in checks),
                kinds,
            )
        except SpecError as e:  # a path of the wrong sort (a worker's give_ups)
            raise TuneError(f"{e.value}: {e.expected}") from None

    def rank(p: Point) -> tuple[float, float]:
        miss = sum(c.miss(m) for c, m in zip(bounds, _means(p), strict=True))
        mean = _mean(p.objective)
        if math.isnan(mean):
            mean = -math.inf if goal.maximise else math.inf
        return (-miss, mean if goal.maximise else -mean)

    nodes = {path: node for path, node, _ in _walk(spec)}
    current_settings = tuple(((k.path, k.field), _current(nodes[k.path], k.field)) for k in grid)
    best = current = run(current_settings, search)
    seen = {current_settings}
    for _ in range(3):
        improved = False
        for i, knob in enumerate(grid):
            for value in knob.values:
                trial = tuple(
                    (key, value if j == i else v) for j, (key, v) in enumerate(best.settings)
                )
                if trial in seen:
                    continue
                seen.add(trial)
                point = run(trial, search)
                if rank(point) > rank(best):
                    best, improved = point, True
        if not improved:
            break
    held_current = run(current_settings, fresh)
    held_best = run(best.settings, fresh)
    difference = paired(held_best.objective, held_current.objective, kinds[0])
    return Tuning(
        goal, bounds, grid, duration, current, best, held_current, held_best, difference, len(seen)
    )


def _current(node: ChildSpec | SupervisorSpec, field: str) -> Any:
    if field == "liveness":
        assert isinstance(node, ChildSpec) and node.liveness is not None
        return (node.liveness.period, node.liveness.failures)
    value = getattr(node, field)
    if field == "restart_limit" and isinstance(value, tuple):
        return RestartLimit(*value)
    return value


def _check_knobs(spec: SupervisorSpec, knobs: Sequence[Knob]) -> None:
    nodes = {path: node for path, node, _ in _walk(spec)}
    for knob in knobs:
        node = nodes.get(knob.path)
        if node is None:
            raise TuneError(
                f"knob {knob}: the tree has no '{shown(knob.path)}'; its paths: {', '.join(nodes)}"
            )
        allowed = (
            ("intensity", "period")
            if isinstance(node, SupervisorSpec)
            else ("backoff", "restart_limit", "liveness")
        )
        if knob.field not in allowed:
            raise TuneError(
                f"knob {knob}: {knob.path!r} has no searchable {knob.field!r}; "
                f"its knobs: {', '.join(allowed)}"
            )
        if knob.field == "liveness" and (not isinstance(node, ChildSpec) or node.liveness is None):
            raise TuneError(f"knob {knob}: {knob.path!r} has no liveness probe to tune")
        if not knob.values:
            raise TuneError(f"knob {knob}: give at least one value (the first is the current)")
