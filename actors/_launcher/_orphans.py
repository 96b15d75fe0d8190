"""Escaped descendants: what a child left running after it ended, re-parented to us.

The launcher and the guardian are child subreapers: a process whose parent
died is re-parented to the nearest of them. Such an orphan outlives its child
only until the next orphan scan (the launcher) or the sweep (the guardian, and
the launcher on its way out) kills it (docs/launcher.md, "Who kills what").
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Collection

from ._procfs import ProcStat, children, children_by_scan, children_file, exiting, proc_stat

# Escaped descendants of exited children are looked for at most this often: the scan
# reads our whole child list, so it stays off the exit path and is coalesced.
ORPHAN_SCAN_INTERVAL = 0.05
SCAN_SHARE = 0.05  # of the launcher's time, at most, spent scanning for orphans
SCAN_CHUNK = 4096  # bytes of the child list read per turn of the loop (~680 pids)


class OrphanScan:
    """When to look for orphans, and the kernel's list of our children read a piece
    per turn of the loop: at 10,000 children the whole list takes ~9 ms to read,
    which no exit may wait behind. `found(pids)` gets the list once it is whole."""

    def __init__(self, me: int, found: Callable[[list[int]], None]) -> None:
        self.me = me
        self._found = found
        self.due: float | None = None  # when the next scan starts
        self.last = 0.0
        self.cost = 0.0  # seconds the last scan took
        self._fd: int | None = None  # the list being read, a piece at a time
        self._data = bytearray()
        self._busy = 0.0

    @property
    def under_way(self) -> bool:
        return self._fd is not None

    def schedule(self) -> None:
        if self.due is None:
            # The scan's own cost sets its pace: at most SCAN_SHARE of the loop's time.
            interval = max(ORPHAN_SCAN_INTERVAL, self.cost / SCAN_SHARE)
            self.due = max(time.monotonic(), self.last + interval)

    def timeout(self) -> float | None:
        """How long the loop may wait for events before the scan needs a turn."""
        if self._fd is not None:
            return 0.0  # a scan under way: its next piece after what is ready
        if self.due is not None:
            return max(0.0, self.due - time.monotonic())
        return None

    def start(self) -> None:
        self.due = None
        self.last = time.monotonic()
        self._busy = 0.0
        try:
            self._fd = os.open(children_file(self.me), os.O_RDONLY)
        except OSError:  # no such list (an old kernel): the slow way, at once
            self._found(children(self.me))
            self.cost = time.monotonic() - self.last
            return
        self._data = bytearray()
        self.step()

    def step(self) -> None:
        """Read the next piece of the list; once it is whole, hand it on."""
        fd = self._fd
        assert fd is not None
        began = time.monotonic()
        try:
            chunk = os.read(fd, SCAN_CHUNK)
        except OSError:
            chunk = b""
        self._data += chunk
        if chunk:
            self._busy += time.monotonic() - began
            return
        os.close(fd)
        self._fd = None
        pids = [int(p) for p in self._data.split()]
        self._data = bytearray()
        self._found(pids)
        self.cost = self._busy + time.monotonic() - began


def kill_orphans(
    me: int,
    pids: list[int],
    known: Collection[int],
    spared: Callable[[ProcStat], bool] | None,
) -> bool:
    """Kill each of our children in `pids` that is not `known` (nor `spared`), and
    its group; True when one was still ending (what it left is seen at a scan after)."""
    again = False
    for pid in pids:
        if pid in known:
            continue
        st = proc_stat(pid)
        if st is not None and st.ppid != me:
            continue  # gone since the list was read, its pid now another's
        if st is None or not st.alive or exiting(pid):
            # Ended or ending (reaped next): what it left was re-parented to us
            # and is seen on its own; its group may hold a daemon still starting.
            again = True
            continue
        if spared is not None and spared(st):
            continue  # maybe a daemon whose pid file or MAINPID= is still to come
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)  # an escapee that leads its own group
    return again


def sweep(me: int) -> None:
    """Kill every process re-parented to us, and its group, until none is left."""
    while True:
        for st in children_by_scan(me):
            with contextlib.suppress(OSError):
                os.kill(st.pid, signal.SIGKILL)
            if st.pgid == st.pid:
                with contextlib.suppress(OSError):
                    os.killpg(st.pid, signal.SIGKILL)
        try:
            # Each reaped process has already handed its orphans to us: rescan after.
            pid, _ = os.waitpid(-1, 0)
            while pid:
                pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
