"""Start a process outside its starter's reach: double fork, own session, watched by pidfd.

Ray SIGKILLs the direct children of an actor's worker process (and killpg's its
group) when the worker exits, with no TERM window: a launcher started as a plain
child would die before it could sweep its children, and those in their own
groups would survive. Inside a Ray actor, the tree's launcher is therefore
started through a short trampoline (exec, never fork, from the threaded actor):
it calls setsid(), forks, exits; the grandchild writes its pid to a pipe and
execs the launcher. The host cannot waitpid it any more, so it watches a pidfd
(Linux >= 5.3). `enable()` switches this on for every Launcher of the process.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

_enabled = False

_TRAMPOLINE = """
import os, sys
w = int(sys.argv[1])
os.setsid()
if os.fork():
    os._exit(0)
os.write(w, str(os.getpid()).encode())
os.close(w)
os.execv(sys.argv[2], sys.argv[2:])
"""


def enable(on: bool = True) -> None:
    """Every launcher this process starts from now on detaches (a Ray actor's host does)."""
    global _enabled
    _enabled = on


def wanted() -> bool:
    return _enabled


class DetachedProcess:
    """A process started by double fork in its own session; `wait()` and `kill()` by pidfd."""

    def __init__(self, argv: Sequence[str], pass_fds: Sequence[int], env: Mapping[str, str]):
        r, w = os.pipe()
        try:
            trampoline = subprocess.Popen(
                [sys.executable, "-P", "-c", _TRAMPOLINE, str(w), *argv],
                pass_fds=(*pass_fds, w),
                stdin=subprocess.DEVNULL,
                env=dict(env),
            )
        finally:
            os.close(w)
        with os.fdopen(r, "rb") as pipe:
            text = pipe.read()
        trampoline.wait()
        if not text:
            raise OSError(f"the detaching trampoline failed (status {trampoline.returncode})")
        self.pid = int(text)
        self.returncode: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            self._pidfd = -1  # already gone
            self.returncode = -1

    def wait(self) -> int:
        """Until it exits. Not our child: its status is unknown, so -1 (abnormal)."""
        if self._pidfd >= 0:
            select.select([self._pidfd], [], [])
            os.close(self._pidfd)
            self._pidfd = -1
            self.returncode = -1
        return -1

    def kill(self) -> None:
        if self._pidfd >= 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
