"""The event stream of `nannytree events --follow`: one subscription to the tree's
event log shared by every following client (Fanout), each client's pending events
bounded in bytes (Follower), and whether its connection has gone."""

from __future__ import annotations

import select
import socket
import threading
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervision import Event

    from .. import EventLog

MAX_PENDING = 1 << 20  # bytes of events a `events --follow` client may fall behind


class Follower:
    """One `events --follow` client's pending events, bounded in bytes."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._events: deque[tuple[Event, int]] = deque()
        self._bytes = 0
        self.overflowed = False

    def offer(self, event: Event) -> None:
        size = _event_size(event)
        with self._cond:
            if self.overflowed:
                return
            if self._bytes + size > MAX_PENDING:
                self.overflowed = True  # it cannot keep up: end its stream, say why
            else:
                self._events.append((event, size))
                self._bytes += size
            self._cond.notify()

    def take(self, timeout: float) -> list[Event] | None:
        """The events pending (waiting up to `timeout` for one); None if it fell behind."""
        with self._cond:
            if not self._events and not self.overflowed:
                self._cond.wait(timeout)
            if self.overflowed:
                return None
            events = [e for e, _ in self._events]
            self._events.clear()
            self._bytes = 0
            return events


def _event_size(event: Event) -> int:
    reason = event.reason
    text = len(event.detail) + (len(str(reason)) if reason is not None else 0)
    return 256 + text  # the fixed fields, roughly, plus the texts


class Fanout:
    """One subscription to the event log, shared by every following client, so a
    client costs one thread (its connection's), not two."""

    def __init__(self, log: EventLog) -> None:
        self._lock = threading.Lock()
        self._followers: set[Follower] = set()
        self._unsubscribe = log.subscribe(self._offer)

    def _offer(self, event: Event) -> None:
        with self._lock:
            followers = list(self._followers)
        for follower in followers:
            follower.offer(event)

    def follow(self) -> Follower:
        follower = Follower()
        with self._lock:
            self._followers.add(follower)
        return follower

    def forget(self, follower: Follower) -> None:
        with self._lock:
            self._followers.discard(follower)

    def close(self) -> None:
        self._unsubscribe()


def peer_gone(conn: socket.socket) -> bool:
    readable, _, _ = select.select([conn], [], [], 0)
    if not readable:
        return False
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
