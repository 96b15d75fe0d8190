"""A scripted, deterministic executor for the decision core (OTP's `supervisor_1`).

No OS processes and no real clock: `FakeClock` is read for every input, a
child's "process" is a fresh pid and incarnation, and its start fails only when
the test scripted it with `fail_starts`. Messages for the supervisor (child
exits, restart retries, API calls) go through a FIFO `mailbox`, so a retry
posted by `ScheduleRetry` runs after whatever was queued before it, as in OTP.
A retry's `delay` is not waited out: it is queued at once (advance the clock
yourself when the delay matters to the core).

Everything that happens is recorded: `log` (starts, failed starts and
terminations, in order), `events`, `replies`, `exits` and every action. The
executor checks the core's contract as it goes (one pending answer at a time,
never start a running child, never terminate one without a process) and raises
`ContractViolation` when it is broken. No pytest here: a simulator reuses it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from supervision import (
    BRUTAL_KILL,
    Action,
    ChildSpec,
    Event,
    EventKind,
    Exit,
    ExitKind,
    ExitReason,
    NannyError,
    PauseChild,
    RemoveChild,
    Reply,
    Report,
    ResumeChild,
    ScheduleRetry,
    StartChild,
    Supervisor,
    SupervisorSpec,
    TerminateChild,
    TerminateChildren,
)

ABNORMAL = ExitReason(ExitKind.EXIT_CODE, code=1)
KILLED = ExitReason(ExitKind.KILLED, signal=9)
START_FAILED = ExitReason.start_failure("scripted start failure")


class ContractViolation(AssertionError):
    """The core asked for something its contract rules out."""


class FakeClock:
    """Monotonic seconds that move only when told to (trio's MockClock idea)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def advance(self, dt: float) -> float:
        if dt < 0:
            raise ValueError("time does not go backwards")
        self.now += dt
        return self.now


@dataclass
class Process:
    """One incarnation of a child, as the executor knows it."""

    child_id: str
    pid: int
    incarnation: int
    alive: bool = True
    paused: bool = False  # SIGSTOPped by a PauseChild action
    exit_reason: ExitReason | None = None  # set when it died by itself


@dataclass(frozen=True)
class ChildExit:
    child_id: str
    incarnation: int
    reason: ExitReason
    uptime: float | None = None  # as the executor measured it; None: the core's clock


@dataclass(frozen=True)
class Retry:
    child_id: str


@dataclass(frozen=True)
class Call:
    method: str
    args: tuple[Any, ...]


Message = ChildExit | Retry | Call


@dataclass
class FakeExecutor:
    sup: Supervisor
    clock: FakeClock = field(default_factory=FakeClock)
    mailbox: deque[Message] = field(default_factory=deque)
    processes: dict[str, Process] = field(default_factory=dict)  # current incarnation per id
    log: list[tuple[str, Any]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # RemoveChild actions, in order
    paused_log: list[tuple[str, str]] = field(default_factory=list)  # pause/resume actions
    scripted_failures: dict[str, deque[ExitReason]] = field(default_factory=dict)
    next_pid: int = 1000
    next_incarnation: int = 1

    # -- scripting -------------------------------------------------------------

    def fail_starts(self, child_id: str, times: int = 1, reason: ExitReason = START_FAILED) -> None:
        """Make the next `times` starts of `child_id` fail with `reason`."""
        self.scripted_failures.setdefault(child_id, deque()).extend([reason] * times)

    # -- inputs ----------------------------------------------------------------

    def start(self) -> list[Action]:
        return self.run(self.sup.start(self.clock.now))

    def shutdown(self, reason: ExitReason | None = None) -> list[Action]:
        return self.run(self.sup.shutdown(self.clock.now, reason))

    def call(self, method: str, *args: Any) -> Reply:
        """Make an API call now; a NannyError the core raises becomes Reply(error=...)."""
        try:
            actions = getattr(self.sup, method)(*args, self.clock.now)
        except NannyError as error:
            self.replies.append(Reply(error=error))
            return self.replies[-1]
        before = len(self.replies)
        self.run(actions)
        if len(self.replies) != before + 1:
            raise ContractViolation(f"{method}{args} gave {len(self.replies) - before} replies")
        return self.replies[-1]

    def ok(self, method: str, *args: Any) -> Any:
        """Make an API call that must succeed; return its value."""
        reply = self.call(method, *args)
        if reply.error is not None:
            raise reply.error
        return reply.value

    def kill(
        self, child_id: str, reason: ExitReason = ABNORMAL, uptime: float | None = None
    ) -> ChildExit:
        """The child's current process dies; its exit is queued, not delivered."""
        proc = self.processes[child_id]
        if not proc.alive:
            raise ValueError(f"{child_id!r} is already dead")
        proc.alive, proc.paused, proc.exit_reason = False, False, reason
        message = ChildExit(child_id, proc.incarnation, reason, uptime)
        self.mailbox.append(message)
        return message

    def exit(
        self, child_id: str, reason: ExitReason = ABNORMAL, uptime: float | None = None
    ) -> list[Action]:
        """The child dies and the supervisor handles the exit (and whatever was queued first).

        Retries scheduled while handling it stay queued: drain() runs them.
        """
        message = self.kill(child_id, reason, uptime)
        while True:
            got, actions = self.step()
            if got is message:
                return actions

    def post_exit(self, child_id: str, incarnation: int, reason: ExitReason = ABNORMAL) -> None:
        """Queue an exit notification as is (e.g. one from a stale incarnation)."""
        self.mailbox.append(ChildExit(child_id, incarnation, reason))

    def post_call(self, method: str, *args: Any) -> None:
        """Queue an API call behind what is already in the mailbox."""
        self.mailbox.append(Call(method, args))

    def step(self) -> tuple[Message, list[Action]]:
        """Deliver the oldest message to the supervisor."""
        message = self.mailbox.popleft()
        now = self.clock.now
        if isinstance(message, ChildExit):
            return message, self.run(
                self.sup.child_exited(
                    message.child_id,
                    message.incarnation,
                    message.reason,
                    now,
                    uptime=message.uptime,
                )
            )
        if isinstance(message, Retry):
            return message, self.run(self.sup.retry(message.child_id, now))
        try:
            actions = getattr(self.sup, message.method)(*message.args, now)
        except NannyError as error:
            self.replies.append(Reply(error=error))
            return message, []
        return message, self.run(actions)

    def drain(self, max_steps: int = 10_000) -> None:
        """Deliver messages until the mailbox is empty."""
        for _ in range(max_steps):
            if not self.mailbox:
                return
            self.step()
        raise ContractViolation(f"mailbox not empty after {max_steps} steps")

    # -- carrying out actions --------------------------------------------------

    def run(self, actions: list[Action]) -> list[Action]:
        """Carry out actions and the ones their answers produce; return them all."""
        done: list[Action] = []
        while actions:
            needs_answer = [
                i
                for i, a in enumerate(actions)
                if isinstance(a, StartChild | TerminateChild | TerminateChildren)
            ]
            if needs_answer and needs_answer != [len(actions) - 1]:
                raise ContractViolation(f"answer needed before the end: {actions}")
            done.extend(actions)
            self.actions.extend(actions)
            follow_up: list[Action] = []
            for action in actions:
                if isinstance(action, Report):
                    self.events.append(action.event)
                elif isinstance(action, Reply):
                    self.replies.append(action)
                elif isinstance(action, Exit):
                    if self.exits:
                        raise ContractViolation("a second Exit")
                    self.exits.append(action)
                elif isinstance(action, ScheduleRetry):
                    self.mailbox.append(Retry(action.child_id))
                elif isinstance(action, PauseChild | ResumeChild):
                    self._pause(action.child_id, isinstance(action, PauseChild))
                elif isinstance(action, RemoveChild):
                    self.removed.append(action.child_id)
                elif isinstance(action, StartChild):
                    follow_up = self._start(action.child_id)
                elif isinstance(action, TerminateChild):
                    self.log.append(("terminate", action.child_id))
                    reason = self._stop(action.child_id, action.spec.shutdown)
                    follow_up = self.sup.terminated(action.child_id, reason, self.clock.now)
                else:
                    self.log.append(("terminate_all", action.child_ids))
                    results = {c: self._stop(c, action.shutdown) for c in action.child_ids}
                    follow_up = self.sup.terminated_all(results, self.clock.now)
            actions = follow_up
        return done

    def _start(self, child_id: str) -> list[Action]:
        proc = self.processes.get(child_id)
        if proc is not None and proc.alive:
            raise ContractViolation(f"asked to start {child_id!r}, which is running")
        failures = self.scripted_failures.get(child_id)
        if failures:
            self.log.append(("start_failed", child_id))
            return self.sup.start_failed(child_id, failures.popleft(), self.clock.now)
        pid, incarnation = self.next_pid, self.next_incarnation
        self.next_pid += 1
        self.next_incarnation += 1
        self.processes[child_id] = Process(child_id, pid, incarnation)
        self.log.append(("start", child_id))
        return self.sup.started(child_id, pid, incarnation, self.clock.now)

    def _pause(self, child_id: str, pause: bool) -> None:
        proc = self.processes.get(child_id)
        if proc is None or not proc.alive:
            raise ContractViolation(f"asked to pause/resume {child_id!r}, which has no process")
        if proc.paused == pause:
            raise ContractViolation(f"{child_id!r} is already {'paused' if pause else 'running'}")
        proc.paused = pause
        self.paused_log.append(("pause" if pause else "resume", child_id))

    def _stop(self, child_id: str, shutdown: object) -> ExitReason:
        proc = self.processes.pop(child_id, None)
        if proc is None:
            raise ContractViolation(f"asked to terminate {child_id!r}, which has no process")
        if not proc.alive:  # died by itself; its queued exit will be stale
            assert proc.exit_reason is not None
            return proc.exit_reason
        proc.alive, proc.paused = False, False
        if shutdown == BRUTAL_KILL:
            return ExitReason(ExitKind.KILLED, signal=9)
        return ExitReason.shutdown()

    # -- reading the record ------------------------------------------------------

    def started_ids(self, since: int = 0) -> list[str]:
        return [c for what, c in self.log[since:] if what == "start"]

    def terminated_ids(self, since: int = 0) -> list[str]:
        return [c for what, c in self.log[since:] if what == "terminate"]

    def event_kinds(self, since: int = 0) -> list[EventKind]:
        return [e.context for e in self.events[since:]]

    def pid(self, child_id: str) -> int:
        return self.processes[child_id].pid

    def incarnation(self, child_id: str) -> int:
        return self.processes[child_id].incarnation

    def live(self) -> list[str]:
        return [c for c, p in self.processes.items() if p.alive]


# -- building supervisors for tests ----------------------------------------------


def noop() -> None:
    """A target for specs whose process never really runs."""


def worker(child_id: str, **fields: Any) -> ChildSpec:
    return ChildSpec(child_id, target=noop, **fields)


def running(spec: SupervisorSpec, clock: FakeClock | None = None) -> FakeExecutor:
    """A supervisor for `spec`, started by a fresh executor."""
    ex = FakeExecutor(Supervisor(spec), clock or FakeClock())
    ex.start()
    return ex
