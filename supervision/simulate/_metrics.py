"""Metrics: named figures over one run's `SimulationResult`, built in or the user's own.

A metric is anything that maps a run to a float, or to None when the figure is not
defined in that run (no hang happened, the tree never gave up). The built-ins are
small frozen records (picklable, so a sweep's process pool can send them), each
with a `kind` that says which interval fits it (`_stats.Estimate.of`):
"fraction" (stays in [0, 1]), "count" (never below 0), "time" (seconds: a
bootstrap interval, never below 0) or "value" (anything: Student's t). A plain
function `SimulationResult -> float | None` is a metric of kind "value"; give it
another kind, or ask for the run's events, with `custom(fn, kind=..., events=True)`.

`metric(text)` reads one from text ("availability(web)", "k_of_n(1, web/a, web/b)"),
for the command line and for tables; `str(m)` of a built-in is that text again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeAlias

from .._errors import SpecError
from ._report import SimulationResult

Kind = Literal["fraction", "count", "time", "value"]
KINDS: tuple[Kind, ...] = ("fraction", "count", "time", "value")


class Metric:
    """A built-in metric: `m(result)` is its figure in that run (None: not defined).

    `kind` chooses its interval; `needs_events` asks a sweep to keep the run's
    events for it (they are dropped otherwise, to keep runs fast).
    """

    kind: ClassVar[Kind] = "value"
    needs_events: ClassVar[bool] = False

    def __call__(self, result: SimulationResult) -> float | None:
        raise NotImplementedError


MetricLike: TypeAlias = Metric | Callable[[SimulationResult], float | None]
"""What `metrics=` takes as a value: a metric, a plain function of a run, or its text."""


# -- up and down over time ------------------------------------------------------------


def _child(result: SimulationResult, path: str, what: str) -> None:
    if path not in result.states:
        known = ", ".join(sorted(result.states)) or "none"
        raise SpecError(
            None,
            "metric",
            f"{what}({path})",
            f"{path!r} is no child of this tree; its paths: {known}",
        )


@dataclass(frozen=True)
class Availability(Metric):
    """The share of the run a child (or supervisor, by path) was up; the tree's without."""

    path: str | None = None
    kind: ClassVar[Kind] = "fraction"

    def __call__(self, result: SimulationResult) -> float:
        if self.path is None:
            return result.tree.availability
        _child(result, self.path, "availability")
        return result.children[self.path].availability

    def __str__(self) -> str:
        return "availability" if self.path is None else f"availability({self.path})"


@dataclass(frozen=True)
class KOfN(Metric):
    """The share of the run in which at least `k` of `members` were up.

    A member is a child's path (up: its state is "up"; a finished or hung child
    is not up) or another KOfN (up while it holds), so "db up and at least one
    of three workers up" is `KOfN(2, ("db", KOfN(1, ("web/a", "web/b", "web/c"))))`.
    """

    k: int
    members: tuple[str | KOfN, ...]
    kind: ClassVar[Kind] = "fraction"

    def __post_init__(self) -> None:
        if not self.members:
            raise SpecError(None, "metric", str(self), "k_of_n needs at least one member")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise SpecError(None, "metric", str(self), "k_of_n's k is a whole number >= 0")
        if self.k > len(self.members):
            raise SpecError(
                None,
                "metrics",
                str(self),
                f"k_of_n's k ({self.k}) exceeds its {len(self.members)} members",
            )

    def paths(self) -> set[str]:
        out: set[str] = set()
        for m in self.members:
            out |= m.paths() if isinstance(m, KOfN) else {m}
        return out

    def holds(self, up: Mapping[str, bool]) -> bool:
        count = sum(1 for m in self.members if (m.holds(up) if isinstance(m, KOfN) else up[m]))
        return count >= self.k

    def __call__(self, result: SimulationResult) -> float:
        paths = self.paths()
        for p in sorted(paths):
            _child(result, p, "k_of_n")
        # One sweep over every change of the members, in time order (stable: a
        # child's changes at one time keep their order).
        changes = sorted(
            ((when, p, state) for p in paths for when, state in result.states[p]),
            key=lambda c: c[0],
        )
        up = dict.fromkeys(paths, False)
        duration = result.duration
        total, since, holding = 0.0, 0.0, self.holds(up)
        for when, path, state in changes:
            up[path] = state == "up"
            now_holds = self.holds(up)
            if now_holds != holding:
                if holding:
                    total += min(when, duration) - since
                since, holding = when, now_holds
        if holding:
            total += duration - since
        return min(1.0, max(0.0, total / duration)) if duration > 0 else 1.0

    def __str__(self) -> str:
        return f"k_of_n({self.k}, {', '.join(str(m) for m in self.members)})"


