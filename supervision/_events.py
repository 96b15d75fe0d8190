"""Lifecycle events: frozen records with OTP's report fields."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ._info import Health
from ._reasons import ExitKind, ExitReason


class EventKind(StrEnum):
    """What happened in a tree: `EVENT_KIND_MEANINGS` says what each kind means."""

    SUPERVISOR_STARTED = "supervisor_started"
    CHILD_STARTED = "child_started"
    START_FAILED = "start_failed"
    CHILD_EXITED = "child_exited"
    CHILD_TERMINATED = "child_terminated"
    STALE_EXIT_IGNORED = "stale_exit_ignored"
    RESTART_SCHEDULED = "restart_scheduled"
    CHILD_DELETED = "child_deleted"
    CHILD_PAUSED = "child_paused"
    CHILD_RESUMED = "child_resumed"
    MAX_INTENSITY_REACHED = "reached_max_restart_intensity"
    AUTO_SHUTDOWN = "auto_shutdown"
    SUPERVISOR_STOPPED = "supervisor_stopped"
    CHILD_NOTE = "child_note"
    CHILD_SIGNALLED = "child_signalled"
    CHILD_RELOADED = "child_reloaded"
    CHILD_UNHEALTHY = "child_unhealthy"
    CHILD_HEALTHY = "child_healthy"
    PROBE_FAILED = "probe_failed"
    LIVENESS_KILLED = "liveness_killed"
    CHILD_HUNG = "child_hung"
    CHILD_FAILED = "child_failed"
    RESTARTS_RESET = "restarts_reset"
    # `nannytree update` (docs/update.md): each step, by the supervisor it acted on.
    UPDATE_REFUSED = "update_refused"
    UPDATE_CHILD_REMOVED = "update_child_removed"
    UPDATE_CHILD_REPLACED = "update_child_replaced"
    UPDATE_CHILD_ADDED = "update_child_added"
    UPDATE_CHILD_MOVED = "update_child_moved"
    UPDATE_SPEC_STORED = "update_spec_stored"
    UPDATE_SETTINGS_CHANGED = "update_settings_changed"
    UPDATE_STEP_FAILED = "update_step_failed"
    UPDATE_ROLLED_BACK = "update_rolled_back"
    UPDATE_DONE = "update_done"
    # An operator's request through the control socket.
    OPERATOR_ACTION = "operator_action"
    OPERATOR_REFUSED = "operator_refused"


EVENT_KIND_MEANINGS: dict[EventKind, str] = {
    EventKind.SUPERVISOR_STARTED: "A supervisor started, its children with it.",
    EventKind.CHILD_STARTED: "A child started (and passed its readiness); `pid` is its process.",
    EventKind.START_FAILED: "A child could not be started (OTP's start_error); the "
    "reason says why.",
    EventKind.CHILD_EXITED: "A child ended by itself (OTP's child_terminated report); "
    "the reason says how.",
    EventKind.CHILD_TERMINATED: "Its supervisor stopped a child.",
    EventKind.STALE_EXIT_IGNORED: "An exit from an incarnation that is not the current "
    "one was ignored.",
    EventKind.RESTART_SCHEDULED: "A restart was put off (detail: the delay): a failed "
    "restart retried through the mailbox, a backoff's wait, or a subtree pending a node.",
    EventKind.CHILD_DELETED: "A child's spec was deleted (a temporary child that "
    "ended, or delete_child).",
    EventKind.CHILD_PAUSED: "A child's process group was stopped (SIGSTOP).",
    EventKind.CHILD_RESUMED: "A paused child's process group was continued (SIGCONT).",
    EventKind.MAX_INTENSITY_REACHED: "A supervisor reached its restart intensity: it "
    "stops its children and gives up, its parent deciding next (OTP's "
    "reached_max_restart_intensity).",
    EventKind.AUTO_SHUTDOWN: "A supervisor shut itself down: its significant children "
    "ended (detail: its auto_shutdown).",
    EventKind.SUPERVISOR_STOPPED: "A supervisor stopped.",
    EventKind.CHILD_NOTE: "A child misbehaved, or needs a word, without a decision (a "
    "closed channel; a placement naming a node no node has).",
    EventKind.CHILD_SIGNALLED: "signal_child: which signal went to the child.",
    EventKind.CHILD_RELOADED: "reload_child: the check passed and the signal went.",
    EventKind.CHILD_UNHEALTHY: "A liveness probe failed (detail: which, and why).",
    EventKind.CHILD_HEALTHY: "Its liveness probe passed, the first time or after failing.",
    EventKind.PROBE_FAILED: "One liveness probe attempt failed (detail: the failures in a "
    'row of the threshold, "failing 2/3", and why); every failed attempt is one.',
    EventKind.LIVENESS_KILLED: "Its liveness probe failed `failures` times in a row: the "
    "child's stop begins (stop signal, then SIGKILL at its shutdown); its exit follows, "
    "reason unhealthy. A liveness kill, not a crash.",
    EventKind.CHILD_HUNG: "Simulator only: a Hang fault began (the process stays alive "
    "and stops answering). A live tree cannot see a hang: it sees the failed probes or "
    "the missed watchdog that follow.",
    EventKind.CHILD_FAILED: "Its restart_limit was exceeded: left stopped, in state "
    '"failed", its siblings running.',
    EventKind.RESTARTS_RESET: "reset_restarts: an intensity window was emptied.",
    EventKind.UPDATE_REFUSED: "`nannytree update`: the file or a run-time check failed; "
    "nothing was stopped.",
    EventKind.UPDATE_CHILD_REMOVED: "`update`: a child the file dropped was stopped and deleted.",
    EventKind.UPDATE_CHILD_REPLACED: "`update`: a child's new spec runs, at its place.",
    EventKind.UPDATE_CHILD_ADDED: "`update`: a new child started where the file puts it.",
    EventKind.UPDATE_CHILD_MOVED: "`update`: a child's place in the start order changed; "
    "not restarted.",
    EventKind.UPDATE_SPEC_STORED: "`update`: a nested supervisor's new spec was stored "
    "in its parent.",
    EventKind.UPDATE_SETTINGS_CHANGED: "`update`: a supervisor's intensity, period, "
    "auto_shutdown or max_children changed in place, its children running on "
    "(detail: old -> new).",
    EventKind.UPDATE_STEP_FAILED: "`update`: a step failed (detail: which, and why).",
    EventKind.UPDATE_ROLLED_BACK: "`update`: a replacement failed to start; the child runs "
    "its previous spec (detail: how, and its pid).",
    EventKind.UPDATE_DONE: "`update` ended (detail: what was applied, what failed).",
    EventKind.OPERATOR_ACTION: "An operator's request through the control socket (stop, "
    "start, restart, signal, pause, resume, reload, add, shutdown) was carried out; "
    "detail: what was asked, by whom, what came of it.",
    EventKind.OPERATOR_REFUSED: "An operator's request was not carried out (detail: why).",
}
"""What each EventKind means (the site's reference is made from it)."""

SIMULATED_ONLY: frozenset[EventKind] = frozenset((EventKind.CHILD_HUNG,))
"""Kinds only a simulation reports (what a live tree cannot see)."""


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


def liveness_events(
    verdict: str | None,
    health: Health,
    *,
    time: float,
    supervisor: str,
    child_id: str,
    pid: int | None,
    incarnation: int,
) -> list[Event]:
    """The events a liveness verdict (supervision.LivenessCount's) is reported as, live
    and simulated alike: each failed attempt a probe_failed, then child_unhealthy on a
    first failure, liveness_killed at the threshold; child_healthy on a pass after
    none or a failure (a pass after a pass: nothing)."""
    if verdict is None:
        return []

    def event(kind: EventKind, detail: str) -> Event:
        return Event(time, supervisor, kind, child_id, None, pid, incarnation, detail)

    if verdict == "healthy":
        return [event(EventKind.CHILD_HEALTHY, str(health))]
    events = [event(EventKind.PROBE_FAILED, str(health))]
    if verdict == "unhealthy":
        events.append(event(EventKind.CHILD_UNHEALTHY, str(health)))
    elif verdict == "stop":
        detail = (
            f"{health.failures}/{health.threshold} liveness probes failed in a row "
            f"({health.error}); stopping it"
        )
        events.append(event(EventKind.LIVENESS_KILLED, detail))
    return events
