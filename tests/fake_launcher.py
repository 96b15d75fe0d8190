"""A fake executor: WorkerActors and NannyActors driven without a process.

`FakeLauncher` implements `actors._process._port.Executor`; each spawn makes a
`FakeChild` that the test ends (`finish`), makes ready, or lets a stop end
(SIGTERM and SIGKILL end it unless it was told to ignore SIGTERM).
"""

from __future__ import annotations

import itertools
import signal
import threading
from collections.abc import Callable

from actors._launcher._protocol import Failure
from actors._process._client import LaunchError, ProcessExit, SpawnRequest, Standby

_pids = itertools.count(900_000)


class FakeChild:
    def __init__(self, name: str, notify: Callable[..., None] | None) -> None:
        self.name = name
        self.pid = self.pgid = next(_pids)
        self.channel_note = ""
        self.last_beat = 0.0
        self.successor = None
        self.signals: list[int] = []
        self.ignores_sigterm = False
        self._notify = notify
        self._exit: ProcessExit | None = None
        self._ready = False
        self._done = threading.Event()
        self._ready_or_done = threading.Event()
        self._lock = threading.Lock()

    @property
    def exit(self) -> ProcessExit | None:
        return self._exit

    def wait_born(self, timeout: float | None) -> bool:
        return True

    def take_successor(self) -> None:
        return None  # the fake never restarts ahead

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

    def gone(self) -> bool:
        return self._exit is not None

    def output(self, stream: int = 2) -> bytes:
        return b""

    def finish(self, returncode: int, error: Failure | None = None, uptime: float = 1.0) -> None:
        """The process ends: as the launcher's reader would report it."""
        with self._lock:
            if self._exit is not None:
                return
            self._exit = ProcessExit(self.pid, returncode, uptime, error)
        self._done.set()
        self._ready_or_done.set()
        if self._notify is not None:
            self._notify(self, "exited")

    def renotify(self) -> None:
        """A late, duplicate exit note (what a stale report looks like to a worker)."""
        if self._notify is not None:
            self._notify(self, "exited")


class FakeLauncher:
    def __init__(self) -> None:
        self.alive = True
        self.templates: dict[int, SpawnRequest] = {}
        self.children: list[FakeChild] = []
        self.failures: list[str] = []  # the next spawns fail with these messages
        self.armed: list[tuple[int, object]] = []
        self.disarmed: list[int] = []
        self.followed: list[tuple[int, int]] = []
        self.grants: dict[int, int] = {}
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
        notify: Callable[..., None] | None = None,
        standby: int | None = None,
        timeout: float = 5.0,
    ) -> FakeChild:
        if self.failures:
            raise LaunchError(f"cannot start child {name!r}: {self.failures.pop(0)}", name=name)
        child = FakeChild(name, notify)
        with self.spawned:
            self.children.append(child)
            self.spawned.notify_all()
        return child

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

    def arm(self, child: FakeChild, group: int, plan: object) -> None:
        self.armed.append((child.pid, plan))

    def disarm(self, child: FakeChild) -> None:
        self.disarmed.append(child.pid)

    def follow(self, child: FakeChild, main_pid: int) -> None:
        self.followed.append((child.pid, main_pid))

    def grant(self, group: int, granted: int) -> None:
        self.grants[group] = granted

    def death(self) -> str:
        return "the fake launcher is closed"

    def close(self, timeout: float = 5.0) -> None:
        self.alive = False
        for child in self.children:
            child.finish(-signal.SIGKILL)