@dataclass(frozen=True)
class DowntimePerIncident(Metric):
    """The mean length in seconds of a child's down periods after its first start.

    An incident runs from the child's leaving "up" (an exit, a stop, a hang) to
    its next "up"; one still open at the end of the run counts up to `duration`.
    The wait for the first start is no incident; None when there was none.
    """

    path: str
    kind: ClassVar[Kind] = "time"

    def __call__(self, result: SimulationResult) -> float | None:
        _child(result, self.path, "downtime_per_incident")
        lengths: list[float] = []
        started, since = False, None
        for when, state in result.states[self.path]:
            if state == "up":
                if since is not None:
                    lengths.append(when - since)
                started, since = True, None
            elif state == "done":  # it finished: no incident
                since = None
            elif started and since is None:
                since = when
        if since is not None:
            lengths.append(result.duration - since)
        return math.fsum(lengths) / len(lengths) if lengths else None

    def __str__(self) -> str:
        return f"downtime_per_incident({self.path})"


@dataclass(frozen=True)
class TimeToDetect(Metric):
    """The mean time in seconds from a child's hang to its being stopped (its next
    "down": its liveness probe or watchdog decided); None when it never hung and
    was stopped."""

    path: str
    kind: ClassVar[Kind] = "time"

    def __call__(self, result: SimulationResult) -> float | None:
        _child(result, self.path, "time_to_detect")
        changes = result.states[self.path]
        times: list[float] = []
        for i, (when, state) in enumerate(changes):
            if state != "hung":
                continue
            after = next((c for c in changes[i + 1 :] if c[1] != "hung"), None)
            if after is not None and after[1] == "down":
                times.append(after[0] - when)
        return math.fsum(times) / len(times) if times else None

    def __str__(self) -> str:
        return f"time_to_detect({self.path})"


# -- counts from the reports ----------------------------------------------------------


def _supervisor(result: SimulationResult, path: str, what: str) -> None:
    if path and path not in result.tree.supervisor_give_ups:
        known = ", ".join(repr(p) for p in sorted(result.tree.supervisor_give_ups) if p)
        raise SpecError(
            None,
            "metric",
            f"{what}({path})",
            f"{path!r} is no supervisor of this tree; its nested supervisors: {known or 'none'}"
            " (no path: the root)",
        )


@dataclass(frozen=True)
class Restarts(Metric):
    """Automatic restarts in the run: of every worker, or of one child by path."""

    path: str | None = None
    kind: ClassVar[Kind] = "count"

    def __call__(self, result: SimulationResult) -> float:
        if self.path is None:
            return float(result.tree.restarts)
        _child(result, self.path, "restarts")
        return float(result.children[self.path].restarts)

    def __str__(self) -> str:
        return "restarts" if self.path is None else f"restarts({self.path})"


@dataclass(frozen=True)
class GiveUps(Metric):
    """The times a supervisor gave up in the run (restart intensity reached, a failed
    start, auto-shutdown): the root's without a path, a nested one's by its path."""

    path: str | None = None
    kind: ClassVar[Kind] = "count"

    def __call__(self, result: SimulationResult) -> float:
        if not self.path:
            return float(result.tree.give_ups)
        _supervisor(result, self.path, "give_ups")
        return float(result.tree.supervisor_give_ups[self.path])

    def __str__(self) -> str:
        return "give_ups" if not self.path else f"give_ups({self.path})"


@dataclass(frozen=True)
class TimeToGiveUp(Metric):
    """The virtual time of the root's first give-up; None when it never gave up."""

    kind: ClassVar[Kind] = "time"

    def __call__(self, result: SimulationResult) -> float | None:
        return result.tree.time_to_give_up

    def __str__(self) -> str:
        return "time_to_give_up"


@dataclass(frozen=True)
class Unhealthy(Metric):
    """Liveness stops (exits with reason unhealthy): of every worker, or of one child."""

    path: str | None = None
    kind: ClassVar[Kind] = "count"

    def __call__(self, result: SimulationResult) -> float:
        if self.path is None:
            return float(result.tree.unhealthy)
        _child(result, self.path, "unhealthy")
        return float(result.children[self.path].unhealthy)

    def __str__(self) -> str:
        return "unhealthy" if self.path is None else f"unhealthy({self.path})"


