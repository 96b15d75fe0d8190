"""Delayed calls for a tree (backoff retries, stop timeouts, watchdogs): one thread
and one heap per tree, started on first use, so a crash storm with backoff creates
no thread per retry, and a thousand stops under way are a thousand heap entries."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("nannytree")


class Scheduler:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        with self._cond:
            if self._closed:
                return
            entry = (time.monotonic() + delay, next(self._seq), fn)
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="nannytree-timer", daemon=True
                )
                self._thread.start()
            if self._heap[0] is entry:  # else the thread's wait ends no later than needed
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
                if self._closed:
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:
                log.exception("nannytree timer callback %r failed", fn)
