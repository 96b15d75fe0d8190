"""sd_notify for command children, as systemd does it (Type=notify, WatchdogSec=).

One `NotifyEndpoint` per child start: a datagram Unix socket in a private 0700
directory (owned by the child's user when it runs as another: `owner`), named to
the child by NOTIFY_SOCKET. Children are untrusted:

- each datagram's sender is known from the kernel (SO_PASSCRED), and only a
  process of the child's tree is heard (systemd's NotifyAccess=all, limited to
  the child: see `actors._launcher._daemons.in_tree`);
- a datagram is at most MAX_DATAGRAM bytes (larger ones are dropped whole), a
  STATUS= text at most MAX_STATUS characters; file descriptors passed along are
  closed unread;
- MAINPID= is honoured only for a live process of the child's tree.

The sender is checked when its datagram is read, so it must still exist then:
a helper that sends and exits at once (`systemd-notify --ready` from a shell
script) may be refused; send from the daemon itself, or keep the helper's
parent waiting (as systemd itself warns for NotifyAccess=all).

The owner (the launcher or the host) puts `fileno()` in its selector and calls
`read()` when it is readable; `read()` never blocks. `close()` removes the
socket and its directory.
"""

from __future__ import annotations

import array
import contextlib
import math
import os
import shutil
import socket
import struct
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from supervision import ChildSpec

from .._launcher._daemons import in_tree
from .._launcher._procfs import is_alive, proc_stat
from ._account import notify_owner

MAX_DATAGRAM = 4096
MAX_STATUS = 1024
MAX_REFUSED = 64  # refusals kept for the owner to report
_BATCH = 64  # datagrams per read(): a flood cannot hold the owner's loop
_CREDS = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class Notification:
    """One accepted datagram, parsed. Unknown or malformed assignments are ignored."""

    pid: int  # the sender, as the kernel reports it
    ready: bool = False  # READY=1
    status: str | None = None  # STATUS=...
    main_pid: int | None = None  # MAINPID=N, checked to be in the child's tree
    watchdog: bool = False  # WATCHDOG=1: a heartbeat
    watchdog_trigger: bool = False  # WATCHDOG=trigger: the child asks to be restarted
    stopping: bool = False  # STOPPING=1
    reloading: bool = False  # RELOADING=1


@dataclass(frozen=True)
class Refused:
    """A datagram (or one field of it) not accepted, and why: for an event."""

    pid: int | None
    why: str


class NotifyEndpoint:
    """The NOTIFY_SOCKET of one child start.

    `root` is the child's main pid once known (`attach()` sets it after the
    spawn); until then nothing is accepted, since no sender can be checked.
    `member(pid)` may replace the tree check (default: `in_tree(pid, root,
    token=token)`).
    """

    def __init__(
        self,
        child: str,
        *,
        watchdog: float | None = None,
        token: str | None = None,
        member: Callable[[int], bool] | None = None,
        directory: str | None = None,
        owner: tuple[int, int] | None = None,
    ) -> None:
        self.child = child
        self.watchdog = watchdog
        self.token = token
        self.root: int | None = None
        self.main_pid: int | None = None
        self.refused: deque[Refused] = deque(maxlen=MAX_REFUSED)
        self.refused_count = 0
        self._member = member
        # mkdtemp makes the directory 0700: only our uid can reach the socket.
        self.directory = tempfile.mkdtemp(prefix="nt-notify-", dir=directory)
        self.path = os.path.join(self.directory, "notify")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            self._sock.setblocking(False)
            self._sock.bind(self.path)
            os.chmod(self.path, 0o600)
            if owner is not None:  # a child run as another user (`user`) must reach it
                os.chown(self.path, *owner)
                os.chown(self.directory, *owner)
        except BaseException:
            self.close()
            raise

    # -- for the owner --------------------------------------------------------------

    def fileno(self) -> int:
        return self._sock.fileno()

    def attach(self, pid: int) -> None:
        """The child was spawned as `pid`: its tree may now speak."""
        self.root = pid
        self.main_pid = pid

    def env(self, pid: int | None = None) -> dict[str, str]:
        """The variables to add to the child's environment.

        WATCHDOG_PID is only set when `pid` is known before the exec (a fork);
        without it, sd_watchdog_enabled() holds for every process that sees it.
        """
        env = {"NOTIFY_SOCKET": self.path}
        if self.watchdog is not None:
            env["WATCHDOG_USEC"] = str(max(1, math.floor(self.watchdog * 1_000_000)))
            if pid is not None:
                env["WATCHDOG_PID"] = str(pid)
        return env

    def read(self) -> list[Notification]:
        """The datagrams waiting now, parsed and checked; never blocks."""
        out: list[Notification] = []
        for _ in range(_BATCH):
            try:
                data, ancdata, flags, _addr = self._sock.recvmsg(
                    MAX_DATAGRAM + 1, socket.CMSG_SPACE(_CREDS.size)
                )
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break  # closed under us
            pid = _close_fds_and_get_pid(ancdata)
            note = self._accept(data, flags, pid)
            if note is not None:
                out.append(note)
        return out

    def close(self) -> None:
        """Close the socket and remove it and its directory (idempotent)."""
        self._sock.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> NotifyEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- checks ---------------------------------------------------------------------

    def _refuse(self, pid: int | None, why: str) -> None:
        self.refused_count += 1
        self.refused.append(Refused(pid, why))

    def _in_tree(self, pid: int) -> bool:
        if self._member is not None:
            return self._member(pid)
        if self.root is None:
            return False
        roots = {self.root, self.main_pid or self.root}
        return any(in_tree(pid, r, token=self.token) for r in roots)

    def _accept(self, data: bytes, flags: int, pid: int | None) -> Notification | None:
        if pid is None:
            self._refuse(None, "no sender credentials")
            return None
        if len(data) > MAX_DATAGRAM or flags & socket.MSG_TRUNC:
            self._refuse(pid, f"datagram larger than {MAX_DATAGRAM} bytes, dropped")
            return None
        if self._member is None and proc_stat(pid) is None:
            # Gone since it sent. The child's first process may be (a daemon's parent
            # says READY=1 and MAINPID= and exits at once, and the launcher reaps it
            # before we read): its pid is known, and no other process holds it now.
            # Any other sender could not be checked.
            if pid != self.root:
                self._refuse(pid, "sender exited before its message could be checked")
                return None
            return self._parse(pid, data.decode("utf-8", "replace"))
        if not self._in_tree(pid):
            self._refuse(pid, "sender is not a process of this child")
            return None
        return self._parse(pid, data.decode("utf-8", "replace"))

    def _parse(self, pid: int, text: str) -> Notification:
        fields: dict[str, object] = {}
        for line in text.split("\n"):
            key, sep, value = line.partition("=")
            if not sep:
                continue
            if key == "READY" and value == "1":
                fields["ready"] = True
            elif key == "STATUS":
                fields["status"] = value[:MAX_STATUS]
            elif key == "WATCHDOG" and value in ("1", "trigger"):
                fields["watchdog" if value == "1" else "watchdog_trigger"] = True
            elif key == "STOPPING" and value == "1":
                fields["stopping"] = True
            elif key == "RELOADING" and value == "1":
                fields["reloading"] = True
            elif key == "MAINPID":
                main = self._main_pid(pid, value)
                if main is not None:
                    fields["main_pid"] = main
        return Notification(pid, **fields)  # type: ignore[arg-type]

    def _main_pid(self, sender: int, value: str) -> int | None:
        # ASCII digits only, as systemd reads it: "²" is a digit to str.isdigit(), not to int().
        if not (value.isascii() and value.isdigit()) or not 0 < int(value) < 1 << 22:
            self._refuse(sender, f"MAINPID={value[:20]!r} is not a process id")
            return None
        pid = int(value)
        if not is_alive(pid) or not self._in_tree(pid):
            self._refuse(sender, f"MAINPID={pid} is not a live process of this child")
            return None
        self.main_pid = pid
        return pid


