"""Fault injection: make a running Python child raise a given exception.

The harness pickles the exception into a private file (a 0700 directory owned
by this user) and sends the child CRASH_SIGNAL; the child's bootstrap handler
loads it and raises it in the target's main thread, as if the target had.
"""

from __future__ import annotations

import contextlib
import os
import time

import cloudpickle

from ._control import CRASH_SIGNAL
from ._runtime_dir import runtime_dir


def _crash_file(pid: int) -> str:
    return os.path.join(runtime_dir(), f"crash-{pid}")


def inject_crash(pid: int, exception: BaseException, timeout: float = 5.0) -> None:
    """Make the Python child `pid` raise `exception` in its target.

    Returns once the child has taken the exception (its file is consumed); the
    signal is sent again while it has not, so a child still in its first
    milliseconds gets it too. TimeoutError if it never does.
    """
    path = _crash_file(pid)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(cloudpickle.dumps(exception))
    deadline = time.monotonic() + timeout
    try:
        while os.path.exists(path):
            if time.monotonic() > deadline:
                raise TimeoutError(f"pid {pid} did not take the injected exception in {timeout}s")
            os.kill(pid, CRASH_SIGNAL)
            for _ in range(50):  # up to 0.5 s for this signal to be handled
                if not os.path.exists(path):
                    return
                time.sleep(0.01)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        raise


def take_crash(pid: int) -> BaseException | None:
    """In the child: the exception injected for it, if any (the file is consumed)."""
    try:
        path = _crash_file(pid)
        with open(path, "rb") as f:
            data = f.read()
        os.unlink(path)
    except OSError:
        return None
    exc = cloudpickle.loads(data)
    return exc if isinstance(exc, BaseException) else None
