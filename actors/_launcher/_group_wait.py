"""Exits held until the child's processes are gone: a successor never races what its
predecessor left for a port (docs/launcher.md, "A restart waits for the old group").

When a child is reaped the launcher SIGKILLs its process group, but the group's
other processes release what they hold (a listening socket, a lock) only once they
have exited, and a process with much memory takes milliseconds to. So the child's
`Exited` report (on which the host's restart and stop wait) and the launcher's own
restart of an armed child are held until no process of its group is left (nor of
what a command that daemonized itself left behind), or GROUP_WAIT has passed.

Event-driven: each process the launcher reaps while exits are held is looked up by
its group (read from its zombie's /proc stat, O(1)), and only the exits waiting on
that group are checked again, with `killpg(pgid, 0)`: ESRCH once the last process is
reaped. A zombie still counts as a member, but it has closed its files; those that
are ours are reaped at once. A slow poll (GROUP_POLL, only while exits are held)
catches a group emptied by another process's reaping.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ._launched import Launched

# How long an exit is held for its group at most: then it is reported anyway (and
# says how many groups or processes were still there). Under the host's 2 s wait for
# a killed child's report (KILL_REPORT_GRACE), so a stop never falls back to /proc.
GROUP_WAIT = 1.0
GROUP_POLL = 0.05  # s between checks of every held exit, for what no reap of ours shows


def group_gone(pgid: int) -> bool:
    """Whether no process (a zombie counts) is left in the process group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # a member we may not signal: still there
    return False


def process_gone(pid: int) -> bool:
    """Whether the process is gone (reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass(eq=False)
class Held:
    """One child's exit, waiting for its processes to be gone before it is reported."""

    child: Launched
    code: int
    uptime: float
    detached: list[int]
    respawn: bool  # an armed child may be restarted once it is released
    groups: set[int]  # process groups with processes left
    pids: set[int] = field(default_factory=set)  # processes left outside those groups
    since: float = 0.0
    deadline: float = 0.0

    def settle(self) -> bool:
        """Drop what is gone; True once nothing is left."""
        self.groups = {g for g in self.groups if not group_gone(g)}
        self.pids = {p for p in self.pids if not process_gone(p)}
        return not self.groups and not self.pids

    @property
    def left(self) -> int:
        return len(self.groups) + len(self.pids)


class GroupWait:
    """The exits held for their groups. `release(held, waited, left)` reports one (and
    may restart it): `left` 0 when everything was gone, else how many groups or
    processes were still there at its deadline. `reap_group(pgid)` reaps what of that
    group has ended and is ours, telling `reaped` as it goes."""

    def __init__(
        self,
        release: Callable[[Held, float, int], None],
        reap_group: Callable[[int], None],
        limit: float = GROUP_WAIT,
    ) -> None:
        self._release = release
        self._reap_group = reap_group
        self.limit = limit
        self.held: dict[int, Held] = {}  # by the child's pid
        self._by_group: dict[int, list[Held]] = {}
        self._by_pid: dict[int, list[Held]] = {}
        self._keys: dict[int, tuple[frozenset[int], frozenset[int]]] = {}  # what indexes each
        self._poll = 0.0

    def hold(self, held: Held) -> None:
        """Report `held` once its groups and processes are gone; at once if they are."""
        now = time.monotonic()
        held.since, held.deadline = now, now + self.limit
        if held.settle():
            self._release(held, 0.0, 0)
            return
        for pgid in list(held.groups):
            self._reap_group(pgid)  # its zombies that are ours already: their SIGCHLD is read
        if held.settle():
            self._release(held, time.monotonic() - now, 0)
            return
        self.held[held.child.pid] = held
        self._keys[held.child.pid] = (frozenset(held.groups), frozenset(held.pids))
        for pgid in held.groups:
            self._by_group.setdefault(pgid, []).append(held)
        for pid in held.pids:
            self._by_pid.setdefault(pid, []).append(held)
        if len(self.held) == 1:
            self._poll = now + GROUP_POLL

    def child(self, pid: int) -> Launched | None:
        """The child whose exit is held, by its pid."""
        held = self.held.get(pid)
        return held.child if held is not None else None

    def reaped(self, pid: int, pgid: int) -> None:
        """The launcher reaped `pid`, of group `pgid`: the exits waiting on either are
        checked again."""
        if not self.held:
            return
        waiting = [*self._by_group.get(pgid, ()), *self._by_pid.get(pid, ())]
        for held in waiting:
            if self._holds(held) and held.settle():
                self._done(held, 0)

    def timeout(self) -> float | None:
        """How long the loop may wait before a held exit needs a look (None: none held)."""
        if not self.held:
            return None
        # Every hold lasts `limit`: the oldest (first in the dict) runs out first.
        due = min(self._poll, next(iter(self.held.values())).deadline)
        return max(0.0, due - time.monotonic())

    def look(self) -> None:
        """Release the exits whose groups emptied unseen (every GROUP_POLL), and those
        past their deadline."""
        if not self.held:
            return
        now = time.monotonic()
        if now >= self._poll:
            self._poll = now + GROUP_POLL
            for held in list(self.held.values()):
                if self._holds(held) and held.settle():
                    self._done(held, 0)
        for held in list(self.held.values()):
            if held.deadline > now:
                break  # oldest first: the rest are later still
            if self._holds(held):
                self._done(held, 0 if held.settle() else held.left)

    def release_all(self) -> None:
        """Report every held exit now (the launcher is on its way out)."""
        for held in list(self.held.values()):
            if self._holds(held):
                self._done(held, 0 if held.settle() else held.left)

    def _holds(self, held: Held) -> bool:
        """Whether `held` is still held (a release may report, restart and reap)."""
        return self.held.get(held.child.pid) is held

    def _done(self, held: Held, left: int) -> None:
        del self.held[held.child.pid]
        groups, pids = self._keys.pop(held.child.pid)
        for pgid in groups:
            self._drop(self._by_group, pgid, held)
        for pid in pids:
            self._drop(self._by_pid, pid, held)
        self._release(held, time.monotonic() - held.since, left)

    @staticmethod
    def _drop(index: dict[int, list[Held]], key: int, held: Held) -> None:
        entries = index.get(key)
        if entries is None:
            return
        entries[:] = [h for h in entries if h is not held]
        if not entries:
            del index[key]
