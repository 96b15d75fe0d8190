"""The live half of a chaos run: a real tree, the schedule's faults injected, times recorded.

Each fault is injected when three things hold: its gap since the previous one
has passed; the tree has made every decision the previous faults call for (as
many events as their replay has: the runner waits for them, with a deadline,
so that a fault never lands in the middle of a restart); and the time is at
least `margin` away from every intensity window's edge (`window_edges`), else
it is moved past the edge. The replay only paces the run: what the tree does is
its own, and is compared afterwards.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import pykka

from actors.testing import TreeHarness
from supervision import Event, EventKind, NannyError

from ._child import listening, tell
from ._replay import IGNORED, Injected, off_the_edges, replay, window_edges
from ._schedule import Fault, Schedule

SETTLE_TIMEOUT = 30.0  # seconds a tree may take to make the decisions a fault calls for


@dataclass(frozen=True)
class LiveRun:
    """What happened live. `origin`: the monotonic time the tree finished starting
    (time 0 of the replay); `initial`: how many events its start made; `stopped_at`:
    when the runner stopped the tree (None: its root gave up first); `moved`: faults
    moved off an intensity window's edge; `stalled`: why the run ended early, if
    the tree did not make the decisions its replay made."""

    events: list[Event]
    origin: float
    initial: int
    injected: list[Injected]
    stopped_at: float | None
    moved: int
    stalled: str | None = None


def _kept(events: list[Event]) -> int:
    return sum(1 for e in events if e.context not in IGNORED)


class _Runner:
    def __init__(self, schedule: Schedule, margin: float) -> None:
        self.schedule = schedule
        self.margin = margin
        self.root = schedule.spec.id
        self.harness = TreeHarness(schedule.spec)

    def settle(self, expected: int) -> str | None:
        """Wait until the live log holds `expected` events (IGNORED left out)."""
        log = self.harness.log
        seen = 0

        def enough(e: Event) -> bool:
            nonlocal seen
            seen += e.context not in IGNORED
            return seen >= expected

        if expected == 0:
            return None
        try:
            log.wait_for(enough, SETTLE_TIMEOUT, start=0)
        except TimeoutError:
            return f"the tree made {_kept(log.snapshot())} events, its replay {expected}"
        return None

    def root_stopped(self) -> bool:
        return any(
            e.context is EventKind.SUPERVISOR_STOPPED and e.supervisor == self.root
            for e in self.harness.log.snapshot()
        )

    def supervisor(self, path: str) -> Any:
        proxy = self.harness.nanny
        for part in path.split("/") if path else ():
            proxy = proxy.child_nanny(part).get().proxy()
        return proxy

    def at_its_time(self, origin: float, edges: list[float]) -> float:
        """Wait until the first time from now that is `margin` off every edge; return it."""
        now = time.monotonic() - origin
        at = off_the_edges(now, edges, self.margin)
        # Waiting for the fault's time: the schedule, not a synchronisation.
        time.sleep(max(0.0, origin + at - time.monotonic()))
        return time.monotonic() - origin

    def inject(self, fault: Fault, origin: float, edges: list[float]) -> Injected:
        if fault.kind == "call":
            return self.call(fault, origin, edges)
        owner, _, child = fault.where.rpartition("/")
        try:
            pid = self.supervisor(owner).which_child(child).get().pid
        except NannyError:
            pid = None  # its supervisor, or the child, is not there now
        if pid is not None and not listening(self.schedule.directory, pid, SETTLE_TIMEOUT):
            raise RuntimeError(f"worker {fault.where} (pid {pid}) never began to listen")
        at = self.at_its_time(origin, edges)
        if pid is None:
            return Injected(fault, at, landed=False)
        if fault.kind == "signal":
            os.kill(pid, fault.code)
        else:
            word = "raise" if fault.kind == "raise" else f"exit {fault.code}"
            tell(self.schedule.directory, pid, word)
        return Injected(fault, at)

    def call(self, fault: Fault, origin: float, edges: list[float]) -> Injected:
        try:
            proxy = self.supervisor(fault.where)
        except NannyError:
            # The simulator answers a call to a supervisor that does not run with
            # SupervisorNotRunning; live, its parent says why it cannot be reached.
            return Injected(fault, self.at_its_time(origin, edges), outcome="SupervisorNotRunning")
        arg, at = fault.arg, None
        try:
            if isinstance(arg, tuple) and arg[:1] == ("pid",):
                # As the simulator's pid_of: the caller reads the pid first.
                pid = proxy.which_child(arg[1]).get().pid
                if pid is None:
                    at = self.at_its_time(origin, edges)
                    return Injected(fault, at, outcome="ChildNotRunning")
                arg = pid
            at = self.at_its_time(origin, edges)
            value = getattr(proxy, fault.method)(arg).get()
        except NannyError as error:
            if at is None:
                at = self.at_its_time(origin, edges)
            return Injected(fault, at, outcome=type(error).__name__)
        started = getattr(value, "id", None) if fault.method == "start_child" else None
        return Injected(fault, at, value=started)

    def run(self) -> LiveRun:
        spec, harness = self.schedule.spec, self.harness
        injected: list[Injected] = []
        moved, stalled, stopped_at = 0, None, None
        with harness:
            stalled = self.settle(_kept(replay(spec, []).events))
            events = harness.log.snapshot()
            initial = len(events)
            origin = events[-1].time if events else time.monotonic()
            last = 0.0
            for fault in self.schedule.faults:
                if stalled or self.root_stopped():
                    break
                due = max(last + fault.gap, time.monotonic() - origin)
                edges = window_edges(replay(spec, injected))
                moved += off_the_edges(due, edges, self.margin) != due
                # Waiting for the fault's time: the schedule, not a synchronisation.
                time.sleep(max(0.0, origin + due - time.monotonic()))
                try:
                    done = self.inject(fault, origin, edges)
                except pykka.ActorDeadError as e:
                    # It stopped after the decisions its replay made: the comparison says how.
                    stalled = f"before {fault}: the root had stopped ({e}), its replay had not"
                    break
                injected.append(done)
                last = done.at
                stalled = self.settle(_kept(replay(spec, injected).events))
            ref = harness.ref
            assert ref is not None
            if ref.is_alive() and not self.root_stopped():
                stopped_at = time.monotonic() - origin
                ref.stop()
            if not stalled:
                harness.log.wait_for(
                    lambda e: (
                        e.context is EventKind.SUPERVISOR_STOPPED and e.supervisor == self.root
                    ),
                    SETTLE_TIMEOUT,
                )
        return LiveRun(
            harness.log.snapshot(), origin, initial, injected, stopped_at, moved, stalled
        )


def run_live(schedule: Schedule, margin: float) -> LiveRun:
    """Run `schedule` on a live tree; every process it started is gone when it returns."""
    return _Runner(schedule, margin).run()
