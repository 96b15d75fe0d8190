"""Lifecycle events: frozen records with OTP's report fields."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ._reasons import ExitReason


class EventKind(StrEnum):
    SUPERVISOR_STARTED = "supervisor_started"
    CHILD_STARTED = "child_started"
    START_FAILED = "start_failed"  # OTP's start_error
    CHILD_EXITED = "child_exited"  # ended by itself (OTP's child_terminated report)
    CHILD_TERMINATED = "child_terminated"  # stopped by its supervisor
    STALE_EXIT_IGNORED = "stale_exit_ignored"  # from an incarnation that is not current
    RESTART_SCHEDULED = "restart_scheduled"  # a failed restart is retried via the mailbox
    CHILD_DELETED = "child_deleted"
    MAX_INTENSITY_REACHED = "reached_max_restart_intensity"
    AUTO_SHUTDOWN = "auto_shutdown"
    SUPERVISOR_STOPPED = "supervisor_stopped"


@dataclass(frozen=True)
class Event:
    """One thing that happened in a tree.

    `supervisor` is the path of the supervisor that reports it ("root/pool"),
    `context` what happened, `offender` the child it is about (None for the
    supervisor itself), `reason` why, where there is one. `time` is the clock
    reading the supervisor was given (monotonic seconds).
    """

    time: float
    supervisor: str
    context: EventKind
    offender: str | None = None
    reason: ExitReason | None = None
    pid: int | None = None
    incarnation: int | None = None
    detail: str = ""

    def __str__(self) -> str:
        who = f"{self.supervisor}/{self.offender}" if self.offender else self.supervisor
        parts = [f"{self.time:.3f}", who, self.context.value]
        if self.pid is not None:
            parts.append(f"pid={self.pid}")
        if self.reason is not None:
            parts.append(f"reason={self.reason}")
        if self.detail:
            parts.append(self.detail)
        return " ".join(parts)
