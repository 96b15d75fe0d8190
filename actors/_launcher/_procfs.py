"""What /proc says about processes: the one reader of it (Linux).

Every function answers for one moment and never raises for a process that is
gone or was never there: a process may end between any two reads.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from . import _sock_diag

_TICKS = os.sysconf("SC_CLK_TCK")
ENVIRON_MAX = 1 << 20  # bytes of a process's environment read at most


@dataclass(frozen=True)
class ProcStat:
    """What /proc/<pid>/stat says about a process."""

    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    start: int = 0  # when it started, in clock ticks since boot (see boot_ticks)

    @property
    def alive(self) -> bool:
        """False for a zombie: it has ended, only its status waits to be reaped."""
        return self.state not in ("Z", "X")


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


def is_alive(pid: int) -> bool:
    """True when `pid` runs (a zombie has ended: it counts as dead)."""
    st = proc_stat(pid)
    return st is not None and st.alive


def exiting(pid: int) -> bool:
    """True when the process is gone or between its exit and its zombie state: its
    memory is released (/proc reads its environment as empty) but it still runs."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return not any(int(v) for v in f.read().split())
    except (OSError, ValueError):
        return True


def environ(pid: int) -> list[bytes]:
    """The process's environment as NAME=VALUE entries ([] when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read(ENVIRON_MAX).split(b"\0")
    except OSError:
        return []


def boot_ticks() -> int:
    """Now, on the clock of ProcStat.start: a process started later has a start >= it."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS)


def children_file(pid: int) -> str:
    """The kernel's list of a process's children (of its main thread: the launcher
    has no other), read whole or a piece at a time."""
    return f"/proc/{pid}/task/{pid}/children"


def kernel_children(pid: int) -> list[int] | None:
    """The children of `pid` from the kernel's list; None when there is no such list
    (a kernel without CONFIG_PROC_CHILDREN, or `pid` is gone)."""
    try:
        with open(children_file(pid), "rb") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return None


def children(pid: int) -> list[int]:
    """The children of `pid`: the kernel's list when it has one, else a scan of /proc."""
    found = kernel_children(pid)
    return found if found is not None else [st.pid for st in children_by_scan(pid)]


def stats() -> Iterator[ProcStat]:
    """Every process there is (a scan of /proc: only on a rare path)."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None:
                yield st


def children_by_scan(pid: int) -> list[ProcStat]:
    """Every process whose parent is `pid`, zombies included, found by a scan of /proc."""
    return [st for st in stats() if st.ppid == pid]


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (a scan of /proc)."""
    return [st.pid for st in stats() if st.pgid == pgid and st.alive]


def listening_inodes(port: int) -> set[int]:
    """The inodes of the sockets listening on TCP `port` (any address, v4 or v6): asked
    of the kernel (sock_diag, cheap at any number of connections), else read from
    /proc/net/tcp."""
    asked = _sock_diag.listening_inodes(port)
    if asked is not None:
        return asked
    return listening_inodes_from_proc(port)


def listening_inodes_from_proc(port: int) -> set[int]:
    """The same, from /proc/net/tcp and tcp6 (every socket of the namespace: slow with
    many connections)."""
    inodes: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, "rb") as f:
                lines = f.read().split(b"\n")[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) >= 10 and cols[3] == b"0A" and int(cols[1].rsplit(b":", 1)[1], 16) == port:
                inodes.add(int(cols[9]))  # 0A: LISTEN
    return inodes


def holds_socket(pid: int, links: set[str]) -> bool:
    """Whether `pid` has an fd on one of these sockets (`socket:[INODE]` links)."""
    fd_dir = f"/proc/{pid}/fd"
    with contextlib.suppress(OSError):
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                if os.readlink(f"{fd_dir}/{fd}") in links:
                    return True
    return False


def port_holder(port: int) -> tuple[int, str] | None:
    """(pid, name) of a process holding a socket that listens on TCP `port` (v4 or v6),
    or None; read only when a bind failed, so a walk of every process is fine."""
    links = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    if not links:
        return None
    for entry in os.listdir("/proc"):
        if entry.isdigit() and holds_socket(int(entry), links):
            try:
                with open(f"/proc/{entry}/comm", "rb") as f:
                    return int(entry), f.read().strip().decode("utf-8", "replace")[:32]
            except OSError:
                continue
    return None
