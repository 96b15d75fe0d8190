"""Stopping one child's process: its stop signal, the wait its shutdown allows, and
the kill after it. The one implementation: a worker stopping its own process and a
supervisor stopping a run of its children one after the other (docs/scale.md, "A
run of stops") both carry out a `StopOrder`; the worker alone takes the process
back from its watches first and concludes the stop after it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from typing import Any

from supervision import Shutdown

from .._process._port import ChildHandle, ProcessExit

# After SIGKILL, how long the launcher has to report the exit before the OS is asked
# (a launcher that is stopped or hung must not hang a stop).
KILL_REPORT_GRACE = 2.0
GONE_POLL = 0.05


@dataclass(frozen=True)
class StopOrder:
    """A process to stop, and how its spec stops it."""

    proc: Any  # ChildHandle (a Protocol: kept out of the dataclass's type checks)
    stop_signal: int
    group: bool  # kill_mode "group": the stop signal goes to the whole process group
    paused: bool  # SIGSTOPped by a pause: its whole group needs SIGCONT
    shutdown: Shutdown

    def begin(self, deadline: float | None, now: float) -> tuple[float | None, bool]:
        """Send the stop signal; how long to wait for the exit from `now`, and whether
        that is the supervisor's deadline. brutal_kill sends nothing and waits 0."""
        if self.shutdown == "brutal_kill":
            return 0.0, False
        self.proc.send_signal(self.stop_signal, group=self.group)
        if self.stop_signal not in (signal.SIGCONT, signal.SIGKILL):
            # Whether or not we paused it, it may be stopped (a SIGSTOP from anyone, a
            # debugger, a terminal's SIGTSTP), and a stopped process acts on no signal
            # but SIGKILL: without this it would cost its whole shutdown. As systemd.
            self.proc.send_signal(signal.SIGCONT, group=self.group or self.paused)
        return stop_timeout(self.shutdown, deadline, now)


@dataclass(frozen=True)
class StopOutcome:
    """How a stop ended, for whoever concludes it (the worker)."""

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


def carry_out(order: StopOrder, deadline: float | None, now: float) -> StopOutcome:
    """Stop a process (signal, wait, SIGKILL), blocking this thread until it is gone.

    Done once the OS says the process is gone: the launcher's report of its exit
    (the status) may come after."""
    proc = order.proc
    watch = proc.exit_watch()  # opened before the signal: the pid is still this process
    try:
        timeout, capped = order.begin(deadline, now)
        if order.shutdown != "brutal_kill" and watch.wait(timeout):
            return StopOutcome(proc.exit, True, False, timeout, capped)
        killed = order.shutdown != "brutal_kill"
        proc.send_signal(signal.SIGKILL)
        if watch.wait(KILL_REPORT_GRACE):
            return StopOutcome(proc.exit, True, killed, timeout, capped)
        return StopOutcome(kill_and_wait(proc), True, killed, timeout, capped)
    finally:
        watch.close()
