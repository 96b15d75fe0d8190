"""`FakeSpawner`: the fake behind the process port, for tests without processes.

Public as `actors.testing.FakeSpawner` (trio.testing's way: the fake ships with
the port it fakes). Each spawn makes a `FakeChild` that the test ends
(`finish`), makes ready, makes write to its output (`write`), or lets a stop end
(SIGTERM and SIGKILL end it unless it was told to ignore SIGTERM). It keeps the
launcher's rules for what acts ahead of the core (docs/acting-ahead.md): an armed
child whose exit its plan covers, within its budget's grant, gets a successor
started in its place before its exit is reported; a run of starts starts in order
and none after one that failed or was cancelled; a successor whose predecessor was
let go is never born.
"""

from __future__ import annotations

import errno
import itertools
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

from supervision import ExitPlan

from .._launcher._protocol import Failure
from ._handle import OutputTail
from ._port import LaunchError, Note, PendingSpawn, ProcessExit, RunSpawn, SpawnRequest, Standby

_pids = itertools.count(900_000)


class _Watch:
    def __init__(self, child: FakeChild) -> None:
        self._child = child

    def wait(self, timeout: float | None) -> bool:
        return self._child.wait(timeout) is not None

    def close(self) -> None:
        pass


class FakeChild:
    """One fake process: its pid is made up; nothing runs."""

    def __init__(
        self,
        spawner: FakeSpawner,
        name: str,
        template: int,
        notify: Callable[[Any, Note], None] | None,
    ) -> None:
        self.name = name
        self.template = template
        self.pid = self.pgid = next(_pids)
        self.channel_note = ""
        self.last_beat = 0.0
        self.successor: FakeChild | None = None
        self.signals: list[int] = []
        self.ignores_sigterm = False
        self._spawner = spawner
        self._notify = notify
        self._exit: ProcessExit | None = None
        self._ready = False
        self._let_go = False
        self._done = threading.Event()
        self._ready_or_done = threading.Event()
        self._lock = threading.Lock()
        self._output = OutputTail()

    @property
    def exit(self) -> ProcessExit | None:
        return self._exit

    def take_successor(self) -> FakeChild | None:
        with self._lock:
            self._let_go = True
            return self.successor

    def wait_born(self, timeout: float | None) -> bool:
        return True

    def wait(self, timeout: float | None = None) -> ProcessExit | None:
        self._done.wait(timeout)
        return self._exit

    def wait_ready(self, timeout: float | None) -> bool:
        self._ready_or_done.wait(timeout)
        return self._ready

    def become_ready(self) -> None:
        self._ready = True
        self._ready_or_done.set()

    def send_signal(self, sig: int, *, group: bool = True) -> bool:
        if self._exit is not None:
            return False
        self.signals.append(sig)
        if sig == signal.SIGKILL or (sig == signal.SIGTERM and not self.ignores_sigterm):
            self.finish(-sig)
        return True

    def exit_watch(self) -> _Watch:
        return _Watch(self)

    def gone(self) -> bool:
        return self._exit is not None

    def write(self, stream: int, data: bytes) -> None:
        """The process writes `data` to its stdout (1) or stderr (2), as a captured or
        tee'd stream reaches its handle."""
        self._output.append(stream, data)

    def output(self, stream: int = 2) -> bytes:
        return self._output.tail(stream)

    def output_since(self, stream: int, offset: int) -> tuple[bytes, int]:
        return self._output.since(stream, offset)

    def wait_output(self, stream: int, offset: int, timeout: float) -> bool:
        return self._output.wait(stream, offset, timeout)

    def finish(
        self,
        returncode: int,
        error: Failure | None = None,
        uptime: float = 1.0,
        *,
        note: bool = True,
    ) -> None:
        """The process ends, as the launcher's reader would report it: a successor is
        started first if its arm covers the exit. `note=False` holds back the note to
        its owner (a report still on its way; `renotify()` sends it)."""
        with self._lock:
            if self._exit is not None:
                return
            if not self._let_go and self._spawner._covered(self, returncode, uptime):
                self.successor = self._spawner._start(self.name, self.template, self._notify)
            self._exit = ProcessExit(self.pid, returncode, uptime, error, stderr=self.output(2))
            self._spawner.ended.append(self)
        self._output.end()
        self._done.set()
        self._ready_or_done.set()
        if note and self._notify is not None:
            self._notify(self, "exited")

    def renotify(self) -> None:
        """A late, duplicate exit note (what a stale report looks like to a worker)."""
        if self._notify is not None:
            self._notify(self, "exited")

    def __repr__(self) -> str:
        return f"<FakeChild {self.name} pid={self.pid} exit={self._exit}>"


