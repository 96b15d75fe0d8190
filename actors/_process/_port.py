"""The port between the shell and whatever runs its children's processes.

A worker asks six things of processes: to say once how its child is started
(`define`), to start it (`spawn`, or a run of them sent ahead with
`submit_run`) and get a `ChildHandle`, to signal and stop it, to learn that it
exited (the `notify` callback, then `exit` on the handle), warm standbys, and
restarts made ahead of the core's decision (`arm`, `grant`, a handle's
successor: docs/acting-ahead.md). The types they speak in live here, not in an
adapter. `actors._process._client.LauncherClient` is the adapter that runs real
processes through the launcher; `actors.testing.FakeSpawner` is the fake.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from supervision import CAPTURE, ExitPlan

from .._launcher._journal import identifier_of
from .._launcher._protocol import Failure, Template
from .._runtime._flag import Flag

SPAWN_TIMEOUT = 5.0  # a launcher that does not answer a spawn in this long is hung
OUTPUT_LIMIT = 64 * 1024  # bytes kept per captured stream

log = logging.getLogger("nannytree")


@dataclass(frozen=True)
class SpawnRequest:
    """What to start. Exactly one of `command` / `payload`.

    A relative `cwd`, `stdout` or `stderr` is resolved against the host's
    working directory when the request is defined. Children read /dev/null on
    stdin; stdout/stderr are the host's unless a file (opened for append) is
    named, or "capture" (the launcher forwards what the child writes; read it
    with ChildProcess.output()). A stream in `tee` (1 stdout, 2 stderr; stderr
    unless told otherwise) still goes to the host's or to its file, through the
    launcher, which also forwards it as for "capture"; past 3/4 of the
    launcher's fd room a child is started without it (docs/launcher.md, "Tee'd
    output").
    """

    command: Sequence[str] | None = None
    payload: bytes | None = None
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    sys_path: Sequence[str] = ()
    argv: Sequence[str] = ()
    fresh_interpreter: bool = False
    stdout: str | None = None
    stderr: str | None = None
    name: str = ""
    pid_file: str | None = None  # a command that forks itself (Template.pid_file)
    pid_timeout: float = 30.0
    follow_grace: float = 0.0  # Template.follow_grace
    pid_env: str | None = None  # Template.pid_env
    tee: Sequence[int] = (2,)  # Template.tee: what a "capture" is not, also forwarded
    log_max_bytes: int = 0  # Template.log_max_bytes (docs/logs.md)
    log_backups: int = 0
    log_timestamps: bool = False
    sockets: Sequence[tuple[str, str, int]] = ()  # Template.sockets: (name, listen, backlog)
    account: tuple[int, int, tuple[int, ...]] | None = None  # (uid, gid, groups): Template's
    limits: Sequence[tuple[str, int, int]] = ()  # Template.limits: (name, soft, hard), -1: infinity
    no_new_privs: bool = False  # Template.no_new_privs

    def __post_init__(self) -> None:
        if (self.command is None) == (self.payload is None):
            raise ValueError(f"child {self.name!r}: give exactly one of command or payload")
        if self.command is not None:
            if isinstance(self.command, str | bytes):
                raise ValueError(f"child {self.name!r}: command must be an argv list, not a string")
            if not self.command or not all(isinstance(a, str) for a in self.command):
                raise ValueError(f"child {self.name!r}: command must be a non-empty list of str")
        if self.env is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()
        ):
            raise ValueError(f"child {self.name!r}: env keys and values must be str")
        if isinstance(self.tee, str | bytes) or not all(s in (1, 2) for s in self.tee):
            raise ValueError(f"child {self.name!r}: tee takes streams 1 (stdout) and 2 (stderr)")

    def template(self) -> Template:
        """The launcher's record of this request, resolved against the host's state now."""
        captured = {s for s, to in ((1, self.stdout), (2, self.stderr)) if to == CAPTURE}
        return Template(
            command=None if self.command is None else list(self.command),
            payload=self.payload,
            env=dict(os.environ if self.env is None else self.env),
            cwd=os.path.abspath(os.getcwd() if self.cwd is None else self.cwd),
            sys_path=list(self.sys_path),
            argv=list(self.argv),
            fresh=self.fresh_interpreter,
            # Relative output paths are the host's, not the child's cwd.
            stdout=_output_target(self.stdout),
            stderr=_output_target(self.stderr),
            pid_file=None if self.pid_file is None else os.path.abspath(self.pid_file),
            pid_timeout=float(self.pid_timeout),
            follow_grace=float(self.follow_grace),
            pid_env=self.pid_env,
            tee=[s for s in (1, 2) if s in self.tee and s not in captured],
            log_max_bytes=int(self.log_max_bytes),
            log_backups=int(self.log_backups),
            log_timestamps=bool(self.log_timestamps),
            sockets=[list(s) for s in self.sockets],
            uid=-1 if self.account is None else self.account[0],
            gid=-1 if self.account is None else self.account[1],
            groups=[] if self.account is None else list(self.account[2]),
            limits=[list(limit) for limit in self.limits],
            no_new_privs=bool(self.no_new_privs),
        )


def _output_target(path: str | None) -> str | None:
    if path is None or path == CAPTURE or identifier_of(path) is not None:
        return path
    return os.path.abspath(path)


@dataclass(frozen=True)
class ProcessExit:
    """A child's end, as the launcher saw it (or the host, when the launcher is gone)."""

    pid: int
    returncode: int  # >= 0 exit code, -N killed by signal N
    # Seconds from spawn to reaping, by the launcher's clock: a measurement, not identity.
    uptime: float = field(default=0.0, compare=False)
    error: Failure | None = None  # what a Python target raised
    launcher_died: bool = False
    stderr: bytes = b""  # what a captured or tee'd stderr said last (its last OUTPUT_LIMIT bytes)
    # Its first process exited 0 leaving these running: it daemonized itself.
    detached: tuple[int, ...] = ()
    # Seconds its report waited for its process group to empty (docs/launcher.md, "A
    # restart waits for the old group"), and how many groups or processes of it were
    # still there when that wait ran out (0: none; its successor may then race them).
    group_wait: float = field(default=0.0, compare=False)
    lingering: int = 0


