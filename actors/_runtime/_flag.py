"""An Event made only when somebody waits for it.

A tree holds a few of these per child (a process's exit and readiness, an actor's
stop) and almost none is ever waited for. A threading.Event is six objects (a
Condition, its lock and deque, bound methods) that every full collection of the
GC walks: 10,000 children held 180,000 of them (docs/scale.md).
"""

from __future__ import annotations

import threading

_made = threading.Lock()  # guards the making of an Event, held for no longer


class Flag:
    """threading.Event's set/is_set/wait; safe to call from any thread."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        with _made:
            event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        with _made:
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        # Set before its Event was made: that set() found none to wake.
        return self._set or event.wait(timeout)
