"""What watches a worker's running process for it: its memory limit (the tree's
sampler), its liveness probe (the tree's prober) and its watchdog (a timer), and
whether it is paused (a paused process is not probed). Each tells the worker a
message for the incarnation it watched (`MemoryExceeded`, `HealthChanged`,
`WatchdogTick`); the worker then kills the process and reports it, one way for
the three (`WorkerStop.kill_and_report`)."""

from __future__ import annotations

import contextlib
from typing import Any

import pykka

from supervision import ChildSpec

from .._runtime._actor_loop import tell_quietly
from ._context import TreeContext
from ._liveness import LivenessWatch
from ._messages import MemoryExceeded, WatchdogTick


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
