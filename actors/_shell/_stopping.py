"""Stopping one child's process: the wait its shutdown allows, and the kill after it.

Used by a worker stopping its own process and by a supervisor that stops a run of
its children one after the other itself (docs/scale.md, "A run of stops").
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from dataclasses import dataclass
from typing import Any

from supervision import Shutdown

from .._process._client import ChildProcess, ProcessExit
from .._process._port import ChildHandle

# After SIGKILL, how long the launcher has to report the exit before the OS is asked
# (a launcher that is stopped or hung must not hang a stop).
KILL_REPORT_GRACE = 2.0
GONE_POLL = 0.05


@dataclass(frozen=True)
class StopOrder:
    """A worker's answer to PrepareStop: its process, and how its spec stops it."""

    proc: Any  # ChildHandle (a Protocol: kept out of the dataclass's type checks)
    stop_signal: int
    group: bool  # kill_mode "group": the stop signal goes to the whole process group
    paused: bool  # SIGSTOPped by a pause: it needs SIGCONT to act on the signal
    shutdown: Shutdown


@dataclass(frozen=True)
class StopOutcome:
    """How a stop carried out by the supervisor ended, for the worker's FinishStop."""

    exit: ProcessExit | None  # None: not reported yet (or the stop failed: not dead)
    dead: bool  # the OS says the process is gone; its report follows
    killed: bool  # it outlived its time and got SIGKILL
    timeout: float | None
    capped: bool  # the time was its supervisor's deadline, not its own shutdown


def stop_timeout(
    shutdown: Shutdown, deadline: float | None, now: float
) -> tuple[float | None, bool]:
    """How long a stop waits for the exit from `now`, and whether that is the
    supervisor's `deadline` rather than the child's own `shutdown`."""
    timeout = None if shutdown == "infinity" else float(shutdown)
    capped = False
    if deadline is not None:
        left = max(0.0, deadline - now)
        capped = timeout is None or left < timeout
        timeout = left if capped else timeout
    return timeout, capped


def kill_and_wait(proc: ChildHandle) -> ProcessExit:
    """SIGKILL the group and wait for the exit: from the launcher, or else the OS."""
    proc.send_signal(signal.SIGKILL)
    exit = proc.wait(KILL_REPORT_GRACE)
    while exit is None:
        if proc.gone():
            # The launcher is stopped or hung: it will report nothing. Its group may
            # hold more: kill it again, without waiting for a reaper.
            with contextlib.suppress(OSError):
                os.killpg(proc.pgid, signal.SIGKILL)
            return ProcessExit(proc.pid, -signal.SIGKILL, stderr=proc.output(2))
        proc.send_signal(signal.SIGKILL)
        exit = proc.wait(GONE_POLL)
    return exit


class _ExitWatch:
    """The OS's word that a process is gone (a pidfd turns readable at its exit),
    without waiting for the launcher's report of it; that report is the fallback."""

    def __init__(self, proc: ChildHandle) -> None:
        self._proc = proc
        self._fd: int | None = None
        self._gone = False
        if not isinstance(proc, ChildProcess):
            return  # not an OS process of ours (a test's fake): its own wait it is
        try:
            self._fd = os.pidfd_open(proc.pid)
        except ProcessLookupError:
            self._gone = True  # exited and reaped already
        except (OSError, AttributeError):
            pass  # no pidfds here: the launcher's report it is

    def wait(self, timeout: float | None) -> bool:
        """Whether it is gone within `timeout` seconds (None: for as long as it takes)."""
        if self._gone or self._proc.exit is not None:
            return True
        if self._fd is None:
            return self._proc.wait(timeout) is not None
        poll = select.poll()
        poll.register(self._fd, select.POLLIN)
        self._gone = bool(poll.poll(None if timeout is None else timeout * 1000))
        return self._gone

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def carry_out(order: StopOrder, deadline: float | None, now: float) -> StopOutcome:
    """Stop a process as its worker would (signal, wait, SIGKILL), on this thread.

    Done once the OS says the process is gone: the launcher's report of its exit
    (the status) comes after, to its worker."""
    proc = order.proc
    watch = _ExitWatch(proc)  # opened before the signal: the pid is still this process
    try:
        timeout: float | None = 0.0
        capped = False
        if order.shutdown != "brutal_kill":
            proc.send_signal(order.stop_signal, group=order.group)
            if order.paused:
                proc.send_signal(signal.SIGCONT)
            timeout, capped = stop_timeout(order.shutdown, deadline, now)
            if watch.wait(timeout):
                return StopOutcome(proc.exit, True, False, timeout, capped)
        killed = order.shutdown != "brutal_kill"
        proc.send_signal(signal.SIGKILL)
        if watch.wait(KILL_REPORT_GRACE):
            return StopOutcome(proc.exit, True, killed, timeout, capped)
        return StopOutcome(kill_and_wait(proc), True, killed, timeout, capped)
    finally:
        watch.close()
