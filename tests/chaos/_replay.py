"""The replay: a recorded live schedule into `supervision.simulate`, and the comparison.

Each injected fault is replayed at its live time (seconds after the live tree
finished starting, which is the simulation's time 0): an exit, a signal or a
raise as a `Scripted` absolute exit of that worker's path with the reason the
live worker reports, a call as a scripted `call`, and the final stop as
`call(t, "stop")`. A fault the live runner found no process for is replayed
too: the simulation must find none either.

The decisions compared are the event sequences (supervisor, what, which child)
with the reason's kind of exits and give-ups, and each call's outcome.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from supervision import Event, EventKind, ExitKind, ExitReason, SupervisorSpec
from supervision.simulate import (
    Call,
    Scripted,
    SimulationResult,
    call,
    pid_of,
    simulate,
)

from ._schedule import Fault

# Live only, and no decision: a note that a process started ahead was killed.
IGNORED = frozenset({EventKind.CHILD_NOTE})
# What a decision is about beyond (supervisor, what, child): the reason's kind, and
# for a supervisor's stop its message (a give-up says reached_max_restart_intensity).
_WITH_KIND = frozenset(
    {EventKind.CHILD_EXITED, EventKind.MAX_INTENSITY_REACHED, EventKind.SUPERVISOR_STOPPED}
)
# The decisions counted: restarts and starts, stops of siblings, give-ups, deletions.
DECISIONS = frozenset(
    {
        EventKind.CHILD_STARTED,
        EventKind.CHILD_TERMINATED,
        EventKind.MAX_INTENSITY_REACHED,
        EventKind.SUPERVISOR_STOPPED,
        EventKind.CHILD_DELETED,
        EventKind.RESTART_SCHEDULED,
        EventKind.START_FAILED,
        EventKind.STALE_EXIT_IGNORED,
    }
)

Decision = tuple[str, str, str | None, str | None]


@dataclass(frozen=True)
class Injected:
    """A fault as the live runner injected it: `at` seconds after the tree's start.

    `landed`: a process fault found the worker running (else it did nothing);
    `outcome`: a call's error type name (None: it returned), `value` the id a
    start_child returned.
    """

    fault: Fault
    at: float
    landed: bool = True
    outcome: str | None = None
    value: str | None = None


def reason_of(fault: Fault) -> ExitReason:
    """The reason the live tree reports for a worker's exit, signal or raise."""
    if fault.kind == "exit":
        if fault.code == 0:
            return ExitReason.normal()
        return ExitReason(ExitKind.EXIT_CODE, code=fault.code)
    if fault.kind == "signal":
        return ExitReason(ExitKind.KILLED, signal=fault.code)
    return ExitReason(ExitKind.EXCEPTION, exc_type="tests.chaos._child.ChaosError")


def _call(injected: Injected) -> Call:
    fault = injected.fault
    arg: Any = fault.arg
    if isinstance(arg, tuple) and arg[:1] == ("pid",):
        arg = pid_of(arg[1])
    return call(injected.at, fault.method, arg, supervisor=fault.where)


def replay(
    spec: SupervisorSpec, injected: Sequence[Injected], stopped_at: float | None = None
) -> SimulationResult:
    """Simulate `spec` under the faults as injected (and the tree's stop, if given)."""
    exits: dict[str, list[tuple[float, ExitReason]]] = {}
    calls: list[Call] = []
    for i in injected:
        if i.fault.kind == "call":
            calls.append(_call(i))
        else:
            exits.setdefault(i.fault.where, []).append((i.at, reason_of(i.fault)))
    if stopped_at is not None:
        calls.append(call(stopped_at, "stop"))
    end = max([0.0, *(i.at for i in injected), *([stopped_at] if stopped_at else [])])
    faults = {path: Scripted(script) for path, script in exits.items()}
    return simulate(spec, faults, duration=end + 1.0, calls=calls)


def decisions(events: Iterable[Event]) -> list[Decision]:
    """The comparable form of a run's events (IGNORED left out)."""
    out: list[Decision] = []
    for e in events:
        if e.context in IGNORED:
            continue
        detail = None
        if e.context in _WITH_KIND and e.reason is not None:
            detail = e.reason.kind.value
            if e.context is EventKind.SUPERVISOR_STOPPED and e.reason.message:
                detail += ": " + e.reason.message
        out.append((e.supervisor, e.context.value, e.offender, detail))
    return out


def call_outcomes(result: SimulationResult) -> list[tuple[str | None, str | None]]:
    """Each call's (error type, started id), in the order they were made; the stop left out.

    The simulation answers in the order calls are handled, which is their order:
    the live runner waits for each answer before the next fault.
    """
    out = []
    for r in result.calls:
        if r.call.method == "stop":
            continue
        error = None if r.error is None else type(r.error).__name__
        value = getattr(r.value, "id", None) if r.call.method == "start_child" else None
        out.append((error, value))
    return out