class FakeSpawner:
    """A `Spawner` (actors/_process/_port.py) that starts nothing: `Tree.start(spec,
    spawner=lambda: fake)`. What the shell asked of it is kept for tests to read."""

    def __init__(self) -> None:
        self.alive = True
        self.templates: dict[int, SpawnRequest] = {}
        self.children: list[FakeChild] = []
        self.failures: list[str] = []  # the next spawns fail with these messages
        self.armed: list[tuple[int, object]] = []
        self.disarmed: list[int] = []
        self.followed: list[tuple[int, int]] = []
        self.grants: dict[int, int] = {}
        self.used: dict[int, int] = {}  # restarts made ahead, per budget
        self.runs: list[list[str]] = []  # the names of each run of starts submitted
        self.ended: list[FakeChild] = []  # in the order they ended
        self.cancelled: list[str] = []  # spawns of a run not started: one before failed
        self._arms: dict[int, tuple[int, ExitPlan]] = {}  # pid -> (budget, plan)
        self._cancelled: set[int] = set()
        self._failed_chains: set[int] = set()
        self._ids = itertools.count(1)
        self.spawned = threading.Condition()

    def define(self, request: SpawnRequest) -> int:
        tid = next(self._ids)
        self.templates[tid] = request
        return tid

    def forget(self, template: int) -> None:
        self.templates.pop(template, None)

    def spawn(
        self,
        template: int,
        *,
        name: str = "",
        notify: Callable[[Any, Note], None] | None = None,
        standby: int | None = None,
        timeout: float = 5.0,
    ) -> FakeChild:
        if self.failures:
            raise LaunchError(f"cannot start child {name!r}: {self.failures.pop(0)}", name=name)
        return self._start(name, template, notify)

    def submit_run(
        self, spawns: Sequence[RunSpawn], *, chain: int = 0, standby: int | None = None
    ) -> list[PendingSpawn]:
        slots = []
        self.runs.append([name for _, name, _, _ in spawns])
        for template, name, notify, on_done in spawns:
            slot = PendingSpawn(name, notify, on_done)
            if chain and (chain in self._cancelled or chain in self._failed_chains):
                self.cancelled.append(name)
                slot.error = LaunchError(
                    f"cannot start child {name!r}: a start before it failed or was cancelled",
                    name=name,
                    errno=errno.ECANCELED,
                )
            else:
                try:
                    slot.child = self.spawn(template, name=name, notify=notify)
                except LaunchError as e:
                    slot.error = e
                    self._failed_chains.add(chain)
            slots.append(slot)
        for slot in slots:  # answered after the whole run was sent, as over the socket
            slot._finish()
        return slots

    def new_chain(self) -> int:
        return next(self._ids)

    def cancel_chain(self, chain: int) -> None:
        self._cancelled.add(chain)

    def expire(self, slots: Sequence[PendingSpawn], waited: float) -> None:
        pass  # every fake spawn is answered at once

    def latest(self, name: str, count: int = 1, timeout: float = 10.0) -> FakeChild:
        """The newest child of that name, once at least `count` of them were spawned."""
        with self.spawned:
            ok = self.spawned.wait_for(
                lambda: sum(c.name == name for c in self.children) >= count, timeout
            )
        assert ok, f"{count} spawns of {name!r} did not happen"
        return [c for c in self.children if c.name == name][-1]

    def prepare(self, template: int) -> Standby:
        return Standby(next(self._ids))

    def discard(self, standby: int) -> None:
        pass

    def arm(self, child: Any, budget: int, plan: ExitPlan, standby: int = 0) -> None:
        self.armed.append((child.pid, plan))
        self._arms[child.pid] = (budget, plan)

    def disarm(self, child: Any) -> None:
        self.disarmed.append(child.pid)
        self._arms.pop(child.pid, None)

    def follow(self, child: Any, main_pid: int) -> None:
        self.followed.append((child.pid, main_pid))

    def grant(self, budget: int, granted: int) -> None:
        self.grants[budget] = granted

    def death(self) -> str:
        return "the fake spawner is closed"

    def close(self, timeout: float = 5.0) -> None:
        self.alive = False
        for child in self.children:
            child.finish(-signal.SIGKILL)

    def _start(
        self, name: str, template: int, notify: Callable[[Any, Note], None] | None
    ) -> FakeChild:
        child = FakeChild(self, name, template, notify)
        with self.spawned:
            self.children.append(child)
            self.spawned.notify_all()
        return child

    def _covered(self, child: FakeChild, code: int, uptime: float) -> bool:
        """The launcher's rule (actors/_launcher): an armed exit its plan covers, within
        its budget's grant, is restarted at once, and uses one restart of the grant."""
        armed = self._arms.pop(child.pid, None)
        if armed is None or self.failures:
            return False  # (a successor that cannot start: restarted the ordinary way)
        budget, plan = armed
        if uptime < plan.min_uptime:
            return False
        if plan.restart_on != "any" and code >= 0 and code in plan.normal_exit_codes:
            return False
        used = self.used.get(budget, 0)
        if used >= self.grants.get(budget, 0):
            return False
        self.used[budget] = used + 1
        return True
