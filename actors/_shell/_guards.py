"""What watches a worker's running process for it: its memory limit (the tree's
sampler), its liveness probe (the tree's prober) and its watchdog (a timer), and
whether it is paused (a paused process is not probed). Each tells the worker a
message for the incarnation it watched (`MemoryExceeded`, `HealthChanged`,
`WatchdogTick`); the worker then kills the process and reports it, one way for
the three (`WorkerStop.kill_and_report`)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pykka

from supervision import ChildSpec, ExitKind, ExitReason

from .._process._port import ChildHandle, ProcessExit
from .._runtime._actor_loop import tell_quietly
from ._context import TreeContext
from ._liveness import LivenessWatch
from ._messages import HealthChanged, MemoryExceeded, WatchdogTick
from ._start_output import RunHistory

log = logging.getLogger("nannytree")


class Guards:
    """The watches on one worker's current process."""

    def __init__(self, spec: ChildSpec, context: TreeContext) -> None:
        self._spec, self._context = spec, context
        self._liveness = LivenessWatch(spec, context.prober)
        self._memory_pid = 0  # the pid whose tree the memory limit is watched on
        self.paused = False  # SIGSTOPped by a Pause

    def start(self, ref: pykka.ActorRef[Any], incarnation: int, pid: int, running: bool) -> None:
        """A process of `incarnation` started (and counts as started)."""
        self.paused = False
        if self._spec.watchdog is not None:
            self.watchdog_in(ref, incarnation, self._spec.watchdog)
        self.watch_memory(ref, incarnation, pid)
        if running:
            self._liveness.start(ref, incarnation)

    def watch_memory(self, ref: pykka.ActorRef[Any], incarnation: int, pid: int) -> None:
        """Watch the memory of `pid`'s tree (a new main process's, after a fork)."""
        limit = self._spec.memory_limit
        if limit is None:
            return
        if self._memory_pid:
            self._context.memory.unwatch(self._memory_pid)
        self._memory_pid = pid
        self._context.memory.watch(
            pid, limit, lambda rss: tell_quietly(ref, MemoryExceeded(incarnation, rss))
        )

    def watchdog_in(self, ref: pykka.ActorRef[Any], incarnation: int, delay: float) -> None:
        def tick() -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(WatchdogTick(incarnation))

        self._context.scheduler.call_later(max(delay, 0.001), tick)

    def pause(self) -> None:
        self._liveness.stop()  # a stopped process cannot answer its probe

    def resume(self, ref: pykka.ActorRef[Any], incarnation: int, running: bool) -> None:
        self.paused = False
        if running:
            self._liveness.start(ref, incarnation)

    def unwatch_memory(self, pid: int) -> None:
        self._context.memory.unwatch(pid)

    def end(self, pid: int, current: bool) -> None:
        """The process `pid` is gone (or going); `current`: it was the one watched."""
        if current:
            self.paused = False
            self._liveness.stop()
        self._context.memory.unwatch(pid)
        if self._memory_pid:
            self._context.memory.unwatch(self._memory_pid)
            self._memory_pid = 0

    def missed_watchdog(
        self, ref: pykka.ActorRef[Any], proc: ChildHandle, tick: WatchdogTick, late: float | None
    ) -> Callable[[ProcessExit], ExitReason] | None:
        """At a watchdog tick, `late` s since its last beat (None: it asked for a
        restart): the next tick, or the reason it is killed for."""
        seconds = self._spec.watchdog
        if seconds is None:
            return None
        if late is not None and late < seconds:
            self.watchdog_in(ref, tick.incarnation, seconds - late)
            return None
        log.warning(
            "child %r (pid %d) missed its watchdog of %ss", self._spec.id, proc.pid, seconds
        )
        return lambda exit: ExitReason.watchdog(seconds)


def over_memory(
    spec: ChildSpec, history: RunHistory, rss: int
) -> Callable[[ProcessExit], ExitReason]:
    """The reason a process over its memory limit is killed for."""

    def reason_of(exit: ProcessExit) -> ExitReason:
        return ExitReason(
            ExitKind.MEMORY_LIMIT,
            code=exit.returncode if exit.returncode >= 0 else None,
            signal=-exit.returncode if exit.returncode < 0 else None,
            message=f"its process tree used {rss} bytes of RSS, over memory_limit="
            f"{spec.memory_limit}; raise memory_limit or find the leak",
            stderr_tail=history.tail(exit.stderr),
        )

    return reason_of


def unhealthy(
    spec: ChildSpec, history: RunHistory, proc: ChildHandle, message: HealthChanged
) -> Callable[[ProcessExit], ExitReason] | None:
    """The reason a process that failed its liveness probe is killed for, if it is."""
    liveness, health = spec.liveness, message.health
    if liveness is None or message.verdict != "stop":
        return None
    log.warning(
        "child %r (pid %d) failed %d liveness probes in a row (%s): %s",
        spec.id,
        proc.pid,
        health.failures,
        liveness.probe,
        health.error,
    )

    def reason_of(exit: ProcessExit) -> ExitReason:
        reason = ExitReason.unhealthy(health.failures, str(liveness.probe), health.error)
        return dataclasses.replace(reason, stderr_tail=history.tail(exit.stderr))

    return reason_of
