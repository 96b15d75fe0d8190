"""How a worker stops its process, one way: `WorkerStop.stop(how, deadline)` is the
entry for the three ways its supervisor asks, which differ only in who waits:

- "now": this thread waits (the worker's own stop, brutal_kill, a kill);
- "later": a `Stop` that waits for the exit as a message, not on a thread (a
  thousand children stopped at once are a thousand timers, not a thousand threads);
- "by_supervisor": the worker lets go of the process for its supervisor to stop it
  in a run of stops (docs/scale.md), which says so with `FinishStop`.

Each takes the process back from its watches first (no memory kill, no restart
ahead of an exit that is ours), carries out one `StopOrder` (`_stopping.py`), and
concludes with the stop's exit reason; the exit a stop caused is its answer, never
an exit to restart. `kill_and_report` is the one kill for the memory limit, the
watchdog and the liveness probe: the stop, then the exit told to the supervisor.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable
from typing import Any, Literal, Protocol

import pykka

from supervision import ChildSpec, ExitKind, ExitReason, signal_name

from .._process._port import ChildHandle, ProcessExit
from .._runtime._actor_loop import LATER
from .._runtime._pooled import blocking
from ._context import TreeContext
from ._exit_gate import ExitGate
from ._messages import ChildExited, StopTimeout
from ._start_output import RunHistory
from ._stopping import KILL_REPORT_GRACE, StopOrder, StopOutcome, carry_out
from ._successor import Ahead


class Owner(Protocol):
    """What of its worker (`_worker.WorkerActor`) a `WorkerStop` uses."""

    spec: ChildSpec
    context: TreeContext
    proc: ChildHandle | None
    incarnation: int
    history: RunHistory
    ahead: Ahead
    gate: ExitGate

    @property
    def actor_ref(self) -> pykka.ActorRef[Any]: ...
    @property
    def paused(self) -> bool: ...
    def hold(self) -> None: ...
    def release_held(self) -> None: ...
    def take_reply(self) -> pykka.Future[Any] | None: ...
    def kill_now(self, proc: ChildHandle) -> ProcessExit: ...
    def tell_parent(self, message: Any) -> None: ...
    def own_exit(self, proc: ChildHandle) -> ChildHandle | None: ...
    def take_back(self, proc: ChildHandle) -> None: ...
    def forget(self, proc: ChildHandle, why: str, *, adopt: bool = False) -> ChildHandle | None: ...
    def classify(self, exit: ProcessExit, *, stop_requested: bool) -> ExitReason: ...


log = logging.getLogger("nannytree")

STOPPED = "a stop came first"

How = Literal["now", "later", "by_supervisor"]


class _Stopping:
    """A stop that waits for the exit (or its timeout) without a thread; or
    (`by_supervisor`) one the supervisor carries out and ends with FinishStop."""

    def __init__(
        self,
        token: int,
        proc: ChildHandle,
        reply: Any,
        timeout: float | None,
        capped: bool,
        *,
        by_supervisor: bool = False,
    ) -> None:
        self.token, self.proc, self.reply = token, proc, reply
        self.timeout, self.capped = timeout, capped
        self.by_supervisor = by_supervisor


class WorkerStop:
    """One worker's stops: the one in progress."""

    def __init__(self, worker: Owner) -> None:
        self._worker = worker
        self._stopping: _Stopping | None = None
        self._count = 0

    @property
    def busy(self) -> bool:
        return self._stopping is not None

    def stop(self, how: How, deadline: float | None = None) -> Any:
        """Stop the process (the one entry); its exit reason, or LATER for "later"
        (the reply comes with the exit), or the `StopOrder` for "by_supervisor"."""
        worker = self._worker
        if worker.proc is not None:
            worker.own_exit(worker.proc)  # the exit to come is ours, not the reader's
        worker.ahead.let_go(STOPPED)
        proc = worker.proc
        if proc is None:
            return worker.history.last_exit or ExitReason.shutdown()
        if how == "by_supervisor":
            return self._hand_over(proc)
        if how == "now" or worker.spec.shutdown == "brutal_kill":
            return self._reason(*self._terminate(proc, deadline))
        return self._later(proc, deadline)

    def kill_and_report(
        self, proc: ChildHandle, reason_of: Callable[[ProcessExit], ExitReason]
    ) -> None:
        """A guard's kill (memory, watchdog, liveness): stopped on this thread, and its
        exit told to the supervisor with the guard's reason."""
        worker = self._worker
        if worker.own_exit(proc) is None:
            return  # it exited by itself first, and that was reported
        exit, _ = self._terminate(proc)
        reason = reason_of(exit)
        worker.history.last_exit = reason
        worker.tell_parent(
            ChildExited(worker.spec.id, worker.incarnation, proc.pid, reason, exit.uptime)
        )

    def crashed(
        self, exc_type: type[BaseException] | None, exc_value: BaseException | None
    ) -> None:
        """The worker failed (a bug): its process killed, the crash reported."""
        worker = self._worker
        proc, worker.proc = worker.proc, None
        if proc is not None:
            worker.gate.close(proc)
            proc.send_signal(signal.SIGKILL)
            with blocking():
                proc.wait(5.0)
            worker.ahead.kill(proc.take_successor(), "its worker failed")
        reason = ExitReason(
            ExitKind.ACTOR_CRASHED,
            exc_type=exc_type.__name__ if exc_type else None,
            message=f"worker actor of {worker.spec.id!r} failed: {exc_value}",
        )
        worker.tell_parent(ChildExited(worker.spec.id, worker.incarnation, None, reason))

    # -- the exit, the timer, the supervisor's word ----------------------------------

    def exited(self, proc: ChildHandle) -> bool:
        """Whether `proc`'s exit is a stop's (then it is the stop's answer)."""
        stopping = self._stopping
        if stopping is None or stopping.proc is not proc:
            return False
        if not stopping.by_supervisor and proc.exit is not None:  # that one ends with FinishStop
            self._finish(proc.exit, "")
        return True

    def timed_out(self, token: int) -> None:
        stopping = self._stopping
        if stopping is None or stopping.token != token:
            return
        proc = stopping.proc
        self._finish(*self._settle(proc, _ran_out(proc, stopping.timeout, stopping.capped)))

    def finished(self, outcome: StopOutcome) -> ExitReason:
        """The supervisor stopped the process in its run (FinishStop)."""
        stopping, worker = self._stopping, self._worker
        if stopping is None or not stopping.by_supervisor:
            return worker.history.last_exit or ExitReason.shutdown()
        proc, self._stopping = stopping.proc, None
        worker.gate.quiet = 0
        reason = self._conclude(proc, *self._settle(proc, outcome))
        worker.release_held()
        return reason

    # -- the three waits ------------------------------------------------------------

    def _later(self, proc: ChildHandle, deadline: float | None) -> Any:
        worker = self._worker
        self._take_back(proc)
        timeout, capped = self._order(proc).begin(deadline, time.monotonic())
        if proc.exit is not None or timeout == 0:  # nothing to wait for
            return self._conclude(proc, *self._settle(proc, _ran_out(proc, timeout, capped)))
        self._count += 1
        self._stopping = _Stopping(self._count, proc, worker.take_reply(), timeout, capped)
        worker.hold()
        if timeout is not None:
            ref, token = worker.actor_ref, self._count

            def ran_out() -> None:
                with contextlib.suppress(pykka.ActorDeadError):
                    ref.tell(StopTimeout(token))

            worker.context.scheduler.call_later(timeout, ran_out)
        if proc.exit is not None:  # exited as we armed the timer: its note may be gone
            self._finish(proc.exit, "")
        return LATER

    def _hand_over(self, proc: ChildHandle) -> StopOrder | ExitReason:
        """Let go of the process for the supervisor to stop it (its run of stops)."""
        if proc.exit is not None:
            return self._conclude(proc, proc.exit, "")
        self._take_back(proc)
        self._worker.gate.quiet = proc.pid
        self._count += 1
        self._stopping = _Stopping(self._count, proc, None, None, False, by_supervisor=True)
        self._worker.hold()
        return self._order(proc)

    def _terminate(
        self, proc: ChildHandle, deadline: float | None = None
    ) -> tuple[ProcessExit, str]:
        """The shutdown protocol on this thread: the stop signal, wait `shutdown` s (or
        until a supervisor's `deadline`), SIGKILL; or at once, or forever."""
        self._take_back(proc)
        with blocking():
            outcome = carry_out(self._order(proc), deadline, time.monotonic())
        exit, note = self._settle(proc, outcome)
        self._worker.forget(proc, STOPPED)
        return exit, note

    # -- concluding -----------------------------------------------------------------

    def _finish(self, exit: ProcessExit, note: str) -> None:
        stopping, self._stopping = self._stopping, None
        assert stopping is not None
        reason = self._conclude(stopping.proc, exit, note)
        if stopping.reply is not None:
            stopping.reply.set(reason)
        self._worker.release_held()

    def _conclude(self, proc: ChildHandle, exit: ProcessExit, note: str) -> ExitReason:
        """A stopped process's exit reason (a stop's answer), the process forgotten."""
        self._worker.forget(proc, STOPPED)
        return self._reason(exit, note)

    def _reason(self, exit: ProcessExit, note: str) -> ExitReason:
        worker = self._worker
        reason = worker.classify(exit, stop_requested=True)
        if note:
            reason = ExitReason(ExitKind.SHUTDOWN, signal=reason.signal, message=note)
        worker.history.last_exit = reason
        return reason

    def _order(self, proc: ChildHandle) -> StopOrder:
        """How our spec stops `proc`: its stop signal to the group, or to the main
        process alone (kill_mode "main", systemd's KillMode=mixed)."""
        worker = self._worker
        spec = worker.spec
        group = spec.kill_mode == "group"
        return StopOrder(proc, int(spec.stop_signal), group, worker.paused, spec.shutdown)

    def _take_back(self, proc: ChildHandle) -> None:
        """The exit to come is ours: no memory watch, no restart ahead of it."""
        self._worker.take_back(proc)

    def _settle(self, proc: ChildHandle, outcome: StopOutcome) -> tuple[ProcessExit, str]:
        """A stop's exit, and the note why it was killed if it was: the exit reported,
        else waited for once the OS says it is gone, else a kill."""
        exit = outcome.exit or proc.exit
        if exit is None and outcome.dead:
            with blocking():  # gone, as the OS said: the launcher's report is on its way
                exit = proc.wait(KILL_REPORT_GRACE)
        note = self._timeout_note(proc, outcome.timeout, outcome.capped) if outcome.killed else ""
        if exit is None:
            exit = self._worker.kill_now(proc)
        return exit, note

    def _timeout_note(self, proc: ChildHandle, timeout: float | None, capped: bool) -> str:
        if capped:
            note = "still running at its supervisor's shutdown deadline; killed with SIGKILL"
        else:
            name = signal_name(int(self._worker.spec.stop_signal))
            note = f"ignored {name} for {timeout}s; killed with SIGKILL"
        # Past its supervisor's deadline, the supervisor says it once for all.
        level = logging.DEBUG if capped else logging.WARNING
        log.log(level, "child %r (pid %d) %s", self._worker.spec.id, proc.pid, note)
        return note


def _ran_out(proc: ChildHandle, timeout: float | None, capped: bool) -> StopOutcome:
    """A stop whose time is up: its exit if it came, else it is to be killed."""
    return StopOutcome(proc.exit, False, proc.exit is None, timeout, capped)
