"""Listening sockets the launcher holds for its children (socket activation), and how a
child gets them: systemd's protocol, fds from 3, LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES.

The launcher binds a socket when a template that names it is first started and
keeps it, by address, while any template naming it is defined: restarts reuse it,
so a connection made while the child is down waits in the listen queue instead of
being refused. The last `Forget` of a template using it closes it LINGER seconds
later, unless a template naming the address is defined meanwhile: a child replaced
by an update (a new worker, a new template) keeps the very socket (docs/sockets.md).
Every socket is close-on-exec in the launcher: only the children that name it get it.

A unix socket's mode is set by the umask around `bind`, never by path afterwards, and
its folder is checked first (`open_folder`: only root can change where its path leads,
though the last folder may be the child's user's); the stale file of an earlier run,
and ours when it closes, are removed through an fd of that folder. A user who can
write the folder cannot make root act on a file of its choosing.
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


SOCKET_MODE = 0o666  # systemd's SocketMode= default
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _Held:
    __slots__ = ("folder", "inode", "name", "sock", "users")

    def __init__(self, sock: socket.socket, folder: int = -1, name: str = "") -> None:
        self.sock = sock
        # A unix socket's file (its folder's fd and its name), removed when it closes.
        self.folder, self.name = folder, name
        self.inode = os.lstat(name, dir_fd=folder).st_ino if folder >= 0 else 0
        self.users: set[int] = set()


class Listeners:
    """The sockets bound for children, by address, each with the templates using it."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self._idle: dict[str, float] = {}  # unused sockets: when each closes (monotonic)

    def fds(self, template: int, sockets: list[list[object]], uid: int = -1) -> list[int]:
        """The fds of a template's sockets ([name, listen, backlog] each), bound now if
        they are not yet; raises SpawnError naming the socket, its address and why.
        `uid`: the child's user (-1: ours), whose folders may hold its sockets."""
        out = []
        for name, listen, backlog in sockets:
            assert isinstance(listen, str) and isinstance(backlog, int)
            held = self._held.get(listen)
            if held is None:
                held = self._held[listen] = _bind(str(name), listen, backlog, uid)
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
    # Files first: once any of them refuses a connection, none is left on disk.
    for held in closing:
        if held.folder >= 0:
            with contextlib.suppress(OSError):
                st = os.lstat(held.name, dir_fd=held.folder)
                if st.st_ino == held.inode:  # ours, not a successor's
                    os.unlink(held.name, dir_fd=held.folder)
    for held in closing:
        held.sock.close()
        if held.folder >= 0:
            os.close(held.folder)


def _bind(name: str, listen: str, backlog: int, uid: int = -1) -> _Held:
    folder = -1
    try:
        if listen.startswith(("/", "@")):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if listen.startswith("/"):
                where, _, base = listen.rpartition("/")
                folder = open_folder(where or "/", uid, f"socket {name!r}")
                _remove_stale(folder, base)
                old = os.umask(0o777 & ~SOCKET_MODE)  # the mode from the start: no chmod after
                try:
                    # By path (its name, as the child reads it): nobody but root can
                    # change where the folders checked lead, and bind follows no
                    # symlink in the last place.
                    sock.bind(listen)
                finally:
                    os.umask(old)
                held = _Held(sock, folder, base)
            else:
                sock.bind("\0" + listen[1:])
        else:
            host, _, port = listen.rpartition(":")
            family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host.strip("[]"), int(port)))
        sock.listen(backlog)
    except UnsafeFolder as exc:
        with contextlib.suppress(NameError):
            sock.close()
        if folder >= 0:
            os.close(folder)
        raise SpawnError(errno.EPERM, str(exc)) from None
    except OSError as exc:
        with contextlib.suppress(NameError):
            sock.close()
        if folder >= 0:
            os.close(folder)
        why = exc.strerror or str(exc)
        holder = _holder(listen) if exc.errno == errno.EADDRINUSE else ""
        raise SpawnError(
            exc.errno,
            f"socket {name!r} cannot listen on {listen}: {why}{holder}",
        ) from None
    return held if folder >= 0 else _Held(sock)


