"""When a started child counts as started: the spec's `ready` (docs/launcher.md).

"started" at once; "notify" when a Python child calls `actors.child.ready()`; a
number of seconds alive; "sd_notify" when a command says READY=1 on its
NOTIFY_SOCKET; a `ReadyFile` once the file exists; with a pid file, once the
launcher found the main process. Each waits at most `start_timeout`, and not a
moment after the child exited.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable

from supervision import ChildSpec, ReadyFile

from .._process._port import ChildHandle
from ._sd_notify import Notification, NotifyEndpoint
from ._stopping import KILL_REPORT_GRACE

READY_FILE_POLL = 0.005  # seconds; a file appearing has no portable event to wait on
NOTIFY_POLL = 0.05  # seconds; how often a start waiting for READY=1 looks at the exit


def wait_ready(
    spec: ChildSpec,
    proc: ChildHandle,
    notify: NotifyEndpoint | None,
    take_note: Callable[[ChildHandle, Notification], None],
) -> bool:
    """True once the child is ready; False if it exited or start_timeout passed.
    `take_note` gets what an sd_notify child says meanwhile (STATUS=, MAINPID=)."""
    ready, timeout = spec.ready, spec.start_timeout
    if spec.pid_file is not None:
        # The launcher looks for the pid file until start_timeout and then says
        # Forked or Exited: its answer is waited for, a little past that.
        return proc.wait_ready(timeout + KILL_REPORT_GRACE)
    if ready == "started":
        return True
    if ready == "notify":
        return proc.wait_ready(timeout)
    if isinstance(ready, float):
        return proc.wait(ready) is None  # the spec keeps ready < start_timeout
    if ready == "sd_notify":
        assert notify is not None
        return _wait_notify(notify, proc, time.monotonic() + timeout, take_note)
    assert isinstance(ready, ReadyFile)
    deadline = time.monotonic() + timeout
    while not os.path.exists(ready.path):
        if proc.wait(READY_FILE_POLL) is not None or time.monotonic() > deadline:
            return False
    return True


def _wait_notify(
    endpoint: NotifyEndpoint,
    proc: ChildHandle,
    deadline: float,
    take_note: Callable[[ChildHandle, Notification], None],
) -> bool:
    """Until READY=1 on the child's NOTIFY_SOCKET, its exit, or the deadline."""
    while proc.exit is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        readable, _, _ = select.select([endpoint], [], [], min(left, NOTIFY_POLL))
        for note in endpoint.read() if readable else ():
            take_note(proc, note)
            if note.ready:
                return True
    return False
