"""The tree's event log: one per root tree, shared by its nannies.

Every nanny of a tree appends here in its own thread, so the log holds the
whole tree's events in the order they happened. Tests and tools wait on it
(`wait_for`) instead of sleeping. Listeners get events on threads of their own,
so a slow or failing listener never holds up a nanny.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from supervision import Event, event_from_dict, event_to_dict

log = logging.getLogger("nannytree")

Listener = Callable[[Event], None]
LISTENER_QUEUE = 10_000  # events a slow listener may fall behind before it loses some


class _Subscription:
    """One listener on its own daemon thread, fed through a bounded queue."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.queue: queue.SimpleQueue[Event | None] = queue.SimpleQueue()
        self.pending = 0
        self.dropped = 0
        self.failures = 0
        self._lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._run, name=f"nannytree-listener-{listener!r:.40}", daemon=True
        )
        self.thread.start()

    def offer(self, event: Event) -> None:
        with self._lock:
            if self.pending >= LISTENER_QUEUE:
                self.dropped += 1
                if self.dropped == 1:
                    log.warning("event listener %r is too slow: dropping events", self.listener)
                return
            self.pending += 1
        self.queue.put(event)

    def close(self) -> None:
        self.queue.put(None)

    def _run(self) -> None:
        while (event := self.queue.get()) is not None:
            with self._lock:
                self.pending -= 1
            try:
                self.listener(event)
            except Exception:
                self.failures += 1
                log.exception("event listener %r failed on %s", self.listener, event)


MAX_EVENTS = 100_000
MAX_BYTES = 32 << 20
EVENT_OVERHEAD = 600  # bytes of an Event, its ExitReason and their fields, besides texts


def event_size(event: Event) -> int:
    """What an event costs the host, roughly, in bytes: its objects and its texts."""
    size = EVENT_OVERHEAD + len(event.detail) + len(event.supervisor)
    reason = event.reason
    if reason is not None:
        size += len(reason.message) + len(reason.traceback) + len(reason.stderr_tail)
    return size