class UnsafeFolder(PermissionError):
    """A unix socket's folder another user could use to redirect root; says the fix."""


def socket_folder_problem(folder: str, uid: int, what: str) -> str | None:
    """Why the launcher would refuse to bind a unix socket in `folder` for a child of
    user `uid` (-1: none), naming `what` and the fix; None if it would not."""
    try:
        os.close(open_folder(folder, uid, what))
    except UnsafeFolder as e:
        return str(e)
    except OSError as e:
        return (
            f"{what}: folder {folder!r} cannot be used ({e.strerror or e}); create it or fix listen"
        )
    return None


def open_folder(path: str, uid: int, what: str) -> int:
    """An O_PATH fd of the folder `path` (absolute), checked so that no one but root
    (or us) can change where the path leads: it is walked from / one folder at a time,
    each folder above the last root's or ours and not writable by others unless sticky
    (/tmp), and a folder in a sticky one root's or ours too (else its owner could
    rename it away). The last folder may also be `uid`'s (the child's user): what it
    does inside is its own. A symlink on the way is followed only if it and its folder
    are root's or ours (/var/run). UnsafeFolder otherwise, naming `what`, the folder
    and the fix; OSError (such as FileNotFoundError) if the path cannot be walked."""
    trusted = {0, os.geteuid()}
    todo, links = os.path.normpath(path), 0
    while True:
        fd = os.open("/", _DIR_FLAGS)
        try:
            here, up = "/", os.fstat(fd)
            parts = [p for p in todo.split("/") if p]
            for i, part in enumerate(parts):
                try:
                    step = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise
                    link = os.lstat(part, dir_fd=fd)
                    if not stat.S_ISLNK(link.st_mode):
                        raise
                    if link.st_uid not in trusted:
                        raise UnsafeFolder(
                            f"{what}: {os.path.join(here, part)} is a symlink of uid "
                            f"{link.st_uid}, who could point it anywhere; give the real path"
                        ) from None
                    links += 1
                    if links > 40:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP)) from None
                    target = os.readlink(part, dir_fd=fd)
                    todo = os.path.normpath(os.path.join(here, target, *parts[i + 1 :]))
                    break
                os.close(fd)
                fd, here = step, os.path.join(here, part)
                st = os.fstat(fd)
                owners = trusted
                if i == len(parts) - 1 and not _shared(up):
                    owners = trusted | ({uid} - {-1})
                _check_folder(st, here, owners, what)
                up = st
            else:
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _shared(st: os.stat_result) -> bool:
    """A folder others may write (sticky: they may not rename what is not theirs)."""
    return bool(st.st_mode & 0o022)


def _check_folder(st: os.stat_result, where: str, owners: set[int], what: str) -> None:
    if st.st_uid not in owners:
        raise UnsafeFolder(
            f"{what}: the folder {where} belongs to uid {st.st_uid}, who could make the "
            "socket's path lead elsewhere; use a folder of root's (a folder of the child's "
            f"user's is fine in one of root's, such as /run/app), `chown root {where}`, "
            "or another path"
        )
    if _shared(st) and not st.st_mode & stat.S_ISVTX:
        raise UnsafeFolder(
            f"{what}: the folder {where} has mode {stat.S_IMODE(st.st_mode):04o}: other "
            f"users may write it; `chmod go-w {where}`, or use another folder"
        )


def _via(folder: int, name: str) -> str:
    """The path of `name` in the folder open as `folder`, through /proc: the kernel
    follows that one link to the very folder checked, whatever its path now holds."""
    return f"/proc/self/fd/{folder}/{name}"


def _remove_stale(folder: int, name: str) -> None:
    """A socket file nobody listens on (left by a previous run) is removed; one that
    answers, or a file that is no socket, is left for bind to refuse."""
    try:
        if not stat.S_ISSOCK(os.lstat(name, dir_fd=folder).st_mode):
            return
    except FileNotFoundError:
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(_via(folder, name))
    except ConnectionRefusedError:
        os.unlink(name, dir_fd=folder)
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
