"""The supervisor decision core: OTP's supervisor as a pure state machine.

Inputs (an event and `now`) in, actions out; no threads, processes or clock.
Section numbers refer to docs/otp-semantics.md. One concept in one module, as
OTP's supervisor.erl is: its length is that of the state machine.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._actions import (
    Action,
    Exit,
    PauseChild,
    RemoveChild,
    Reply,
    Report,
    ResumeChild,
    ScheduleRetry,
    StartChild,
    TerminateChild,
    TerminateChildren,
    TerminationResults,
)
from ._errors import (
    AlreadyPresent,
    AlreadyStarted,
    ChildNotFound,
    ChildNotPaused,
    ChildNotRunning,
    ChildRestarting,
    ChildRunning,
    NannyError,
    SimpleOneForOneError,
    SpecError,
    StartError,
    SupervisorNotRunning,
    SupervisorStartError,
    TooManyChildren,
)
from ._events import Event, EventKind
from ._frozen import _new, build
from ._info import ChildCounts, ChildInfo, ChildState, ExitPlan
from ._intensity import RestartWindow
from ._reasons import ExitKind, ExitReason
from .spec._fields import (
    AutoShutdown,
    Restart,
    Strategy,
)
from .spec._placement import Placement, pending_delay
from .spec._restart_limit import NoRestartLimit
from .spec._spec import (
    AnySpec,
    ChildSpec,
    SupervisorSpec,
)

_MASK64 = (1 << 64) - 1
# Ends that the tree caused, not the child: min_uptime does not apply to them.
_NOT_THE_CHILDS_OWN_EXIT = frozenset(
    {ExitKind.MEMORY_LIMIT, ExitKind.LAUNCHER_DIED, ExitKind.ACTOR_CRASHED, ExitKind.SHUTDOWN}
)
# Members read on every decision, bound once: on Python 3.11 reading one from its enum
# class costs several times a module global (the metaclass's __getattr__ hook).
_CHILD_STARTED, _CHILD_EXITED = EventKind.CHILD_STARTED, EventKind.CHILD_EXITED
_TRANSIENT, _TEMPORARY = Restart.TRANSIENT, Restart.TEMPORARY
_DAEMONIZED = ExitKind.DAEMONIZED
_GROUP_OF_ONE = (Strategy.ONE_FOR_ONE, Strategy.SIMPLE_ONE_FOR_ONE)
StartContext = Literal["init", "restart", "api_start", "api_restart"]
# "replace": replace_child's stop; the child stays (even a temporary one) for its new spec.
TerminateContext = Literal["restart", "api", "api_dependent", "shutdown", "replace"]


@dataclass(eq=False)  # identity: list membership and removal must not compare fields
class _Child:
    spec: AnySpec
    state: ChildState = "stopped"
    pid: int | None = None
    incarnation: int = 0
    restarts: int = 0
    last_exit: ExitReason | None = None
    failures: int = 0  # consecutive failed runs, for backoff
    started_at: float | None = None
    next_attempt: float | None = None
    pending_since: float | None = None  # no node could take its restart since then
    placements: int = 0  # failed placement attempts while pending
    # which_children at 10,000 children: a record is rebuilt only when its fields
    # changed (compared, so that the restart path pays nothing for it).
    _info: ChildInfo | None = None
    _info_key: tuple[Any, ...] = ()
    # Its restart_limit's own intensity window (section 4.1), or None without one,
    # and whether its pending restart is its own (its window's) or its group's.
    window: RestartWindow | None = None
    own_restart: bool = False

    def __post_init__(self) -> None:
        self.fresh_window()

    def fresh_window(self) -> None:
        """A new window, as OTP's pattern starts a new supervisor of its own."""
        limit = getattr(self.spec, "restart_limit", None)
        self.window = None if limit is None else RestartWindow(limit.intensity, limit.period)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def alive(self) -> bool:
        """It has a process: running, or paused (a paused process is stopped like a running one)."""
        return self.state in ("running", "paused")

    def info(self) -> ChildInfo:
        key = (
            self.state,
            self.pid,
            self.incarnation,
            self.restarts,
            self.last_exit,
            self.next_attempt,
            self.pending_since,
            self.spec,
        )
        info = self._info
        if info is None or key != self._info_key:
            info = self._info = self._build_info()
            self._info_key = key
        return info

    def _build_info(self) -> ChildInfo:
        return ChildInfo(
            id=self.spec.id,
            pid=self.pid,
            state=self.state,
            restarts=self.restarts,
            type=self.spec.type,
            incarnation=self.incarnation,
            last_exit=self.last_exit,
            restart=self.spec.restart,
            significant=self.spec.significant,
            next_attempt=self.next_attempt if self.state in ("backoff", "pending") else None,
            since=self.pending_since if self.state == "pending" else None,
        )


# The plan's steps: private, made per restart, so plain slotted records (never changed).
@dataclass(slots=True)
class _Start:
    child_id: str
    ctx: StartContext
    settle: float = 0.0


@dataclass(slots=True)
class _Terminate:
    child_id: str
    ctx: TerminateContext


@dataclass(frozen=True)
class _TerminateAll:
    ctx: TerminateContext


@dataclass(frozen=True)
class _Done:
    """The end of an API call that had several steps: answer it."""


@dataclass(frozen=True)
class _Exit:
    reason: ExitReason
    error: NannyError | None


@dataclass(frozen=True)
class _Swap:
    """replace_child, between the stop and the start: the child takes its new spec."""

    child_id: str
    spec: AnySpec


_Step = _Start | _Terminate | _TerminateAll | _Done | _Exit | _Swap
Mode = Literal["new", "running", "shutting_down", "stopped"]


