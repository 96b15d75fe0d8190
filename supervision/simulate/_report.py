"""What a simulation reports: per child, for the tree, and the run's events.

Definitions (the same for every report):
- A worker is *up* from the moment its start succeeds until its process exits
  by itself, stops answering (a hang), or its supervisor or its liveness probe
  begins to stop it. A nested supervisor is up from the moment its parent
  records it started until it stops.
- A child's availability is its uptime over the run's `duration`.
- The tree is up while its root supervisor runs and every worker of the spec
  is up or *finished*: a transient or temporary worker that ended normally and
  is not restarted is finished, not down. Tree availability is the tree's
  uptime over `duration`.
- After the tree gives up (and is not restarted), everything is down until
  `duration`: downtime includes the rest of the run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from .._events import SIMULATED_ONLY, Event, EventKind
from .._frozen import build
from .._reasons import ExitKind, ExitReason
from ..spec._spec import SupervisorSpec
from ._ops import CallResult

ChildType = Literal["worker", "supervisor"]
State = Literal["down", "up", "hung", "done"]
"""A child's state in a run's record: `hung` is alive but not answering (down for
availability, drawn apart); `done` a worker that ended normally for good."""
_DOWN: frozenset[State] = frozenset(("down", "hung"))
# Read per event, bound once: an enum class's member costs several times a global on 3.11.
_GAVE_UP = EventKind.MAX_INTENSITY_REACHED
_AUTO_SHUTDOWN, _SUPERVISOR_STOPPED = EventKind.AUTO_SHUTDOWN, EventKind.SUPERVISOR_STOPPED
_STARTED, _EXITED = EventKind.CHILD_STARTED, EventKind.CHILD_EXITED
_UNHEALTHY = ExitKind.UNHEALTHY
_NORMAL = (ExitKind.NORMAL, ExitKind.SHUTDOWN)  # ExitReason.is_normal's kinds, bound once


@dataclass(frozen=True)
class ChildReport:
    """One child's figures over a run. `path` is relative to the root ("pool/w1").

    `starts` counts successful starts, `restarts` those that were automatic
    restarts, `exits` the exits by itself, `failures` the abnormal ones among
    them, `start_failures` the failed start attempts and `terminations` the
    times its supervisor stopped it; `unhealthy` counts its exits with reason
    unhealthy (stopped by its liveness probe; also in `exits` and `failures`);
    `failed` the times its restart_limit left it failed (docs/otp-semantics.md
    section 4.1), or its first start did with required=False (section 16).
    `give_ups` (a supervisor's) counts the times it stopped by itself: restart
    intensity reached, a failed start, or auto-shutdown (0 for a worker).
    """

    path: str
    type: ChildType
    uptime: float
    downtime: float
    availability: float
    starts: int
    restarts: int
    exits: int
    failures: int
    start_failures: int
    terminations: int
    unhealthy: int = 0
    failed: int = 0
    give_ups: int = 0


@dataclass(frozen=True)
class TreeReport:
    """The whole tree's figures over a run.

    `give_ups` counts the times the root supervisor stopped by itself (restart
    intensity reached, a failed start, or auto-shutdown); `time_to_give_up` is
    the virtual time of the first, None if it never did; `root_exits` lists
    each (time, reason). `intensity_reached` counts every supervisor's
    reached_max_restart_intensity, nested ones included. `restarts`,
    `failures`, `start_failures` and `unhealthy` are summed over the workers.
    `supervisor_give_ups` counts every supervisor's give-ups by its path: "" the
    root (the same as `give_ups`), "pool" a nested one.
    """

    duration: float
    uptime: float
    downtime: float
    availability: float
    restarts: int
    failures: int
    start_failures: int
    give_ups: int
    time_to_give_up: float | None
    intensity_reached: int
    root_exits: tuple[tuple[float, ExitReason], ...] = ()
    unhealthy: int = 0
    supervisor_give_ups: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SimulationResult:
    """A run: its `events` (as a live tree reports them), per-child and tree reports.

    `ended_at` is the virtual time the run stopped: `duration`, or the time
    of the give-up when the tree gave up and was not restarted.
    """

    spec: SupervisorSpec
    seed: int
    duration: float
    ended_at: float
    events: list[Event]
    children: dict[str, ChildReport]
    tree: TreeReport
    calls: list[CallResult] = field(default_factory=list)  # scripted API calls, in order
    # Where each remote subtree incarnation ran: (virtual time, path, node).
    placements: list[tuple[float, str, str]] = field(default_factory=list)
    # Each child's changes of state, by path: (virtual time, state), "down" before the
    # first; kept with or without the events (a hang has no event of its own).
    states: dict[str, list[tuple[float, State]]] = field(default_factory=dict)
    # The figures of the metrics simulate() was given, by name (None: not defined here).
    metrics: dict[str, float | None] = field(default_factory=dict)

    def __str__(self) -> str:
        probed = _probed(self.spec)  # a column for liveness stops, when a child has a probe
        # A column for supervisors' own give-ups, when one gave up.
        nested = any(r.give_ups for r in self.children.values())
        head = (
            f"{'child':<20} {'avail':>8} {'uptime':>12} {'starts':>7} {'restarts':>8} "
            f"{'failures':>8} {'start fail':>10}"
            + (f" {'unhealthy':>9}" if probed else "")
            + (f" {'give-ups':>8}" if nested else "")
        )
        lines = [head]
        for r in self.children.values():
            lines.append(
                f"{r.path:<20} {r.availability:>8.2%} {format_seconds(r.uptime):>12} {r.starts:>7} "
                f"{r.restarts:>8} {r.failures:>8} {r.start_failures:>10}"
                + (f" {r.unhealthy:>9}" if probed else "")
                + (f" {r.give_ups if r.type == 'supervisor' else '-':>8}" if nested else "")
            )
        t = self.tree
        first = t.time_to_give_up
        gave_up = "never" if first is None else f"at {format_seconds(first)}"
        lines.append(
            f"{'(tree)':<20} {t.availability:>8.2%} {format_seconds(t.uptime):>12}; "
            f"gave up {t.give_ups} times (first {gave_up})"
        )
        return "\n".join(lines)


def _probed(spec: SupervisorSpec) -> bool:
    """Whether a worker of the spec has a liveness probe."""
    return any(
        _probed(c) if isinstance(c, SupervisorSpec) else c.liveness is not None
        for c in spec.children
    )


def event_sequence(
    events: Iterable[Event], *, ignore: Collection[EventKind] = ()
) -> list[tuple[str, str, str | None]]:
    """The events as comparable (supervisor, context, offender) tuples.

    Times, pids and reasons differ between a live run and a simulation; this
    sequence does not, for a scripted scenario. Leave out kinds with `ignore`;
    the kinds only a simulation reports (`SIMULATED_ONLY`: child_hung) are left
    out always, since a live tree cannot see them.
    """
    return [
        (e.supervisor, e.context.value, e.offender)
        for e in events
        if e.context not in ignore and e.context not in SIMULATED_ONLY
    ]


@dataclass(slots=True)
class _Account:
    type: ChildType
    state: State = "down"
    since: float = 0.0
    uptime: float = 0.0
    starts: int = 0
    restarts: int = 0
    exits: int = 0
    failures: int = 0
    start_failures: int = 0
    terminations: int = 0
    unhealthy: int = 0
    failed: int = 0
    give_ups: int = 0  # a supervisor's own
    # Every change of state, in order: (virtual time, new state); from "down" at 0.
    changes: list[tuple[float, State]] = field(default_factory=list)


@dataclass
class Accounts:
    """Running totals, updated as the simulation goes (no event list needed)."""

    children: dict[str, _Account]
    bad: int = 0  # workers neither up nor finished
    root_running: bool = False
    tree_since: float = 0.0
    tree_uptime: float = 0.0
    intensity_reached: int = 0
    root_exits: list[tuple[float, ExitReason]] = field(default_factory=list)
    give_ups: list[float] = field(default_factory=list)  # root exits not asked for

    @classmethod
    def for_tree(cls, paths: Mapping[str, ChildType]) -> Accounts:
        children = {p: _Account(t) for p, t in paths.items()}
        return cls(children, bad=sum(1 for t in paths.values() if t == "worker"))

    def add(self, path: str, type: ChildType) -> None:
        """A child that was not in the spec (a simple_one_for_one child): down until started."""
        if path not in self.children:
            self.children[path] = _Account(type)
            if type == "worker":
                self.bad += 1

    @property
    def tree_up(self) -> bool:
        return self.root_running and self.bad == 0

    def set_state(self, path: str, state: State, now: float) -> None:
        acc = self.children[path]
        old = acc.state
        if old == state:
            return
        if old == "up":
            acc.uptime += now - acc.since
        acc.state, acc.since = state, now
        acc.changes.append((now, state))
        down = state in _DOWN
        if acc.type == "worker" and (old in _DOWN) != down:
            # _tree_changed inlined (a change per start and exit): the tree was up with
            # no bad worker, is up again when the last one comes back.
            was_up = self.bad == 0
            self.bad += 1 if down else -1
            if self.root_running:
                if was_up:
                    self.tree_uptime += now - self.tree_since
                elif self.bad == 0:
                    self.tree_since = now

    def set_root_running(self, running: bool, now: float) -> None:
        was_up = self.tree_up
        self.root_running = running
        self._tree_changed(was_up, now)

    def _tree_changed(self, was_up: bool, now: float) -> None:
        up = self.tree_up
        if was_up and not up:
            self.tree_uptime += now - self.tree_since
        elif up and not was_up:
            self.tree_since = now

    def report(self, duration: float) -> tuple[dict[str, ChildReport], TreeReport]:
        """Close the books at `duration` and build the reports."""
        children: dict[str, ChildReport] = {}
        for path, acc in self.children.items():
            uptime = acc.uptime + (duration - acc.since if acc.state == "up" else 0.0)
            # ChildReport(...), built in one step (one per child: 1,000s per run).
            children[path] = build(
                ChildReport,
                {
                    "path": path,
                    "type": acc.type,
                    "uptime": uptime,
                    "downtime": duration - uptime,
                    "availability": _fraction(uptime, duration),
                    "starts": acc.starts,
                    "restarts": acc.restarts,
                    "exits": acc.exits,
                    "failures": acc.failures,
                    "start_failures": acc.start_failures,
                    "terminations": acc.terminations,
                    "unhealthy": acc.unhealthy,
                    "failed": acc.failed,
                    "give_ups": acc.give_ups,
                },
            )
        uptime = self.tree_uptime + (duration - self.tree_since if self.tree_up else 0.0)
        workers = [c for c in children.values() if c.type == "worker"]
        gave_up = self.give_ups
        tree = TreeReport(
            duration=duration,
            uptime=uptime,
            downtime=duration - uptime,
            availability=_fraction(uptime, duration),
            restarts=sum(c.restarts for c in workers),
            failures=sum(c.failures for c in workers),
            start_failures=sum(c.start_failures for c in workers),
            give_ups=len(gave_up),
            time_to_give_up=gave_up[0] if gave_up else None,
            intensity_reached=self.intensity_reached,
            root_exits=tuple(self.root_exits),
            unhealthy=sum(c.unhealthy for c in workers),
            supervisor_give_ups={
                "": len(gave_up),
                **{c.path: c.give_ups for c in children.values() if c.type == "supervisor"},
            },
        )
        return children, tree

    # The two events of every crash and restart, counted without on_event's dispatch.

    def started(self, path: str, now: float, restart: bool) -> None:
        """A CHILD_STARTED of the child at `path` (`restart`: an automatic restart)."""
        acc = self.children.get(path)
        if acc is None:
            return
        acc.starts += 1
        acc.restarts += restart
        old = acc.state
        if old == "up":
            return
        # set_state(path, "up", now), inlined.
        acc.state, acc.since = "up", now
        acc.changes.append((now, "up"))
        if acc.type == "worker" and old in _DOWN:
            was_up = self.bad == 0
            self.bad -= 1
            if self.root_running:
                if was_up:
                    self.tree_uptime += now - self.tree_since
                elif self.bad == 0:
                    self.tree_since = now

    def exited(self, path: str, reason: ExitReason | None, now: float, finishes: bool) -> None:
        """A CHILD_EXITED of the child at `path` (`finishes`: it is not restarted)."""
        acc = self.children.get(path)
        if acc is None:
            return
        acc.exits += 1
        if reason is not None and reason.kind not in _NORMAL:
            acc.failures += 1
            acc.unhealthy += reason.kind is _UNHEALTHY
        if finishes:
            self.set_state(path, "done", now)

    def on_event(self, path: str | None, event: Event, restart: bool, finishes: bool) -> None:
        """Count a reported event about the child at `path` (None: about a supervisor).

        `restart`: a CHILD_STARTED that was an automatic restart; `finishes`: a
        CHILD_EXITED after which the child is not restarted (transient or
        temporary, normal reason).
        """
        kind = event.context
        if kind is _GAVE_UP:
            self.intensity_reached += 1
        if (
            kind is _GAVE_UP
            or kind is _AUTO_SHUTDOWN
            or (
                kind is _SUPERVISOR_STOPPED
                and event.reason is not None
                and event.reason.kind is ExitKind.START_FAILURE
            )
        ):
            # A supervisor stops by itself; the root's are counted as root exits.
            _, _, sup = event.supervisor.partition("/")
            if sup in self.children:
                self.children[sup].give_ups += 1
        acc = self.children.get(path) if path is not None else None
        if acc is None or path is None:
            return
        if kind is _STARTED:
            self.started(path, event.time, restart)
        elif kind is _EXITED:
            self.exited(path, event.reason, event.time, finishes)
        elif kind is EventKind.START_FAILED:
            acc.start_failures += 1
        elif kind is EventKind.CHILD_TERMINATED:
            acc.terminations += 1
        elif kind is EventKind.CHILD_FAILED:
            acc.failed += 1
        elif kind is EventKind.CHILD_PAUSED:
            self.set_state(path, "down", event.time)  # stopped: it serves nothing
        elif kind is EventKind.CHILD_RESUMED:
            self.set_state(path, "up", event.time)
        elif kind is EventKind.CHILD_DELETED and acc.state in _DOWN:
            self.set_state(path, "done", event.time)  # gone for good: not a missing child


def _fraction(part: float, whole: float) -> float:
    if whole <= 0:
        return 1.0
    return min(1.0, max(0.0, part / whole))


def format_seconds(seconds: float) -> str:
    """Seconds in the unit that reads best: "42.0 s", "12.5 min", "3.2 h"."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