@dataclass(frozen=True)
class Custom(Metric):
    """A function of a run as a metric, with the `kind` of its interval, and whether
    it reads `result.events` (`events=True`: a sweep keeps them for it). The
    function must be defined at module level to cross a process pool."""

    fn: Callable[[SimulationResult], float | None]
    metric_kind: Kind = "value"
    events: bool = False

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise SpecError(None, "metrics", self.fn, "custom() takes a function of a run")
        if self.metric_kind not in KINDS:
            raise SpecError(None, "kind", self.metric_kind, f"expected one of {KINDS}")

    def __call__(self, result: SimulationResult) -> float | None:
        return self.fn(result)

    def __str__(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))


def custom(
    fn: Callable[[SimulationResult], float | None], *, kind: Kind = "value", events: bool = False
) -> Custom:
    """`fn` as a metric whose interval fits `kind`; `events=True` if it reads the events."""
    return Custom(fn, kind, events)


DEFAULT_METRICS: dict[str, Metric] = {
    "availability": Availability(),
    "restarts": Restarts(),
    "give_ups": GiveUps(),
    "time_to_give_up": TimeToGiveUp(),
    "unhealthy": Unhealthy(),
}
"""The figures every sweep and comparison keeps, by name."""


def kind_of(m: MetricLike) -> Kind:
    """The kind of a metric's interval: a Custom's, a built-in's, "value" for a function."""
    if isinstance(m, Custom):
        return m.metric_kind
    return m.kind if isinstance(m, Metric) else "value"


def needs_events(m: MetricLike) -> bool:
    """Whether a metric reads the run's events (a sweep then keeps them)."""
    if isinstance(m, Custom):
        return m.events
    return bool(getattr(m, "needs_events", False))


# -- text -------------------------------------------------------------------------------

_BUILTINS = {
    "availability": "availability, availability(PATH): the tree's, or a child's share up",
    "k_of_n": "k_of_n(K, PATH, ...): share of the run with at least K of them up "
    "(a member may be a k_of_n itself)",
    "all_of": "all_of(PATH, ...): share with every one up",
    "any_of": "any_of(PATH, ...): share with at least one up",
    "restarts": "restarts, restarts(PATH): automatic restarts, of the workers or a child",
    "give_ups": "give_ups, give_ups(PATH): the root's give-ups, or a nested supervisor's",
    "time_to_give_up": "time_to_give_up: the root's first give-up (s)",
    "unhealthy": "unhealthy, unhealthy(PATH): liveness stops",
    "downtime_per_incident": "downtime_per_incident(PATH): mean length of its down periods (s)",
    "time_to_detect": "time_to_detect(PATH): mean time from a hang to its stop (s)",
}
BUILTIN_METRICS = tuple(_BUILTINS)
"""The names `metric()` reads."""

_TOKEN = re.compile(r"\s*(?:([(),])|([^\s(),]+))")


def _refuse(text: str, why: str) -> SpecError:
    listing = "; ".join(_BUILTINS.values())
    return SpecError(None, "metric", text, f"{why}. The metrics: {listing}")


def metric(text: str) -> Metric:
    """The built-in metric that `text` names, e.g. "availability(web)",
    "k_of_n(1, web/a, web/b, web/c)", "all_of(db, any_of(web/a, web/b))".

    A bad text raises SpecError naming it and listing the built-ins.
    """
    if not isinstance(text, str):
        raise _refuse(repr(text), "expected a metric's text")
    tokens: list[str] = []
    pos = 0
    stripped = text.strip()
    while pos < len(stripped):
        match = _TOKEN.match(stripped, pos)
        if match is None or match.end() == pos:
            raise _refuse(text, f"cannot read it at {stripped[pos:]!r}")
        tokens.append(match.group(1) or match.group(2))
        pos = match.end()
    if not tokens:
        raise _refuse(text, "it is empty")
    parsed, rest = _parse(text, tokens)
    if rest:
        raise _refuse(text, f"unexpected {' '.join(rest)!r} after {parsed}")
    if isinstance(parsed, str):
        return _call(text, parsed, [])
    return parsed