class Supervisor:
    """One supervisor's state and decisions.

    Drive it with `start(now)` and then with the outcome of each action it
    returns, exits (`child_exited`), retries (`retry`) and API calls. External
    inputs must only arrive when the previous action list has been carried out
    (`busy` is False).
    """

    def __init__(self, spec: SupervisorSpec, name: str | None = None, *, seed: int = 0) -> None:
        self.spec = spec
        self._jitter_state = (seed * 0x9E3779B97F4A7C15 + 1) & _MASK64
        self.name = name or spec.id
        self.mode: Mode = "new"
        self._window = RestartWindow(spec.intensity, spec.period)
        # The children in start order, by id: a dict keeps the order and removes in O(1).
        self._children: dict[str, _Child] = {}
        self._by_pid: dict[int, _Child] = {}
        self._plan: deque[_Step] = deque()
        self._pending: _Start | _Terminate | _TerminateAll | None = None
        self._out: list[Action] = []
        self._now = 0.0
        self._next_dynamic = 1
        self._simple = spec.strategy is Strategy.SIMPLE_ONE_FOR_ONE
        if not self._simple:
            for child_spec in spec.children:
                self._add(_Child(child_spec))

    # -- queries -------------------------------------------------------------

    @property
    def restart_times(self) -> tuple[float, ...]:
        """The restarts charged in the intensity window, newest first."""
        return self._window.times()

    def restart_budget(self, now: float) -> int:
        """How many restarts may happen from `now` on without exceeding the intensity."""
        return self._window.budget(now)

    def grant(self, now: float, used: int, granted: int) -> int | None:
        """The spawner's budget for restarts ahead of a decision (docs/acting-ahead.md):
        how many it may have made in all, given that it made `used` of them that this
        supervisor accounted for and was last granted `granted`; None to leave it.

        Never more than the intensity allows at `now`, and nothing while not running
        (a shutdown restarts nothing ahead of its stops). A restart made ahead and then
        charged leaves the sum as it was, so no grant goes out per restart: a higher
        one only once half of the last was used; a lower one at once.
        """
        budget = self.restart_budget(now) if self.mode == "running" else 0
        total = used + budget
        if total < granted or (total > granted and granted - used <= budget // 2):
            return total
        return None

    def exit_plan(self, child_id: str, *, ahead: bool = False) -> ExitPlan | None:
        """What the next exit of this child will mean, when it is decided ahead of time.

        Not None only when that exit would (within `restart_budget`) restart this
        child alone and at once: a running (or starting: the plan its process will
        have), not paused, worker of a one_for_one or simple_one_for_one supervisor
        that runs, with restart permanent ("any" exit) or transient ("abnormal"
        exits only; an exit before `min_uptime` is abnormal), no backoff, no
        start_check (which runs before each start) and, with a restart_limit, room
        in its window for one more restart. An executor may restart the
        child before the exit reaches the core; the core still accounts for the
        exit as usual. `ahead`: for a child of `next_starts()`,
        the plan its process will have once the core asks for its start.
        """
        child = self._children.get(child_id)
        if (
            child is None
            or self.mode != "running"
            or (not ahead and child.state not in ("running", "starting"))
            or child.state == "paused"
            or not isinstance(child.spec, ChildSpec)
            or child.spec.backoff is not None
            # Its own window decides (section 4.1): ahead only while it has room for
            # one more restart, which it keeps until that exit (only time or a group
            # restart changes it meanwhile, and both leave more room, never less).
            or (child.window is not None and child.window.budget(self._now) < 1)
            or child.spec.start_check is not None  # a restart ahead would skip its check
            or self.spec.strategy not in (Strategy.ONE_FOR_ONE, Strategy.SIMPLE_ONE_FOR_ONE)
        ):
            return None
        restart = child.spec.restart
        if restart is Restart.TEMPORARY:
            return None
        return ExitPlan(
            child_id=child.id,
            incarnation=child.incarnation,
            restart_on="any" if restart is Restart.PERMANENT else "abnormal",
            min_uptime=child.spec.min_uptime,
            normal_exit_codes=frozenset(child.spec.normal_exit_codes),
        )

    @property
    def busy(self) -> bool:
        return self._pending is not None or bool(self._plan)

    def next_terminations(self, limit: int | None = None) -> tuple[str, ...]:
        """The children the plan stops after the pending one, in the order it will ask
        (until its next step that is not a stop). Each TerminateChild still comes only
        once the last is answered; this lets a supervisor stop them in that order
        without a round trip through the core between two of them. At most `limit`."""
        ids: list[str] = []
        for step in self._plan:
            if not isinstance(step, _Terminate) or len(ids) == limit:
                break
            child = self._lookup(step.child_id)
            if child is not None and child.alive:
                ids.append(child.id)
        return tuple(ids)

    def next_starts(self, limit: int | None = None) -> tuple[str, ...]:
        """The children the plan starts after the pending start, in the order it will ask
        (until its next step that is not a start). Each StartChild still comes only
        once the last is answered, and a failed start changes the plan: an executor
        may start them ahead of the question only if it starts them in this order,
        none before the last has started, and undoes what the core does not ask for.
        At most `limit`."""
        ids: list[str] = []
        if not isinstance(self._pending, _Start):
            return ()
        for step in self._plan:
            if not isinstance(step, _Start) or len(ids) == limit:
                break
            if self._lookup(step.child_id) is not None:
                ids.append(step.child_id)
        return tuple(ids)

    def which_children(self) -> list[ChildInfo]:
        """Children in OTP's order: reverse start order (newest position first)."""
        return [c.info() for c in reversed(self._children.values())]

    def children(self) -> list[ChildInfo]:
        """Children in start order."""
        return [c.info() for c in self._children.values()]

    def which_child(self, key: str | int) -> ChildInfo:
        return self._find(key).info()

    def count_children(self) -> ChildCounts:
        children = self._children.values()
        sups = sum(1 for c in children if c.spec.type == "supervisor")
        return ChildCounts(
            specs=1 if self._simple else len(self._children),
            active=sum(1 for c in children if c.alive),
            supervisors=sups,
            workers=len(self._children) - sups,
        )

    def get_childspec(self, key: str | int) -> AnySpec:
        child = self._children.get(key) if isinstance(key, str) else None  # per start
        return (child or self._find(key)).spec

    # -- inputs: life cycle --------------------------------------------------

    def start(self, now: float, *, settle: float = 0.0) -> list[Action]:
        """Start every child in spec order (section 2); `settle`: see StartChild (a
        subtree an update replaced or added)."""
        settle = _settle(settle)
        self._expect_idle()
        if self.mode != "new":
            raise RuntimeError(f"supervisor {self.name!r} was already started")
        self._now = now
        self.mode = "running"
        self._report(EventKind.SUPERVISOR_STARTED, detail=self.spec.strategy.value)
        self._plan.extend(_Start(c.id, "init", settle) for c in self._children.values())
        return self._advance()

    def shutdown(self, now: float, reason: ExitReason | None = None) -> list[Action]:
        """Stop every child in reverse start order, then exit (section 7)."""
        self._expect_idle()
        self._now = now
        if self.mode in ("shutting_down", "stopped"):
            return self._flush()
        if self.mode == "new":
            self.mode = "running"
        self._shutdown(reason or ExitReason.shutdown())
        return self._advance()

    def started(
        self,
        child_id: str,
        pid: int | None,
        incarnation: int,
        now: float,
        *,
        ended: ExitReason | None = None,
        uptime: float | None = None,
    ) -> list[Action]:
        """A start done. `ended`: its process ended before the start counted (a one-shot
        step, whose start waits for its exit; `uptime` how long it ran): the exit is
        applied at once, as `child_exited` would, before the next step of the plan."""
        step = self._pending
        if not isinstance(step, _Start) or step.child_id != child_id:
            step = self._answer(_Start, child_id)  # raises: not the answer it waits for
        self._pending = None  # _answer, inlined: once per start
        self._now = now
        child = self._children.get(child_id) or self._get(child_id)
        child.state, child.incarnation = "running", incarnation
        old, by_pid = child.pid, self._by_pid  # _set_pid(child, pid), inlined
        if old is not None and by_pid.get(old) is child:
            del by_pid[old]
        child.pid = pid
        if pid is not None:
            by_pid[pid] = child
        child.started_at, child.next_attempt = now, None
        child.pending_since, child.placements = None, 0
        if step.ctx == "restart":
            child.restarts += 1
        self._report(_CHILD_STARTED, child, pid=pid, incarnation=incarnation)
        if step.ctx in ("api_start", "api_restart"):
            self._out.append(Reply(child.info()))
        if ended is not None:
            self._exited(child, ended, incarnation, uptime)
        if self._plan:
            return self._advance()
        out, self._out = self._out, []  # _advance with nothing planned (a restart), inlined
        return out

    def main_pid_changed(self, child_id: str, incarnation: int, pid: int) -> bool:
        """A running child's main process is now `pid` (a daemon that forked itself:
        its pid file, or MAINPID=). False if that incarnation no longer runs."""
        child = self._children.get(child_id)
        if child is None or child.state != "running" or child.incarnation != incarnation:
            return False
        self._set_pid(child, pid)
        return True

    def start_failed(self, child_id: str, reason: ExitReason, now: float) -> list[Action]:
        step = self._answer(_Start, child_id)
        self._now = now
        child = self._get(child_id)
        child.state, child.last_exit = "stopped", reason
        self._set_pid(child, None)
        if step.ctx == "restart" and self._pend(child, reason):
            self._plan.clear()  # the rest of the group waits with it, as for a retry
            return self._advance()
        self._report(EventKind.START_FAILED, child, reason=reason)
        if step.ctx == "init" and not getattr(child.spec, "required", True):
            # Section 16, beyond OTP: an optional child is left failed; the plan goes on.
            self._fail(child, "required = false: its first start failed; its siblings run")
            if self.mode == "shutting_down":  # significant: auto_shutdown (section 8)
                self._plan = deque(s for s in self._plan if not isinstance(s, _Start))
        elif step.ctx == "init":
            # 2.4: no restart logic; stop the started ones and fail.
            self._plan.clear()
            error = SupervisorStartError(self.name, child_id, reason)
            self._shutdown(
                ExitReason(ExitKind.START_FAILURE, message=f"failed_to_start_child {child_id}"),
                error,
            )
        elif step.ctx == "restart":
            # 5.5: the rest of the group waits; the retry goes through the mailbox.
            self._plan.clear()
            child.state = "restarting"
            if child.spec.backoff is not None:
                child.failures += 1
            delay = self._backoff_delay(child)
            child.next_attempt = now + delay
            detail = f"delay={delay:.3f}"
            self._report(EventKind.RESTART_SCHEDULED, child, reason=reason, detail=detail)
            self._out.append(ScheduleRetry(child_id, delay))
        elif step.ctx == "api_start":
            self._remove(child)
            self._out.append(Reply(error=StartError(self.name, child_id, reason)))
        else:
            self._out.append(Reply(error=StartError(self.name, child_id, reason)))
        return self._advance()

    def terminated(self, child_id: str, reason: ExitReason, now: float) -> list[Action]:
        step = self._answer(_Terminate, child_id)
        self._now = now
        self._after_termination(self._get(child_id), reason, step.ctx)
        if step.ctx == "api":
            self._out.append(Reply(None))
        return self._advance()

    def terminated_all(self, results: TerminationResults, now: float) -> list[Action]:
        step = self._pending
        if not isinstance(step, _TerminateAll):
            raise RuntimeError(f"supervisor {self.name!r} was not terminating children")
        self._pending = None
        self._now = now
        for child in [c for c in self._children.values() if c.id in results]:
            self._after_termination(child, results[child.id], step.ctx)
        return self._advance()

    def child_exited(
        self,
        child_id: str,
        incarnation: int,
        reason: ExitReason,
        now: float,
        *,
        uptime: float | None = None,
    ) -> list[Action]:
        """A child ended by itself (section 3).

        `uptime` is how long its process ran, as the executor measured it (else
        `now` minus the start): an exit sooner than the spec's `min_uptime` counts
        as a failed start (ExitKind.START_FAILURE) and is restarted as an abnormal exit.
        """
        if self._pending is not None or self._plan:
            self._expect_idle()  # raises
        self._now = now
        child = self._children.get(child_id)
        if (
            self.mode != "running"
            or child is None
            or child.state not in ("running", "paused")  # not alive (inlined: every exit)
            or child.incarnation != incarnation
        ):
            self._report(
                EventKind.STALE_EXIT_IGNORED,
                offender=child_id,
                reason=reason,
                incarnation=incarnation,
            )
            return self._flush()
        self._exited(child, reason, incarnation, uptime)
        return self._advance()

    def _exited(
        self, child: _Child, reason: ExitReason, incarnation: int, uptime: float | None
    ) -> None:
        """A running child's process ended by itself: its restart type decides."""
        if getattr(child.spec, "min_uptime", 0.0):
            reason = self._early_exit(child, reason, uptime)
        pid, child.state, child.last_exit = child.pid, "stopped", reason
        if pid is not None and self._by_pid.get(pid) is child:  # _set_pid(child, None), inlined
            del self._by_pid[pid]
        child.pid = None
        self._report(_CHILD_EXITED, child, reason=reason, pid=pid, incarnation=incarnation)
        backoff = child.spec.backoff
        started_at = child.started_at
        if (
            backoff is not None
            and started_at is not None
            and self._now - started_at >= backoff.reset_after
        ):
            child.failures = 0  # it had stayed up long enough: start counting again
        restart = child.spec.restart
        if restart is _TEMPORARY:
            self._remove(child)
            self._auto_shutdown(child)
        elif restart is _TRANSIENT and reason.is_normal:
            if self._simple:  # a dynamic child without a process is gone (OTP's del_child)
                self._remove(child)
            self._auto_shutdown(child)
        elif reason.kind is _DAEMONIZED:
            # Beyond OTP: every restart would fork away again (a configuration error,
            # not a crash), so the child is left failed until the spec is fixed.
            self._fail(child, "a configuration error: set pid_file or run it in the foreground")
        else:
            child.own_restart = child.window is not None
            self._restart(child)

    def _early_exit(self, child: _Child, reason: ExitReason, uptime: float | None) -> ExitReason:
        """min_uptime: an exit too soon after the start is a failed start."""
        min_uptime = child.spec.min_uptime if isinstance(child.spec, ChildSpec) else 0.0
        if not min_uptime or reason.kind in _NOT_THE_CHILDS_OWN_EXIT:
            return reason
        if uptime is None:
            uptime = self._now - (child.started_at if child.started_at is not None else self._now)
        if uptime >= min_uptime:
            return reason
        return ExitReason(
            ExitKind.START_FAILURE,
            code=reason.code,
            signal=reason.signal,
            exc_type=reason.exc_type,
            message=f"exited after {uptime:.3f}s, before min_uptime={min_uptime}s ({reason})",
            traceback=reason.traceback,
            stderr_tail=reason.stderr_tail,
        )

    def retry(self, child_id: str, now: float) -> list[Action]:
        """A restart retry posted by ScheduleRetry came back (section 5.5)."""
        self._expect_idle()
        self._now = now
        child = self._lookup(child_id)
        if self.mode == "running" and child is not None:
            if child.state == "restarting":
                self._restart(child)  # a failed start: charged again (5.5)
            elif child.state == "backoff":
                self._apply_strategy(child)  # charged when the restart was decided
            elif child.state == "pending":
                self._place_again(child)  # charged nothing (docs/multihost.md section 2)
        return self._advance()

    # -- inputs: the API (section 9) -------------------------------------------

    def start_child(
        self, spec_or_args: AnySpec | Sequence[Any] | None, now: float, *, settle: float = 0.0
    ) -> list[Action]:
        """Add and start a child; simple_one_for_one takes extra args instead of a spec.
        `settle`: see StartChild (an update's added child)."""
        settle = _settle(settle)
        self._expect_running()
        self._now = now
        if self._simple:
            spec = self._from_template(spec_or_args)
        else:
            if not isinstance(spec_or_args, ChildSpec | SupervisorSpec):
                raise SpecError(
                    None, "spec", spec_or_args, "start_child takes a ChildSpec or SupervisorSpec"
                )
            spec = spec_or_args
            if spec.significant and self.spec.auto_shutdown is AutoShutdown.NEVER:
                raise SpecError(
                    spec.id,
                    "significant",
                    True,
                    f"supervisor {self.name!r} never auto-shuts down; make the child "
                    "not significant",
                )
            existing = self._lookup(spec.id)
            if existing is not None:
                if existing.alive:
                    raise AlreadyStarted(self.name, spec.id, existing.pid)
                raise AlreadyPresent(self.name, spec.id)
        self._add(_Child(spec))
        self._plan.append(_Start(spec.id, "api_start", settle))
        return self._advance()

    def terminate_child(
        self, key: str | int, now: float, *, with_dependents: bool = False
    ) -> list[Action]:
        """Stop a child, keeping its spec (OTP's terminate_child).

        `with_dependents` (beyond OTP, as systemd's Requires=): in a rest_for_one or
        one_for_all supervisor, the children started after it are stopped first, in
        reverse start order, so none of them is left running without it.
        """
        self._expect_running()
        self._now = now
        if not self._simple and not isinstance(key, str):
            raise ChildNotFound(self.name, str(key))
        child = self._find(key)
        if with_dependents and self.spec.strategy in (Strategy.REST_FOR_ONE, Strategy.ONE_FOR_ALL):
            order = list(self._children.values())
            group = order[order.index(child) :]
            for c in group:
                if c.state in ("restarting", "backoff", "pending"):
                    self._stop_retrying(c)  # ends its restart loop, backoff or wait
            self._plan.extend(_Terminate(c.id, "api_dependent") for c in reversed(group))
            self._plan.append(_Done())
            return self._advance()
        if child.alive:
            self._plan.append(_Terminate(child.id, "api"))
            return self._advance()
        if child.state != "failed":  # failed stays failed: reset or restart it (section 4.1)
            self._stop_retrying(child)  # ends a restart loop, backoff or wait: retry is a no-op
        if self._simple or child.spec.restart is Restart.TEMPORARY:
            self._remove(child)
        self._out.append(Reply(None))
        return self._flush()

    def restart_child(self, key: str, now: float) -> list[Action]:
        self._expect_running()
        self._now = now
        self._refuse_simple("restart_child", "use terminate_child() and start_child()")
        child = self._find(key)
        self._refuse_live(child, "restart")
        child.failures = 0  # a commanded start is no failure
        child.fresh_window()  # and a failed one starts counting again (section 4.1)
        self._plan.append(_Start(child.id, "api_restart"))
        return self._advance()

    def delete_child(self, key: str, now: float) -> list[Action]:
        self._expect_running()
        self._now = now
        self._refuse_simple("delete_child", "terminate_child() removes a dynamic child")
        child = self._find(key)
        self._refuse_live(child, "delete")
        self._remove(child)
        self._out.append(Reply(None))
        return self._flush()

    # -- beyond OTP: an update in place (docs/otp-semantics.md, section 13) ------

    def replace_child(
        self, key: str, spec: AnySpec, now: float, *, settle: float = 0.0
    ) -> list[Action]:
        """Stop the child, give it `spec` at the same place in the start order, start it.

        Answers as restart_child does; a failed start leaves the child stopped with
        the new spec (and why, in its last exit), as restart_child would. `settle`:
        see StartChild (what `nannytree update` passes, so that a replacement that
        exits at once fails its start instead of charging the intensity).
        """
        settle = _settle(settle)
        self._expect_running()
        self._now = now
        self._refuse_simple("replace_child", "stop the tree and run it again")
        child = self._find(key)
        self._check_new_spec(child, spec)
        if child.state in ("restarting", "backoff", "pending"):
            self._stop_retrying(child)
        child.failures = 0
        self._plan.extend(
            (
                _Terminate(child.id, "replace"),
                _Swap(child.id, spec),
                _Start(child.id, "api_restart", settle),
            )
        )
        return self._advance()

    def store_childspec(self, key: str, spec: AnySpec, now: float) -> list[Action]:
        """Keep `spec` for a child without touching it: for a nested supervisor whose
        children an update replaced one by one, so that its next restart starts what
        runs now. A worker's spec only while it has no process (else the spec would
        not be what runs)."""
        self._expect_running()
        self._now = now
        self._refuse_simple("store_childspec", "stop the tree and run it again")
        child = self._find(key)
        self._check_new_spec(child, spec)
        if child.spec.type != "supervisor" or spec.type != "supervisor":
            self._refuse_live(child, "store a new spec for")
        child.spec = spec
        self._out.append(Reply(None))
        return self._flush()

    def change_settings(self, spec: SupervisorSpec, now: float) -> list[Action]:
        """Take `spec`'s intensity, period, auto_shutdown and max_children (and its
        settings as a child, which its parent keeps) in place, its children running
        on: OTP's supervisor code_change. The restarts charged so far stay in the
        window, now measured by the new limits. Its children are not `spec`'s to
        change (each has its own step; a simple_one_for_one keeps its template).
        Raises SpecError when `spec` is another supervisor or changes its strategy
        or placement: those change what each exit means, so an update replaces it."""
        self._expect_running()
        self._now = now
        fixed = ("id", "strategy", "placement", *(("children",) if self._simple else ()))
        for name in fixed:  # a simple_one_for_one's children are its template
            new, old = getattr(spec, name), getattr(self.spec, name)
            if (tuple(new) != tuple(old)) if name == "children" else new != old:
                raise SpecError(
                    self.spec.id,
                    name,
                    new,
                    f"a supervisor's {name} cannot change while it runs (it is {old!r}); "
                    "replace the supervisor instead",
                )
        self.spec = spec  # its children field is read only as a simple_one_for_one's template
        self._window.resize(spec.intensity, spec.period)
        self._out.append(Reply(None))
        return self._flush()

    def insert_child(
        self, spec: AnySpec, after: str | None, now: float, *, settle: float = 0.0
    ) -> list[Action]:
        """start_child at a place: right after the child `after` (None: first)."""
        self._refuse_simple("insert_child", "use start_child()")
        if after is not None:
            self._find(after)
        actions = self.start_child(spec, now, settle=settle)
        self._put_after(spec.id, after)
        return actions

    def move_child(self, key: str, after: str | None, now: float) -> list[Action]:
        """Move a child in the start order, right after `after` (None: first),
        without touching it: the order its next start, stop or restart follows."""
        self._expect_running()
        self._now = now
        self._refuse_simple("move_child", "its children have no order to keep")
        child = self._find(key)
        if after is not None:
            self._find(after)
        self._put_after(child.id, after)
        self._out.append(Reply(None))
        return self._flush()

    def _check_new_spec(self, child: _Child, spec: AnySpec) -> None:
        if not isinstance(spec, ChildSpec | SupervisorSpec) or spec.id != child.id:
            raise SpecError(
                child.id, "id", getattr(spec, "id", spec), f"the new spec must keep id {child.id!r}"
            )
        if spec.significant and self.spec.auto_shutdown is AutoShutdown.NEVER:
            raise SpecError(
                spec.id,
                "significant",
                True,
                f"supervisor {self.name!r} never auto-shuts down; make the child not significant",
            )

    def _put_after(self, child_id: str, after: str | None) -> None:
        if child_id == after or child_id not in self._children:
            return
        moved = self._children.pop(child_id)
        order = list(self._children.items())
        at = 0 if after is None else [k for k, _ in order].index(after) + 1
        order.insert(at, (child_id, moved))
        self._children = dict(order)

    def pause_child(self, key: str | int, now: float) -> list[Action]:
        """Stop a worker's process group (SIGSTOP); it shows as "paused" until resumed."""
        self._expect_running()
        self._now = now
        child = self._with_process(key, "pause it")
        if child.state == "running":
            child.state = "paused"
            self._report(
                EventKind.CHILD_PAUSED, child, pid=child.pid, incarnation=child.incarnation
            )
            self._out.append(PauseChild(child.id))
        self._out.append(Reply(None))
        return self._flush()

    def resume_child(self, key: str | int, now: float) -> list[Action]:
        """Continue a paused worker's process group (SIGCONT)."""
        self._expect_running()
        self._now = now
        child = self._with_process(key, "resume it")
        if child.state != "paused":
            raise ChildNotPaused(self.name, child.id)
        child.state = "running"
        self._report(EventKind.CHILD_RESUMED, child, pid=child.pid, incarnation=child.incarnation)
        self._out.append(ResumeChild(child.id))
        self._out.append(Reply(None))
        return self._flush()

    def reset_restarts(self, key: str | None, now: float) -> list[Action]:
        """An operator's reset: empty the intensity window of this supervisor (`key`
        None) or of child `key`'s restart_limit, so that the next restarts count from
        zero (section 4.1). A child's consecutive failures for its backoff are
        forgotten too, and a "failed" child becomes "stopped" (restart_child starts
        it). Replies how many restarts were in the window; reports restarts_reset.
        Raises NoRestartLimit for a child without a restart_limit."""
        self._expect_running()
        self._now = now
        if key is None:
            count = self._window.clear(now)
            limits = f"intensity={self.spec.intensity} period={self.spec.period:g}"
            self._report(EventKind.RESTARTS_RESET, detail=f"{limits} forgotten={count}")
        else:
            child = self._find(key)
            window = child.window
            if window is None:
                raise NoRestartLimit(self.name, child.id)
            count = window.clear(now)
            child.failures = 0
            if child.state == "failed":
                child.state = "stopped"
            detail = f"{_limit(window)} forgotten={count}"
            self._report(EventKind.RESTARTS_RESET, child, detail=detail)
        self._out.append(Reply(count))
        return self._flush()

    def _with_process(self, key: str | int, what: str) -> _Child:
        child = self._find(key)
        if child.spec.type != "worker" or not child.alive:
            raise ChildNotRunning(self.name, child.id, what)
        return child

    # -- decisions -------------------------------------------------------------

    def _restart(self, child: _Child) -> None:
        """Charge the intensity (section 4), then apply the strategy (section 5)."""
        if child.window is not None and child.own_restart:  # its own limit (section 4.1)
            if child.window.add(self._now):
                self._fail(child)
                return
        elif self._window.add(self._now):
            child.state = "stopped"
            self._report(
                EventKind.MAX_INTENSITY_REACHED,
                child,
                reason=child.last_exit,
                detail=f"intensity={self.spec.intensity} period={self.spec.period}",
            )
            self._shutdown(ExitReason.shutdown("reached_max_restart_intensity"))
            return
        backoff = child.spec.backoff
        if backoff is None and self.spec.strategy in _GROUP_OF_ONE:
            # _apply_strategy's group of one, inlined (every one_for_one restart).
            if child.state in ("running", "paused"):  # alive
                self._plan.append(_Terminate(child.spec.id, "restart"))
            if child.spec.restart is not _TEMPORARY:
                self._plan.append(_Start(child.spec.id, "restart"))
            return
        if backoff is not None and child.state != "restarting":
            child.failures += 1
            delay = self._backoff_delay(child)
            if delay > 0:
                child.state, child.next_attempt = "backoff", self._now + delay
                self._report(
                    EventKind.RESTART_SCHEDULED,
                    child,
                    reason=child.last_exit,
                    detail=f"backoff delay={delay:.3f}",
                )
                self._out.append(ScheduleRetry(child.id, delay))
                return
        self._apply_strategy(child)

    def _fail(self, child: _Child, why: str = "") -> None:
        """Its restart_limit gave up (section 4.1): as OTP's supervisor of its own that
        exits `shutdown`, transient, so not restarted and nothing charged to us. Also
        (`why`) a child that daemonized itself without pid_file (section 14)."""
        child.state, child.next_attempt = "failed", None
        if not why and child.window is not None:
            why = _limit(child.window)
        self._report(EventKind.CHILD_FAILED, child, reason=child.last_exit, detail=why)
        if self._simple:  # a dynamic child that is not restarted is gone, as OTP's
            self._remove(child)
        self._auto_shutdown(child)

    def _backoff_delay(self, child: _Child) -> float:
        backoff = child.spec.backoff
        if backoff is None:
            return 0.0
        # A small deterministic generator: the core stays pure and replayable.
        self._jitter_state = (
            self._jitter_state * 6364136223846793005 + 1442695040888963407
        ) & _MASK64
        unit = (self._jitter_state >> 11) / float(1 << 53)
        return backoff.delay(max(child.failures, 1), unit)

    def _apply_strategy(self, child: _Child) -> None:
        strategy = self.spec.strategy
        if strategy in _GROUP_OF_ONE:
            # A group of one, the common case: its steps without building the group.
            if child.state in ("running", "paused"):  # alive
                self._plan.append(_Terminate(child.spec.id, "restart"))
            if child.spec.restart is not _TEMPORARY:
                self._plan.append(_Start(child.spec.id, "restart"))
            return
        if child.own_restart:
            group = [child]  # restarted by a supervisor of its own: alone (section 4.1)
        else:
            if strategy is Strategy.ONE_FOR_ALL:
                group = list(self._children.values())
            else:
                group = self._rest_from(child)
            for c in group:
                if c.window is not None:
                    # Its own supervisor is restarted with the group, new; a failed
                    # start of it is then the group's failed restart (section 5.5).
                    c.fresh_window()
                    c.own_restart = False
        self._plan.extend(_Terminate(c.id, "restart") for c in reversed(group) if c.alive)
        self._plan.extend(
            _Start(c.id, "restart") for c in group if c.spec.restart is not Restart.TEMPORARY
        )

    def _pend(self, child: _Child, reason: ExitReason) -> bool:
        """A restart that no live node can take waits, charged nothing, until its
        placement's `wait` is over (docs/multihost.md section 2): Kubernetes' Pending
        pod, not OTP's retry loop, which would spend the intensity on a missing node
        within milliseconds and stop the healthy siblings too. False once the wait is
        over (or for any other failure): then it is a failed start as OTP's."""
        placement = getattr(child.spec, "placement", None)
        if not isinstance(placement, Placement) or not Placement.is_unplaceable(reason):
            return False
        now = self._now
        if child.pending_since is None:
            child.pending_since = now
        left = None if placement.wait is None else child.pending_since + placement.wait - now
        if left is not None and left <= 0:
            return False
        child.placements += 1
        delay = pending_delay(child.placements)
        if left is not None:
            delay = min(delay, left)
        child.state, child.next_attempt = "pending", now + delay
        if child.placements == 1:  # one failed start per wait, not one per attempt
            self._report(EventKind.START_FAILED, child, reason=reason)
        detail = f"pending delay={delay:.3f} attempt={child.placements}"
        self._report(EventKind.RESTART_SCHEDULED, child, reason=reason, detail=detail)
        self._out.append(ScheduleRetry(child.id, delay))
        return True

    def _place_again(self, child: _Child) -> None:
        """A pending child's next attempt: it and, under one_for_all and rest_for_one,
        the children after it that the group restart had not started (restarted as
        OTP's rest_for_one retry does); the siblings before it keep running."""
        if self.spec.strategy in (Strategy.ONE_FOR_ONE, Strategy.SIMPLE_ONE_FOR_ONE):
            group = [child]
        else:
            group = self._rest_from(child)
        self._plan.extend(_Terminate(c.id, "restart") for c in reversed(group) if c.alive)
        self._plan.extend(
            _Start(c.id, "restart") for c in group if c.spec.restart is not Restart.TEMPORARY
        )

    @staticmethod
    def _stop_retrying(child: _Child) -> None:
        child.state = "stopped"
        child.pending_since, child.placements = None, 0

    def _auto_shutdown(self, child: _Child) -> None:
        """Section 8: only for a significant child that ended and is not restarted."""
        policy = self.spec.auto_shutdown
        if not child.spec.significant or policy is AutoShutdown.NEVER:
            return
        if policy is AutoShutdown.ALL_SIGNIFICANT and any(
            c.spec.significant
            and c.state in ("running", "paused", "restarting", "backoff", "pending")
            for c in self._children.values()
        ):
            return
        self._report(EventKind.AUTO_SHUTDOWN, child, detail=policy.value)
        self._shutdown(ExitReason.shutdown("auto_shutdown"))

    def _shutdown(self, reason: ExitReason, error: NannyError | None = None) -> None:
        self.mode = "shutting_down"
        for c in self._children.values():
            if c.state in ("restarting", "backoff", "pending"):
                self._stop_retrying(c)
        if self._simple:
            self._plan.append(_TerminateAll("shutdown"))
        else:
            self._plan.extend(
                _Terminate(c.id, "shutdown") for c in reversed(self._children.values())
            )
        self._plan.append(_Exit(reason, error))

    def _after_termination(self, child: _Child, reason: ExitReason, ctx: TerminateContext) -> None:
        pid, incarnation = child.pid, child.incarnation
        child.state, child.last_exit = "stopped", reason
        self._set_pid(child, None)
        self._report(
            EventKind.CHILD_TERMINATED, child, reason=reason, pid=pid, incarnation=incarnation
        )
        if ctx not in ("shutdown", "replace") and (
            self._simple or child.spec.restart is Restart.TEMPORARY
        ):
            self._remove(child)

    # -- executing the plan ------------------------------------------------------

    def _advance(self) -> list[Action]:
        """Emit actions until one needs an answer or the plan is done."""
        while self._plan and self._pending is None:
            step = self._plan.popleft()
            if isinstance(step, _Start):
                child = self._children.get(step.child_id)
                if child is None:
                    continue
                child.state = "starting"
                self._pending = step
                start = _new(StartChild)  # build(), inlined (as _report's records)
                fields = start.__dict__
                fields["child_id"] = step.child_id
                fields["spec"] = child.spec
                fields["settle"] = step.settle
                self._out.append(start)
            elif isinstance(step, _Terminate):
                child = self._children.get(step.child_id)
                if child is None or not child.alive:
                    continue
                child.state = "stopping"
                self._pending = step
                self._out.append(build(TerminateChild, {"child_id": child.id, "spec": child.spec}))
            elif isinstance(step, _Done):
                self._out.append(Reply(None))
            elif isinstance(step, _Swap):
                child = self._lookup(step.child_id)
                if child is not None:
                    child.spec = step.spec
                    child.fresh_window()  # the new spec's restart_limit, if any
            elif isinstance(step, _TerminateAll):
                live = [c for c in self._children.values() if c.alive]
                if not live:
                    continue
                for c in live:
                    c.state = "stopping"
                self._pending = step
                template = self.spec.children[0]
                self._out.append(TerminateChildren(tuple(c.id for c in live), template.shutdown))
            else:
                self.mode = "stopped"
                self._report(EventKind.SUPERVISOR_STOPPED, reason=step.reason)
                self._out.append(Exit(step.reason, step.error))
        out, self._out = self._out, []  # _flush, inlined: twice per restart
        return out

    def _answer(self, kind: type[Any], child_id: str) -> Any:
        step = self._pending
        if not isinstance(step, kind) or step.child_id != child_id:
            raise RuntimeError(
                f"supervisor {self.name!r} got an answer for {child_id!r} it did not ask for "
                f"(pending: {step})"
            )
        self._pending = None
        return step

    def _flush(self) -> list[Action]:
        out, self._out = self._out, []
        return out

    # -- the child list ----------------------------------------------------------

    def _add(self, child: _Child) -> None:
        self._children[child.id] = child

    def _lookup(self, child_id: str) -> _Child | None:
        return self._children.get(child_id)

    def _get(self, child_id: str) -> _Child:
        child = self._lookup(child_id)
        if child is None:
            raise RuntimeError(f"supervisor {self.name!r} has no child {child_id!r}")
        return child

    def _find(self, key: str | int) -> _Child:
        if not isinstance(key, str):
            found = self._by_pid.get(key)
            if found is None:
                raise ChildNotFound(self.name, f"pid {key}")
            return found
        child = self._children.get(key)
        if child is None:
            raise ChildNotFound(self.name, key)
        return child

    def _remove(self, child: _Child) -> None:
        if self._children.get(child.id) is child:
            del self._children[child.id]
            self._set_pid(child, None)
            self._report(EventKind.CHILD_DELETED, child)
            self._out.append(RemoveChild(child.id))

    def _set_pid(self, child: _Child, pid: int | None) -> None:
        if child.pid is not None and self._by_pid.get(child.pid) is child:
            del self._by_pid[child.pid]
        child.pid = pid
        if pid is not None:
            self._by_pid[pid] = child

    def _rest_from(self, child: _Child) -> list[_Child]:
        """rest_for_one's group: `child` and those started after it, found from the
        newest end (the work grows with the group, not with the whole list)."""
        group: list[_Child] = []
        for c in reversed(self._children.values()):
            group.append(c)
            if c is child:
                break
        group.reverse()
        return group

    def _from_template(self, extra: Any) -> AnySpec:
        max_children = self.spec.max_children
        if max_children is not None and len(self._children) >= max_children:
            raise TooManyChildren(self.name, max_children)
        if extra is None:
            extra = ()
        if isinstance(extra, str | bytes | ChildSpec | SupervisorSpec) or not isinstance(
            extra, Sequence
        ):
            raise SpecError(
                None,
                "extra_args",
                extra,
                f"supervisor {self.name!r} is simple_one_for_one: start_child takes a "
                "tuple of extra arguments for its template",
            )
        template = self.spec.children[0]
        child_id = f"{template.id}-{self._next_dynamic}"
        self._next_dynamic += 1
        if isinstance(template, ChildSpec):
            if template.command is not None:
                return dataclasses.replace(
                    template, id=child_id, command=(*template.command, *extra)
                )
            return dataclasses.replace(template, id=child_id, args=(*template.args, *extra))
        if extra:
            raise SpecError(
                template.id, "extra_args", extra, "a supervisor template takes no extra args"
            )
        return dataclasses.replace(template, id=child_id)

    # -- guards -----------------------------------------------------------------

    def _expect_idle(self) -> None:
        if self._pending is not None or self._plan:  # busy, without the property's call
            raise RuntimeError(
                f"supervisor {self.name!r} is still carrying out actions; answer the last one first"
            )

    def _expect_running(self) -> None:
        self._expect_idle()
        if self.mode != "running":
            raise SupervisorNotRunning(self.name)

    def _refuse_simple(self, operation: str, fix: str) -> None:
        if self._simple:
            raise SimpleOneForOneError(self.name, operation, fix)

    def _refuse_live(self, child: _Child, operation: str) -> None:
        if child.alive:
            raise ChildRunning(self.name, child.id, operation)
        if child.state in ("restarting", "backoff", "pending"):
            raise ChildRestarting(self.name, child.id, operation)

    def _report(
        self,
        context: EventKind,
        child: _Child | None = None,
        *,
        offender: str | None = None,
        reason: ExitReason | None = None,
        pid: int | None = None,
        incarnation: int | None = None,
        detail: str = "",
    ) -> None:
        # Two records per decision, equal to build()'s, their fields written straight into
        # the instance's own dict, in field order (no dict to make and set: the hot path).
        event = _new(Event)
        fields = event.__dict__
        fields["time"] = self._now
        fields["supervisor"] = self.name
        fields["context"] = context
        fields["offender"] = child.spec.id if child is not None else offender
        fields["reason"] = reason
        fields["pid"] = pid
        fields["incarnation"] = incarnation
        fields["detail"] = detail
        report = _new(Report)
        report.__dict__["event"] = event
        self._out.append(report)


def _limit(window: RestartWindow) -> str:
    """A child's restart_limit as its events name it."""
    return f"restart_limit intensity={window.intensity} period={window.period:g}"


def _settle(value: float) -> float:
    """An operator's settle time, checked where it comes in (see StartChild)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e6:
        raise ValueError(f"settle must be seconds >= 0 (a number below 1e6), not {value!r}")
    return float(value)