class EventLog:
    """The ordered lifecycle events of one tree, with waiting and listeners.

    Bounded: at most `max_events` events and about `max_bytes` bytes (texts
    included); past either, the oldest events are dropped (`dropped` counts them).
    """

    def __init__(self, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self._events: deque[Event] = deque()
        self._sizes: deque[int] = deque()
        self._bytes = 0
        self._max = max_events
        self._max_bytes = max_bytes
        self._dropped = 0
        self._cond = threading.Condition()
        self._wakes = 0  # how often `wake` was called: ends the waits of `since`
        self._subscriptions: list[_Subscription] = []

    def append(self, event: Event) -> None:
        size = event_size(event)
        with self._cond:
            self._events.append(event)
            self._sizes.append(size)
            self._bytes += size
            while len(self._events) > self._max or (
                self._bytes > self._max_bytes and len(self._events) > 1
            ):
                # Bounded memory under a crash storm: drop the oldest.
                self._events.popleft()
                self._bytes -= self._sizes.popleft()
                self._dropped += 1
            self._cond.notify_all()
            for sub in self._subscriptions:
                sub.offer(event)

    def snapshot(self) -> list[Event]:
        """All events still kept, oldest first."""
        with self._cond:
            return list(self._events)

    @property
    def bytes(self) -> int:
        """The estimated bytes of the events kept (see event_size)."""
        with self._cond:
            return self._bytes

    @property
    def dropped(self) -> int:
        """How many of the oldest events were dropped to bound memory."""
        return self._dropped

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(event)` for each new event, on a thread of its own.

        Returns the unsubscribe function. A listener that raises is logged and
        kept; one that falls LISTENER_QUEUE events behind loses the newest ones
        (logged once). Neither ever holds up the tree.
        """
        sub = _Subscription(listener)
        with self._cond:
            self._subscriptions.append(sub)

        def unsubscribe() -> None:
            with self._cond:
                if sub in self._subscriptions:
                    self._subscriptions.remove(sub)
            sub.close()

        return unsubscribe

    def since(self, index: int, timeout: float) -> tuple[list[Event], int]:
        """The events from absolute index `index` on (waiting up to `timeout` for one),
        and the index to ask from next. Dropped events are skipped."""
        deadline = time.monotonic() + timeout
        with self._cond:
            wakes = self._wakes
            while True:
                base, end = self._dropped, self._dropped + len(self._events)
                if end > index:
                    start = max(index - base, 0)
                    events = self._events
                    return [events[i] for i in range(start, len(events))], end
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._wakes != wakes:
                    return [], end
                self._cond.wait(remaining)

    def wake(self) -> None:
        """End every wait in `since` now, with what it has (a reader that closes)."""
        with self._cond:
            self._wakes += 1
            self._cond.notify_all()

    def wait_for(
        self,
        predicate: Callable[[Event], bool],
        timeout: float,
        *,
        start: int = 0,
    ) -> Event:
        """Wait until an event at index >= `start` matches; return it.

        Raises TimeoutError naming what was awaited and the last events seen.
        """
        deadline = time.monotonic() + timeout
        index = start
        with self._cond:
            while True:
                base = self._dropped
                events = self._events
                # By index, not islice: skipping to `index` must not walk the whole log
                # (a deque indexes from its nearer end; new events are at the end).
                for i in range(max(index - base, 0), len(events)):
                    event = events[i]
                    if predicate(event):
                        return event
                index = max(index, base + len(events))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    tail = "\n  ".join(str(e) for e in list(events)[-10:])
                    raise TimeoutError(
                        f"no matching event within {timeout}s; last events:\n  {tail}"
                    )
                self._cond.wait(remaining)

    def dump_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write the kept events to a JSON Lines file; returns how many."""
        events = self.snapshot()
        with open(path, "w", encoding="utf-8") as f:
            for event in events:
                f.write(json.dumps(event_to_dict(event)) + "\n")
        return len(events)

    def __len__(self) -> int:
        with self._cond:
            return self._dropped + len(self._events)


def load_events(path: str | os.PathLike[str]) -> list[Event]:
    """Events from a JSON Lines file written by EventLog.dump_jsonl.

    Raises ValueError naming the first line that is not such an event (OSError if
    the file cannot be read).
    """
    events = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                events.append(event_from_dict(_checked(json.loads(line))))
            except (ValueError, OverflowError, RecursionError) as e:
                raise ValueError(f"{os.fspath(path)}, line {number}: not an event: {e}") from None
    return events


_NONE = type(None)
# What dump_jsonl writes: each field's JSON types, the required ones first. Checked
# before event_from_dict, which would take a list for a pid or raise TypeError.
_EVENT_FIELDS: dict[str, tuple[type, ...]] = {
    **{"time": (int, float), "supervisor": (str,), "context": (str,)},
    **{"offender": (str, _NONE), "reason": (dict, _NONE), "pid": (int, _NONE)},
    **{"incarnation": (int, _NONE), "detail": (str,)},
}
_REASON_FIELDS: dict[str, tuple[type, ...]] = {
    **{"kind": (str,), "code": (int, _NONE), "signal": (int, _NONE), "exc_type": (str, _NONE)},
    **{"message": (str,), "traceback": (str,), "stderr_tail": (str,)},
}


def _checked(data: Any) -> dict[str, Any]:
    """`data` if it has an event's fields, of their types; ValueError saying what is not."""
    _check(data, _EVENT_FIELDS, 3, "")
    if data.get("reason") is not None:
        _check(data["reason"], _REASON_FIELDS, 1, "reason.")
        unknown = sorted(set(data["reason"]) - set(_REASON_FIELDS))
        if unknown:
            raise ValueError(f"reason has unknown fields {unknown}")
    return cast(dict[str, Any], data)


def _check(data: Any, fields: dict[str, tuple[type, ...]], required: int, prefix: str) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{prefix or 'the line '}is a {type(data).__name__}, not an object")
    for i, (name, types) in enumerate(fields.items()):
        if name not in data:
            if i < required:
                raise ValueError(f"{prefix}{name} is missing")
        elif type(data[name]) is bool or not isinstance(data[name], types):
            raise ValueError(f"{prefix}{name} is a {type(data[name]).__name__}")
