"""Lifecycle events: frozen records with OTP's report fields."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ._reasons import ExitKind, ExitReason


class EventKind(StrEnum):
    SUPERVISOR_STARTED = "supervisor_started"
    CHILD_STARTED = "child_started"
    START_FAILED = "start_failed"  # OTP's start_error
    CHILD_EXITED = "child_exited"  # ended by itself (OTP's child_terminated report)
    CHILD_TERMINATED = "child_terminated"  # stopped by its supervisor
    STALE_EXIT_IGNORED = "stale_exit_ignored"  # from an incarnation that is not current
    RESTART_SCHEDULED = "restart_scheduled"  # a failed restart is retried via the mailbox
    CHILD_DELETED = "child_deleted"
    CHILD_PAUSED = "child_paused"  # its process group was stopped (SIGSTOP)
    CHILD_RESUMED = "child_resumed"  # and continued (SIGCONT)
    MAX_INTENSITY_REACHED = "reached_max_restart_intensity"
    AUTO_SHUTDOWN = "auto_shutdown"
    SUPERVISOR_STOPPED = "supervisor_stopped"
    CHILD_NOTE = "child_note"  # a child misbehaved, without a decision (a closed channel)
    CHILD_SIGNALLED = "child_signalled"  # signal_child: which signal went to the child
    CHILD_RELOADED = "child_reloaded"  # reload_child: the check passed, the signal went
    CHILD_UNHEALTHY = "child_unhealthy"  # a liveness probe failed (detail: which, why)
    CHILD_HEALTHY = "child_healthy"  # its liveness probe passed, first or after failing
    CHILD_FAILED = "child_failed"  # its restart_limit was exceeded: left stopped, "failed"
    RESTARTS_RESET = "restarts_reset"  # reset_restarts: an intensity window was emptied
    # `nannytree update` (docs/update.md): each step, by the supervisor it acted on.
    UPDATE_REFUSED = "update_refused"  # the file or a run-time check failed: nothing stopped
    UPDATE_CHILD_REMOVED = "update_child_removed"  # stopped and deleted: the file dropped it
    UPDATE_CHILD_REPLACED = "update_child_replaced"  # its new spec runs, at its place
    UPDATE_CHILD_ADDED = "update_child_added"  # started where the file puts it
    UPDATE_CHILD_MOVED = "update_child_moved"  # its place in the start order, not restarted
    UPDATE_SPEC_STORED = "update_spec_stored"  # a nested supervisor's spec, in its parent
    UPDATE_STEP_FAILED = "update_step_failed"  # detail: which step, why
    UPDATE_DONE = "update_done"  # detail: what was applied, what failed
    # An operator's request through the control socket (stop, start, restart, signal,
    # pause, resume, reload, add, shutdown): detail says what was asked, by whom, and
    # what came of it; REFUSED when it was not carried out (detail: why).
    OPERATOR_ACTION = "operator_action"
    OPERATOR_REFUSED = "operator_refused"


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


def event_to_dict(event: Event) -> dict[str, object]:
    """A JSON-ready dict of an event (and of its reason)."""
    reason = event.reason
    return {
        "time": event.time,
        "supervisor": event.supervisor,
        "context": event.context.value,
        "offender": event.offender,
        "reason": None
        if reason is None
        else {k: v for k, v in vars(reason).items() if v not in (None, "")},
        "pid": event.pid,
        "incarnation": event.incarnation,
        "detail": event.detail,
    }


def event_from_dict(data: dict[str, Any]) -> Event:
    """The inverse of event_to_dict."""
    raw = data.get("reason")
    reason = None
    if raw is not None:
        reason = ExitReason(**{**raw, "kind": ExitKind(raw["kind"])})
    return Event(
        time=float(data["time"]),
        supervisor=str(data["supervisor"]),
        context=EventKind(data["context"]),
        offender=data.get("offender"),
        reason=reason,
        pid=data.get("pid"),
        incarnation=data.get("incarnation"),
        detail=str(data.get("detail", "")),
    )