class LaunchError(Exception):
    """A child could not be started (or the launcher is gone)."""

    def __init__(self, message: str, *, name: str = "", errno: int | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.errno = errno


# "born": a successor's pid is known (or that it never comes: pid 0), on the successor.
Note = Literal["exited", "channel_closed", "forked", "born"]


class Standby:
    """A warm standby asked for with `Spawner.prepare`; `wait()` for its fork."""

    def __init__(self, sid: int) -> None:
        self.id = sid
        self.pid = 0
        self._done = threading.Event()

    def wait(self, timeout: float | None = None) -> int:
        """Its pid once forked (0 if it could not be, or not yet within `timeout`)."""
        self._done.wait(timeout)
        return self.pid


class PendingSpawn:
    """A spawn sent and not yet answered (`Spawner.submit_run`): `done` once the launcher
    answered (or the wait for it ran out); then `child`, or `error`."""

    __slots__ = ("child", "done", "error", "name", "notify", "on_done", "req")

    def __init__(
        self,
        name: str,
        notify: Callable[[ChildHandle, Note], None] | None,
        on_done: Callable[[PendingSpawn], None] | None = None,
    ) -> None:
        self.name = name
        self.notify = notify
        self.on_done = on_done
        self.req = 0
        self.done = Flag()
        self.child: ChildHandle | None = None
        self.error: LaunchError | None = None

    def result(self) -> ChildHandle:
        """The started child (once `done`); raises its LaunchError."""
        if self.error is not None:
            raise self.error
        assert self.child is not None, "PendingSpawn.result() before it is done"
        return self.child

    @property
    def cancelled(self) -> bool:
        """Not started because a start before it in its run failed or was cancelled."""
        return self.error is not None and self.error.errno == errno.ECANCELED

    def _finish(self) -> None:
        self.done.set()
        if self.on_done is not None:
            try:
                self.on_done(self)
            except Exception:
                log.exception("nannytree: a spawn's callback failed")


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

    def exit_watch(self) -> ExitWatch:
        """The OS's word that the process is gone, ahead of the exit's report (a pidfd
        where there is one); opened before the stop signal, while the pid is still it."""

    def output(self, stream: int = 2) -> bytes:
        """What a captured or tee'd stream (1 stdout, 2 stderr) said: its last
        OUTPUT_LIMIT bytes."""

    def output_since(self, stream: int, offset: int) -> tuple[bytes, int]:
        """What the stream said after its first `offset` bytes (what is still kept of
        it: the last OUTPUT_LIMIT bytes), and how many bytes it said in all."""

    def wait_output(self, stream: int, offset: int, timeout: float) -> bool:
        """Whether the stream said more than `offset` bytes in all, waiting up to
        `timeout` s for it; it stops waiting when the process ended."""


class ExitWatch(Protocol):
    def wait(self, timeout: float | None) -> bool:
        """Whether the process is gone within `timeout` seconds (None: as long as it takes)."""

    def close(self) -> None: ...


# A spawn of a run: (template, name, notify, on_done), on_done run when it is answered.
RunSpawn = tuple[
    int,
    str,
    Callable[["ChildHandle", Note], None] | None,
    Callable[[PendingSpawn], None] | None,
]


class Spawner(Protocol):
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

    def submit_run(
        self, spawns: Sequence[RunSpawn], *, chain: int = 0, standby: int | None = None
    ) -> list[PendingSpawn]:
        """Send these spawns in one go and return at once (a run of starts)."""

    def new_chain(self) -> int:
        """A name for a run whose spawns start in order, none after one that failed."""

    def cancel_chain(self, chain: int) -> None: ...

    def expire(self, slots: Sequence[PendingSpawn], waited: float) -> None:
        """These spawns were not answered in `waited` seconds: each fails now."""

    def prepare(self, template: int) -> Standby: ...

    def discard(self, standby: int) -> None: ...

    def arm(self, child: ChildHandle, budget: int, plan: ExitPlan, standby: int = 0) -> None: ...

    def disarm(self, child: ChildHandle) -> None: ...

    def follow(self, child: ChildHandle, main_pid: int) -> None:
        """MAINPID=: the child's main process will be `main_pid` once its own exits."""

    def grant(self, budget: int, granted: int) -> None: ...

    def death(self) -> str: ...

    def close(self, timeout: float = 5.0) -> None: ...
