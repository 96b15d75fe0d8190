"""Listening sockets the launcher holds for its children (socket activation), and how a
child gets them: systemd's protocol, fds from 3, LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES.

The launcher binds a socket when a template that names it is first started and
keeps it, by address, while any template naming it is defined: restarts reuse it,
so a connection made while the child is down waits in the listen queue instead of
being refused. The last `Forget` of a template using it closes it LINGER seconds
later, unless a template naming the address is defined meanwhile: a child replaced
by an update (a new worker, a new template) keeps the very socket (docs/sockets.md).
Every socket is close-on-exec in the launcher: only the children that name it get it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import time

from ._launched import SpawnError
from ._procfs import port_holder

FIRST_FD = 3  # SD_LISTEN_FDS_START
LINGER = 2.0  # seconds an unused socket waits for a successor's template before it closes


class _Held:
    __slots__ = ("inode", "path", "sock", "users")

    def __init__(self, sock: socket.socket, path: str | None) -> None:
        self.sock = sock
        self.path = path  # a unix socket's file, removed when the socket closes
        self.inode = os.stat(path).st_ino if path is not None else 0
        self.users: set[int] = set()


class Listeners:
    """The sockets bound for children, by address, each with the templates using it."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self._idle: dict[str, float] = {}  # unused sockets: when each closes (monotonic)

    def fds(self, template: int, sockets: list[list[object]]) -> list[int]:
        """The fds of a template's sockets ([name, listen, backlog] each), bound now if
        they are not yet; raises SpawnError naming the socket, its address and why."""
        out = []
        for name, listen, backlog in sockets:
            assert isinstance(listen, str) and isinstance(backlog, int)
            held = self._held.get(listen)
            if held is None:
                held = self._held[listen] = _bind(str(name), listen, backlog)
            held.users.add(template)
            self._idle.pop(listen, None)
            out.append(held.sock.fileno())
        return out

    def share(self, template: int, sockets: list[list[object]]) -> None:
        """A template is defined: it shares each of its sockets already open (a child's
        new template, defined before its old one is forgotten, keeps the very socket)."""
        for _, listen, _ in sockets:
            held = self._held.get(str(listen))
            if held is not None:
                held.users.add(template)
                self._idle.pop(str(listen), None)

    def release(self, template: int) -> None:
        """The template is forgotten: each socket no other template uses closes
        LINGER seconds from now, unless a template takes it meanwhile."""
        when = time.monotonic() + LINGER  # one deadline: a template's sockets close together
        for listen, held in self._held.items():
            if template in held.users:
                held.users.discard(template)
                if not held.users:
                    self._idle[listen] = when

    def timeout(self) -> float | None:
        """Seconds until the next unused socket closes (None: none waits)."""
        if not self._idle:
            return None
        return max(0.0, min(self._idle.values()) - time.monotonic())

    def expire(self) -> None:
        """Close the unused sockets whose time is up."""
        if not self._idle:
            return
        now = time.monotonic()
        due = [listen for listen, when in self._idle.items() if when <= now]
        for listen in due:
            del self._idle[listen]
        _close([self._held.pop(listen) for listen in due])

    def close_all(self) -> None:
        _close(list(self._held.values()))
        self._held.clear()
        self._idle.clear()

    def __len__(self) -> int:
        return len(self._held)


def _close(closing: list[_Held]) -> None:
    # Paths first: once any of them refuses a connection, none is left on disk.
    for held in closing:
        if held.path is not None:
            with contextlib.suppress(OSError):
                if os.stat(held.path).st_ino == held.inode:  # ours, not a successor's
                    os.unlink(held.path)
    for held in closing:
        held.sock.close()


def _bind(name: str, listen: str, backlog: int) -> _Held:
    path = None
    try:
        if listen.startswith(("/", "@")):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if listen.startswith("/"):
                path = listen
                _remove_stale(path)
                sock.bind(path)
                os.chmod(path, 0o666)  # systemd's SocketMode= default
            else:
                sock.bind("\0" + listen[1:])
        else:
            host, _, port = listen.rpartition(":")
            family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host.strip("[]"), int(port)))
        sock.listen(backlog)
    except OSError as exc:
        with contextlib.suppress(NameError):
            sock.close()
        why = exc.strerror or str(exc)
        holder = _holder(listen) if exc.errno == errno.EADDRINUSE else ""
        raise SpawnError(
            exc.errno,
            f"socket {name!r} cannot listen on {listen}: {why}{holder}",
        ) from None
    return _Held(sock, path)


def _remove_stale(path: str) -> None:
    """A socket file nobody listens on (left by a previous run) is removed; one that
    answers, or a file that is no socket, is left for bind to refuse."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return
    except FileNotFoundError:
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)
    except OSError:
        pass
    finally:
        probe.close()


def _holder(listen: str) -> str:
    """ "; held by pid N ('comm')" for a TCP port a process listens on, if /proc says."""
    port = listen.rpartition(":")[2]
    found = port_holder(int(port)) if port.isascii() and port.isdigit() else None
    return "" if found is None else f"; held by pid {found[0]} ({found[1]!r})"


def place(fds: list[int], keep: list[int]) -> list[int]:
    """In a child before its exec (or its target): `fds` onto 3, 4, ... (inheritable),
    and the fds in `keep` moved out of their way; returns `keep`'s new numbers."""
    top = FIRST_FD + len(fds)
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top) for fd in fds]
    kept = [
        fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top) if FIRST_FD <= fd < top else fd for fd in keep
    ]
    for i, fd in enumerate(moved):
        os.dup2(fd, FIRST_FD + i)  # the copy is inheritable
        os.close(fd)
    return kept


def listen_env(names: list[str], pid: int) -> dict[str, str]:
    """systemd's variables for a child that got `names`' sockets from fd 3 on."""
    return {
        "LISTEN_FDS": str(len(names)),
        "LISTEN_PID": str(pid),
        "LISTEN_FDNAMES": ":".join(names),
    }


def become(uid: int, gid: int, groups: list[int]) -> None:
    """Take on a user's credentials (in a child, before its exec): its groups first,
    while we may still set them. -1: keep ours."""
    if gid >= 0:
        os.setgroups(groups)
        os.setgid(gid)
    if uid >= 0:
        os.setuid(uid)


class ChildSetup:
    """What a child takes on between its fork and its exec (or its target): its
    template's listening sockets from fd 3, and its user."""

    __slots__ = ("fds", "gid", "groups", "names", "uid")

    def __init__(
        self, fds: list[int], names: list[str], uid: int, gid: int, groups: list[int]
    ) -> None:
        self.fds = fds
        self.names = names
        self.uid, self.gid, self.groups = uid, gid, groups

    def apply(self, keep: list[int]) -> list[int]:
        """In the child: the credentials, then the sockets; `keep`'s new fd numbers."""
        become(self.uid, self.gid, self.groups)
        return place(self.fds, keep) if self.fds else keep

    def env(self, pid: int) -> dict[str, str]:
        return listen_env(self.names, pid) if self.fds else {}
