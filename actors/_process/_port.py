"""The seam between a WorkerActor and whatever runs its child.

A worker needs five things from below: to say once how its child is started
(`define`), to start it (`spawn`) and get a handle, to signal it, to learn
that it exited (the `notify` callback, then `exit` on the handle), and warm
standbys. `actors._process._client.Launcher` is the implementation that runs real
processes; tests drive workers and nannies through a fake one
(tests/fake_launcher.py), and a remote subtree can put another behind it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from supervision import ExitPlan

from ._client import Note, ProcessExit, SpawnRequest, Standby


class ChildHandle(Protocol):
    """One started child, as its worker sees it. Thread-safe to read."""

    pid: int
    pgid: int
    channel_note: str
    last_beat: float  # monotonic time of its last heartbeat (a Python child's), else 0

    @property
    def successor(self) -> ChildHandle | None:
        """The child started in its place ahead of the decision (an armed exit)."""

    def take_successor(self) -> ChildHandle | None:
        """Its owner is done with it: the successor, if one was started; the executor
        kills one it starts from now on (no successor may outlive its owner's interest)."""

    @property
    def exit(self) -> ProcessExit | None: ...

    def wait_born(self, timeout: float | None) -> bool:
        """Whether it is a process, once its pid is known (a successor's comes after
        its predecessor's exit); False if it could not be started."""

    def wait(self, timeout: float | None = None) -> ProcessExit | None: ...

    def wait_ready(self, timeout: float | None) -> bool: ...

    def send_signal(self, sig: int, *, group: bool = True) -> bool: ...

    def gone(self) -> bool: ...

    def output(self, stream: int = 2) -> bytes: ...


class Executor(Protocol):
    """Where a tree's child processes come from (the launcher, or a fake)."""

    @property
    def alive(self) -> bool: ...

    def define(self, request: SpawnRequest) -> int: ...

    def forget(self, template: int) -> None: ...

    def spawn(
        self,
        template: int,
        *,
        name: str = "",
        notify: Callable[[ChildHandle, Note], None] | None = None,
        standby: int | None = None,
        timeout: float = ...,
    ) -> ChildHandle: ...

    def prepare(self, template: int) -> Standby: ...

    def discard(self, standby: int) -> None: ...

    def arm(self, child: ChildHandle, group: int, plan: ExitPlan) -> None: ...

    def disarm(self, child: ChildHandle) -> None: ...

    def follow(self, child: ChildHandle, main_pid: int) -> None:
        """MAINPID=: the child's main process will be `main_pid` once its own exits."""

    def grant(self, group: int, granted: int) -> None: ...

    def death(self) -> str: ...

    def close(self, timeout: float = 5.0) -> None: ...
