"""Who reads a running child's NOTIFY_SOCKET: one thread per tree, started on first use.

A child may send STATUS=, MAINPID= or WATCHDOG=1 at any time after its start,
and a sender blocks once the socket's queue is full: someone must read. The
watcher only says "readable" (one-shot: the fd is dropped from its selector
until the owner asks again), so the worker reads and parses in its own thread
and a flooding child costs the watcher one wakeup per drain.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import threading
from collections.abc import Callable

log = logging.getLogger("nannytree")


class NotifyWatcher:
    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._pending: dict[int, Callable[[], None]] = {}  # fd -> callback, to register
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread: threading.Thread | None = None
        self._closed = False

    def watch(self, fd: int, on_readable: Callable[[], None]) -> None:
        """Call `on_readable()` (on the watcher's thread) once `fd` is readable; once."""
        with self._lock:
            if self._closed:
                return
            self._pending[fd] = on_readable
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="nannytree-notify", daemon=True
                )
                self._thread.start()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def forget(self, fd: int) -> None:
        """Stop watching `fd` (before it is closed)."""
        with self._lock:
            self._pending.pop(fd, None)
            self._pending[fd] = _FORGET
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def close(self) -> None:
        with self._lock:
            self._closed = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)
        if self._thread is None or not self._thread.is_alive():
            self._sel.close()
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _apply_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for fd, callback in pending.items():
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.unregister(fd)
            if callback is not _FORGET:
                with contextlib.suppress(ValueError, OSError):
                    self._sel.register(fd, selectors.EVENT_READ, callback)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
            self._apply_pending()
            for key, _ in self._sel.select():
                if key.data is None:
                    with contextlib.suppress(OSError):
                        while os.read(self._wake_r, 4096):
                            pass
                    continue
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self._sel.unregister(key.fd)  # one-shot: the owner drains, then asks again
                try:
                    key.data()
                except Exception:
                    log.exception("nannytree: a NOTIFY_SOCKET callback failed")


def _FORGET() -> None:  # a marker: unregister, do not call
    return None
