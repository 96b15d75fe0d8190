"""Memory limits: one sampling thread per tree sums the RSS of each watched
child's process tree (psutil) and reports the ones over their limit."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import psutil

log = logging.getLogger("nannytree")
SAMPLE_INTERVAL = 0.2  # seconds; RSS has no event to wait for, so it is sampled


def tree_rss(process: psutil.Process) -> int:
    """RSS of a process and all its descendants, in bytes (0 once it is gone)."""
    total = 0
    try:
        procs = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


@dataclass
class _Watched:
    process: psutil.Process
    limit: int
    on_exceeded: Callable[[int], None]


class MemoryWatch:
    """Samples watched children every SAMPLE_INTERVAL s; calls on_exceeded(rss) once."""

    def __init__(self, interval: float = SAMPLE_INTERVAL) -> None:
        self._interval = interval
        self._watched: dict[int, _Watched] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, pid: int, limit: int, on_exceeded: Callable[[int], None]) -> None:
        try:
            process = psutil.Process(pid)
        except psutil.NoSuchProcess:
            return
        with self._lock:
            self._watched[pid] = _Watched(process, limit, on_exceeded)
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="nannytree-memory", daemon=True
                )
                self._thread.start()

    def unwatch(self, pid: int) -> None:
        with self._lock:
            self._watched.pop(pid, None)

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _run(self) -> None:
        while not self._closed.wait(self._interval):
            with self._lock:
                watched = list(self._watched.items())
            for pid, w in watched:
                rss = tree_rss(w.process)
                if rss > w.limit:
                    self.unwatch(pid)
                    try:
                        w.on_exceeded(rss)
                    except Exception:
                        log.exception("memory limit callback for pid %d failed", pid)
