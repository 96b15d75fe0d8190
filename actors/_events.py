"""The tree's event log: one per root tree, shared by its nannies.

Every nanny of a tree appends here in its own thread, so the log holds the
whole tree's events in the order they happened. Tests and tools wait on it
(`wait_for`) instead of sleeping.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from supervision import Event

log = logging.getLogger("nannytree")

Listener = Callable[[Event], None]


class EventLog:
    """The ordered lifecycle events of one tree, with waiting and listeners."""

    def __init__(self, max_events: int = 100_000) -> None:
        self._events: list[Event] = []
        self._max = max_events
        self._dropped = 0
        self._cond = threading.Condition()
        self._listeners: list[Listener] = []

    def append(self, event: Event) -> None:
        with self._cond:
            self._events.append(event)
            if len(self._events) > self._max:
                # Bounded memory under a crash storm: drop the oldest tenth.
                cut = self._max // 10
                del self._events[:cut]
                self._dropped += cut
            self._cond.notify_all()
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(event)
            except Exception:
                log.exception("event listener %r failed on %s", listener, event)

    def snapshot(self) -> list[Event]:
        """All events so far, oldest first."""
        with self._cond:
            return list(self._events)

    @property
    def dropped(self) -> int:
        """How many of the oldest events were dropped to bound memory."""
        return self._dropped

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(event)` for each new event; returns the unsubscribe function.

        Listeners run in the thread of the nanny that reported the event: keep them short.
        """
        with self._cond:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._cond:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

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
                for i in range(max(index - base, 0), len(events)):
                    if predicate(events[i]):
                        return events[i]
                index = base + len(events)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    tail = "\n  ".join(str(e) for e in events[-10:])
                    raise TimeoutError(
                        f"no matching event within {timeout}s; last events:\n  {tail}"
                    )
                self._cond.wait(remaining)

    def __len__(self) -> int:
        with self._cond:
            return self._dropped + len(self._events)
