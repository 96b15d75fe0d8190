"""A pykka future made cheaply: every ask of a pooled actor makes one.

pykka's `ThreadingFuture` waits on a `threading.Condition`: with its lock, deque
and bound methods, six objects for the GC per future. A 10,000-child stop asks
each worker three times (PrepareStop, FinishStop, its actor's stop), and making
those futures was most of the nanny's own time holding the GIL (py-spy --gil,
docs/scale.md). A `LightFuture` is one held lock that `set` releases.
"""

from __future__ import annotations

import _thread
import queue
import sys
from typing import Any

import pykka

__all__ = ["LightFuture"]

_SETTING = _thread.allocate_lock()  # set() checks and sets under it: one setter wins


class LightFuture(pykka.Future[Any]):
    """`pykka.Future` for threads: `get` waits for the one `set` or `set_exception`."""

    def __init__(self) -> None:
        super().__init__()
        self._unset = _thread.allocate_lock()
        self._unset.acquire()
        self._value: Any = None
        self._exc_info: Any = None
        self._done = False

    def get(self, *, timeout: float | None = None) -> Any:
        try:
            return super().get(timeout=timeout)  # a get hook's (map, join, ...)
        except NotImplementedError:
            pass
        if not self._done:
            if timeout is None:
                got = self._unset.acquire()
            elif timeout > 0:
                got = self._unset.acquire(True, timeout)
            else:
                got = self._unset.acquire(False)
            if not got:
                raise pykka.Timeout(f"{timeout} seconds")
            self._unset.release()  # for the next getter
        if self._exc_info is not None:
            exc_type, exc_value, exc_traceback = self._exc_info
            if exc_value is None:
                exc_value = exc_type()
            if exc_value.__traceback__ is not exc_traceback:
                raise exc_value.with_traceback(exc_traceback)
            raise exc_value
        return self._value

    def set(self, value: Any = None) -> None:
        self._finish(value, None)

    def set_exception(self, exc_info: Any = None) -> None:
        assert exc_info is None or len(exc_info) == 3
        self._finish(None, exc_info if exc_info is not None else sys.exc_info())

    def _finish(self, value: Any, exc_info: Any) -> None:
        with _SETTING:
            if self._done or self._get_hook is not None:
                raise queue.Full
            self._value, self._exc_info, self._done = value, exc_info, True
        self._unset.release()