def _close_fds_and_get_pid(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    """The sender's pid from SCM_CREDENTIALS; any passed descriptors are closed unread."""
    pid = None
    for level, kind, payload in ancdata:
        if level != socket.SOL_SOCKET:
            continue
        if kind == socket.SCM_CREDENTIALS and len(payload) >= _CREDS.size:
            pid = _CREDS.unpack_from(payload)[0]
        elif kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
    return pid if pid else None


class ChildNotify:
    """A worker's side of its child's NOTIFY_SOCKET: one endpoint for the worker's
    life (its path, and so the child's environment, stay the same across restarts),
    what the child last said of itself (STATUS=), and its watchdog beats."""

    def __init__(self, spec: ChildSpec) -> None:
        self._spec = spec
        self.endpoint: NotifyEndpoint | None = None
        self.status = ""  # the child's last STATUS= line
        self.beat = 0.0  # when the child last said it was alive (WATCHDOG=1)
        self.triggered = False  # WATCHDOG=trigger: the child asked to be restarted

    def open(self) -> NotifyEndpoint | None:
        """The endpoint, made at the first start of a child with notify_socket."""
        spec = self._spec
        if spec.notify_socket and self.endpoint is None:
            self.endpoint = NotifyEndpoint(
                spec.id, watchdog=spec.watchdog, owner=notify_owner(spec)
            )
        return self.endpoint

    def watch(self, watcher: Any, readable: Callable[[], None]) -> None:
        """Have the tree's watcher (`_sd_notify_watch.py`) call `readable` when the
        socket has something."""
        if self.endpoint is not None:
            watcher.watch(self.endpoint.fileno(), readable)

    def drain(self, proc: Any, take: Callable[[Any, Notification], None]) -> None:
        """What waits on the socket, each note given to `take` while `proc` runs."""
        if self.endpoint is None:
            return
        for note in self.endpoint.read():
            if proc is not None and proc.exit is None:
                take(proc, note)

    def late(self, last_beat: float, now: float) -> float | None:
        """How long since the child last beat (its own beat or its launcher's
        heartbeat); None if it asked to be restarted."""
        triggered, self.triggered = self.triggered, False
        return None if triggered else now - max(self.beat, last_beat)

    def took(self, note: Notification, now: float) -> bool:
        """Keep what `note` says; whether its STATUS= changed."""
        if note.watchdog:
            self.beat = now
        if note.watchdog_trigger:
            self.triggered = True
        if note.status is not None and note.status != self.status:
            self.status = note.status
            return True
        return False

    def close(self) -> None:
        if self.endpoint is not None:
            self.endpoint.close()