def _parse(text: str, tokens: list[str]) -> tuple[Metric | str, list[str]]:
    """One term: a name (a path or a metric without arguments) or name(args)."""
    head, rest = tokens[0], tokens[1:]
    if head in "(),":
        raise _refuse(text, f"expected a name, found {head!r}")
    if not rest or rest[0] != "(":
        return head, rest
    rest = rest[1:]
    args: list[Metric | str] = []
    while True:
        if not rest:
            raise _refuse(text, f"{head}( is not closed")
        if rest[0] == ")" and not args:
            rest = rest[1:]
            break
        arg, rest = _parse(text, rest)
        args.append(arg)
        if rest and rest[0] == ",":
            rest = rest[1:]
            continue
        if rest and rest[0] == ")":
            rest = rest[1:]
            break
        raise _refuse(text, f"expected ',' or ')' after {arg} in {head}(...)")
    return _call(text, head, args), rest


def _call(text: str, name: str, args: list[Metric | str]) -> Metric:
    if name not in _BUILTINS:
        raise _refuse(text, f"{name!r} is no metric")
    if name in ("k_of_n", "all_of", "any_of"):
        if name == "k_of_n":
            if not args or not isinstance(args[0], str) or not args[0].isdigit():
                raise _refuse(text, "k_of_n's first argument is K, a whole number")
            k, members = int(args[0]), args[1:]
        else:
            members = args
            k = len(members) if name == "all_of" else min(1, len(members))
        out: list[str | KOfN] = []
        for m in members:
            if isinstance(m, KOfN | str):
                out.append(m)
            else:
                raise _refuse(text, f"{m} is no member of {name}: give paths or k_of_n terms")
        return KOfN(k, tuple(out))
    paths = [a for a in args if isinstance(a, str)]
    if len(paths) != len(args) or len(args) > 1:
        raise _refuse(text, f"{name} takes at most one path")
    path = paths[0] if paths else None
    if name in ("time_to_give_up",) and path is not None:
        raise _refuse(text, f"{name} takes no path")
    if name in ("downtime_per_incident", "time_to_detect") and path is None:
        raise _refuse(text, f"{name} needs a child's path, e.g. {name}(db)")
    made: dict[str, Callable[[], Metric]] = {
        "availability": lambda: Availability(path),
        "restarts": lambda: Restarts(path),
        "give_ups": lambda: GiveUps(path),
        "time_to_give_up": TimeToGiveUp,
        "unhealthy": lambda: Unhealthy(path),
        "downtime_per_incident": lambda: DowntimePerIncident(path or ""),
        "time_to_detect": lambda: TimeToDetect(path or ""),
    }
    return made[name]()


# -- many metrics over runs -------------------------------------------------------------


def check_metrics(metrics: Mapping[str, MetricLike | str] | None) -> dict[str, MetricLike]:
    """The user's `metrics=` checked: names are text, values metrics, functions or text
    (read by `metric`); a default figure's name is refused (it is kept anyway)."""
    if metrics is None:
        return {}
    if not isinstance(metrics, Mapping):
        raise SpecError(
            None,
            "metrics",
            metrics,
            'expected a dict of name: metric, e.g. {"web": metric("availability(web)")}',
        )
    out: dict[str, MetricLike] = {}
    for name, m in metrics.items():
        if not isinstance(name, str) or not name:
            raise SpecError(None, "metrics", name, "a metric's name is non-empty text")
        if name in DEFAULT_METRICS:
            raise SpecError(
                None,
                "metrics",
                name,
                f"{name!r} is a figure every run keeps ({', '.join(DEFAULT_METRICS)});"
                " give yours another name",
            )
        if isinstance(m, str):
            m = metric(m)
        if not callable(m):
            raise SpecError(
                None, "metrics", {name: m}, "expected a metric, a function of a run, or its text"
            )
        out[name] = m
    return out


def measure(metrics: Mapping[str, MetricLike], result: SimulationResult) -> dict[str, float | None]:
    """Each metric's figure in `result`, checked to be a number or None."""
    out: dict[str, float | None] = {}
    for name, m in metrics.items():
        value = m(result)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecError(
                    None,
                    "metrics",
                    name,
                    f"its function returned {value!r}; a metric returns a float or None",
                )
            value = float(value)
            if math.isnan(value):
                raise SpecError(None, "metrics", name, "its function returned nan; return None")
        out[name] = value
    return out


def all_metrics(metrics: Mapping[str, MetricLike]) -> dict[str, MetricLike]:
    """The default figures, then the user's."""
    return {**DEFAULT_METRICS, **metrics}
