"""Programs that fork themselves into the background (systemd's Type=forking).

Running a program in the foreground is preferred; this is for those that cannot.
A child's *tree* is what nannytree may treat as that child:

- its main process (`root`) and every process whose parent chain reaches it;
- every process still in its process group (a child is spawned as the leader of
  its own group, so the group id is the root's pid, even after the root exited);
- every process whose environment carries the child's token
  (`NANNYTREE_CHILD_TOKEN`, see `child_token()`): what finds a daemon that left
  the group with setsid() and was re-parented away, as most daemons do.

Everything here reads /proc (Linux). Nothing here trusts what a child wrote: a
pid file is read without following a symlink, bounded in size, owned by us (or
root), and the pid it names must be alive and in the child's tree.
"""

from __future__ import annotations

import os
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass

TOKEN_ENV = "NANNYTREE_CHILD_TOKEN"
PID_FILE_MAX = 64  # bytes: a pid and a newline, with room to spare
_PARENT_HOPS = 256  # a parent chain longer than this is not followed


def child_token() -> str:
    """A fresh token to put in a child's environment as TOKEN_ENV (one per start)."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class ProcStat:
    """What /proc/<pid>/stat says about a process."""

    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start: int = 0  # when it started, in clock ticks since boot (see boot_ticks)


def proc_stat(pid: int) -> ProcStat | None:
    """The process's state and ids, or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read(4096)
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces or ')': cut at the last one.
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return ProcStat(
            pid,
            fields[0].decode(),
            int(fields[1]),
            int(fields[2]),
            int(fields[3]),
            int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


_TICKS = os.sysconf("SC_CLK_TCK")


def boot_ticks() -> int:
    """Now, on the clock of ProcStat.start: a process started later has a start >= it."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS)


def is_alive(pid: int) -> bool:
    """True when `pid` runs (a zombie has ended: it counts as dead)."""
    st = proc_stat(pid)
    return st is not None and st.state not in ("Z", "X")


def has_token(pid: int, token: str) -> bool:
    """Whether the process's environment carries `token` as TOKEN_ENV."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read(1 << 20)
    except OSError:
        return False
    return f"{TOKEN_ENV}={token}".encode() in environ.split(b"\0")


def exiting(pid: int) -> bool:
    """True when the process is gone or between its exit and its zombie state: its
    memory is released (/proc reads its environment as empty) but it still runs."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return not any(int(v) for v in f.read().split())
    except (OSError, ValueError):
        return True


def token_of(pid: int) -> str | None:
    """The TOKEN_ENV value in the process's environment, if it has one."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read(1 << 20)
    except OSError:
        return None
    prefix = f"{TOKEN_ENV}=".encode()
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("ascii", "replace")
    return None


def in_tree(pid: int, root: int, *, token: str | None = None) -> bool:
    """True when `pid` belongs to the tree of the child whose main process is `root`."""
    if pid <= 0 or root <= 0:
        return False
    st = proc_stat(pid)
    if st is None:
        return False
    if pid == root or st.pgid == root:
        return True
    current: ProcStat | None = st
    hops = 0
    while current is not None and current.ppid > 1 and hops < _PARENT_HOPS:
        if current.ppid == root:
            return True
        current, hops = proc_stat(current.ppid), hops + 1
    return token is not None and has_token(pid, token)


def _all_pids() -> Iterator[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def detached_descendants(root: int, *, token: str | None = None) -> list[int]:
    """Live processes of `root`'s tree other than `root`, e.g. after it exited 0.

    A first process that exited 0 while this is not empty has daemonized itself:
    the caller says so ("set pid_file=... or run it in the foreground") instead
    of counting a normal exit.
    """
    me = os.getpid()
    return sorted(
        pid
        for pid in _all_pids()
        if pid not in (root, me) and is_alive(pid) and in_tree(pid, root, token=token)
    )


class PidFileError(Exception):
    """The pid file is missing, unsafe or names no live process of the child's tree."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"pid file {path!r}: {problem}")


def read_pid_file(path: str | os.PathLike[str]) -> int:
    """The pid a pid file holds: a regular file we (or root) own, not a symlink, bounded.

    Raises PidFileError saying what is wrong; FileNotFoundError is a PidFileError
    too (the daemon may not have written it yet: the caller retries until its
    start_timeout).
    """
    name = os.fspath(path)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    try:
        fd = os.open(name, flags)
    except FileNotFoundError:
        raise PidFileError(name, "does not exist (yet)") from None
    except OSError as e:
        if os.path.islink(name):
            raise PidFileError(
                name, "is a symbolic link; point pid_file at the file itself"
            ) from None
        raise PidFileError(name, f"cannot be opened ({e.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PidFileError(name, "is not a regular file")
        if info.st_uid not in (os.getuid(), 0):
            raise PidFileError(name, f"is owned by uid {info.st_uid}, not by us or root")
        data = os.read(fd, PID_FILE_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > PID_FILE_MAX:
        raise PidFileError(name, f"holds more than {PID_FILE_MAX} bytes; expected one pid")
    text = data.strip()
    if not text.isdigit() or not 0 < int(text) < 1 << 22:
        shown = text[:20].decode("ascii", "backslashreplace")
        raise PidFileError(name, f"holds {shown!r}, not a process id")
    return int(text)


def main_pid_from_file(path: str | os.PathLike[str], root: int, *, token: str | None = None) -> int:
    """The pid a daemon wrote, checked: alive and in the tree of the child started as `root`.

    Raises PidFileError when the file is unsafe, malformed, or names a process
    that is dead or not the child's (a stale file, another program's pid).
    """
    pid = read_pid_file(path)
    if not is_alive(pid):
        raise PidFileError(os.fspath(path), f"names pid {pid}, which is not running")
    if not in_tree(pid, root, token=token):
        raise PidFileError(
            os.fspath(path), f"names pid {pid}, which is not a process this child started"
        )
    return pid


def daemonized_message(child: str, pids: list[int]) -> str:
    """What to tell the operator when a first process exited 0 but left a daemon behind."""
    shown = ", ".join(map(str, pids[:5]))
    return (
        f"child {child!r}: the program daemonized itself (its first process exited 0, "
        f"pid {shown} still runs); set pid_file=... to the file it writes its pid to, "
        "or run it in the foreground (preferred, e.g. nginx -g 'daemon off;')"
    )