def periods(spec: SupervisorSpec, prefix: str = "") -> dict[str, float]:
    """Each supervisor's period by its name in events ("root", "root/s1")."""
    name = prefix + spec.id
    found = {name: spec.period}
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            found.update(periods(child, name + "/"))
    return found


def window_edges(result: SimulationResult) -> list[float]:
    """When an intensity window's edge passes a charged restart: for each exit a
    supervisor heard (each may charge its intensity), its time plus that
    supervisor's period. A fault within the margin of one is moved past it."""
    of = periods(result.spec)
    return sorted(
        e.time + of[e.supervisor]
        for e in result.events
        if e.context in (EventKind.CHILD_EXITED, EventKind.RESTART_SCHEDULED)
    )


def off_the_edges(t: float, edges: Iterable[float], margin: float) -> float:
    """The first time from `t` on that is at least `margin` from every edge."""
    moved = True
    while moved:
        moved = False
        for edge in edges:
            if edge - margin < t < edge + margin:  # not abs(): edge + margin must leave it
                t, moved = edge + margin, True
    return t


@dataclass(frozen=True)
class Comparison:
    """A live run against its replay. `first` is the index of the first decision that
    differs (None: none). Over the equal prefix: `compared` decisions (the tree's start
    left out); `lags`, how far each live exit was behind its replayed one (seconds);
    `crossings`, the pairs of exits a supervisor heard whose distance was within its
    period in one run and not in the other (an intensity window's edge fell between
    them: a difference there would be one of timing)."""

    live: list[Decision]
    simulated: list[Decision]
    live_calls: list[tuple[str | None, str | None]]
    simulated_calls: list[tuple[str | None, str | None]]
    first: int | None
    compared: int
    lags: list[float]
    crossings: int

    @property
    def agrees(self) -> bool:
        return self.first is None and self.live_calls == self.simulated_calls

    @property
    def lag(self) -> float:
        return max(self.lags, default=0.0)

    def explain(self) -> str:
        if self.agrees:
            return "agree"
        lines = []
        if self.first is not None:
            lines.append(f"first difference at decision {self.first}:")
            lo = max(0, self.first - 3)
            for name, seq in (("live", self.live), ("simulated", self.simulated)):
                lines.append(f"  {name}:")
                lines += [f"    {i}: {d}" for i, d in enumerate(seq[lo : self.first + 4], lo)]
        if self.live_calls != self.simulated_calls:
            lines.append(f"  calls live:      {self.live_calls}")
            lines.append(f"  calls simulated: {self.simulated_calls}")
        if self.crossings:
            lines.append(f"  {self.crossings} pairs of exits on either side of a window's edge")
        return "\n".join(lines)


def compare(
    live_events: Sequence[Event],
    origin: float,
    result: SimulationResult,
    live_calls: list[tuple[str | None, str | None]],
    initial: int = 0,
) -> Comparison:
    """Compare a live run's events (`origin`: its time 0; the first `initial` of them
    its start) and the calls' outcomes with the replay's."""
    live_kept = [e for e in live_events if e.context not in IGNORED]
    sim_kept = [e for e in result.events if e.context not in IGNORED]
    live, simulated = decisions(live_kept), decisions(sim_kept)
    first = next((i for i, (a, b) in enumerate(zip(live, simulated, strict=False)) if a != b), None)
    if first is None and len(live) != len(simulated):
        first = min(len(live), len(simulated))
    same = len(live) if first is None else first
    start = _kept_count(live_events[:initial])
    compared = sum(1 for d in live[start:same] if d[1] in DECISIONS)
    # The exits each supervisor heard, (replayed time, live time): each may charge it.
    heard: dict[str, list[tuple[float, float]]] = {}
    for a, b in zip(live_kept[:same], sim_kept[:same], strict=True):
        if a.context in (EventKind.CHILD_EXITED, EventKind.RESTART_SCHEDULED):
            heard.setdefault(a.supervisor, []).append((b.time, a.time - origin))
    lags = [t_live - t_sim for pairs in heard.values() for t_sim, t_live in pairs]
    of = periods(result.spec)
    crossings = 0
    for supervisor, pairs in heard.items():
        period = of[supervisor]
        for i, (s0, l0) in enumerate(pairs):
            for s1, l1 in pairs[i + 1 :]:
                crossings += (s1 - s0 <= period) != (l1 - l0 <= period)
    return Comparison(
        live, simulated, live_calls, call_outcomes(result), first, compared, lags, crossings
    )


def _kept_count(events: Iterable[Event]) -> int:
    return sum(1 for e in events if e.context not in IGNORED)
