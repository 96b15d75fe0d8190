"""WorkerActor: owns at most one OS process at a time; a restart replaces the
process, not the actor.

One path per exit: the launcher's reader thread only tells the worker
`ProcessNote(pid, "exited")`; the worker, handling one message at a time,
classifies the exit once and tells its nanny `ChildExited`. An exit during a
start is a failed start, seen by the start itself; an exit the worker caused (a
stop) is the stop's answer. A worker has no thread of its own: a shared pool
serves its mailbox (actors/_runtime/_pooled.py), never on two threads at once, so
nothing of the worker is touched by two threads together.

One concept: the life of one child's process, from its start to its exit's
report, in one actor: it dispatches its messages, starts, and classifies. What is
not that lives beside it, in objects it owns: its template on the launcher
(`_template.py`), what was started ahead of a decision (`_successor.py`), how it
stops (`_worker_stop.py`, over `_stopping.py`), what watches its process
(`_guards.py`), its NOTIFY_SOCKET (`_sd_notify.py`) and what its runs left
(`_start_output.py`); and when a start counts (`_readiness.py`), a reload
(`_reload.py`), and why a process ended (the core's `classify_exit`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import pykka

from supervision import (
    ChildNotRunning,
    ChildSpec,
    ExitReason,
    ReadyFile,
)

from .._process._port import (
    ChildHandle,
    LaunchError,
    Note,
    PendingSpawn,
    ProcessExit,
    Spawner,
)
from .._runtime._actor_loop import tell_quietly
from .._runtime._pooled import PooledActor, blocking
from ._context import TreeContext
from ._exit_gate import ExitGate
from ._guards import Guards, over_memory, unhealthy
from ._liveness import probe_site
from ._messages import (
    ArmExit,
    ChildExited,
    ChildHealth,
    ChildNote,
    ChildStatus,
    FinishStop,
    HealthChanged,
    MemoryExceeded,
    NotifyReadable,
    Pause,
    PrepareStart,
    PrepareStop,
    ProcessNote,
    ReadOutput,
    ReloadChild,
    Resume,
    Signal,
    Start,
    StartDone,
    StartFailed,
    Stop,
    StopTimeout,
    Unstart,
    WatchdogTick,
    lingering_note,
)
from ._readiness import Waiting, not_ready, start_check, wait_ready
from ._reload import reload_process
from ._request import StartProblem
from ._sd_notify import ChildNotify, Notification
from ._start_output import RunHistory
from ._stopping import kill_and_wait
from ._successor import Ahead
from ._template import Template
from ._worker_stop import WorkerStop

log = logging.getLogger("nannytree")

# What a stop in progress still handles; the rest waits until it is done.
_DURING_STOP = (ProcessNote, StopTimeout, FinishStop, NotifyReadable, ReadOutput)


class WorkerActor(PooledActor):
    """One child of a nanny: starts, stops, signals and watches its OS process.

    Its nanny tells it `Start` (it answers `StartDone` or `StartFailed`) and asks
    it `Stop` (answered with the exit reason), `Signal`, `Pause`, `Resume` and
    `ReadOutput`;
    it tells its nanny `ChildExited` when the process ends by itself.
    """

    def __init__(
        self,
        spec: ChildSpec,
        context: TreeContext,
        parent: pykka.ActorRef[Any],
        supervisor: str = "",
    ) -> None:
        super().__init__()
        self.spec = spec
        self.context = context
        self._supervisor = supervisor
        self.proc: ChildHandle | None = None
        self.incarnation = 0
        self.history = RunHistory(spec)
        self.ahead = Ahead(self)
        self._template = Template(spec, context)
        self.gate = ExitGate(spec, self.history, self._template, parent)
        self._notify = ChildNotify(spec)
        self._guards = Guards(spec, context)
        self._stops = WorkerStop(self)

    @property
    def status(self) -> str:
        """The child's last sd_notify STATUS= line."""
        return self._notify.status

    @property
    def paused(self) -> bool:
        return self._guards.paused

    # -- messages -------------------------------------------------------------

    def holds(self, message: Any) -> bool:
        return self._stops.busy and not isinstance(message, _DURING_STOP)

    def on_receive(self, message: Any) -> Any:
        if self.gate.claimed is not None:  # as if the reported exit's note came first
            self.ahead.catch_up(self.gate.take_claim())
        if self.gate.born is not None:  # the successor whose start the reader answered
            self.ahead.born_as(self.gate.take_born())
        if isinstance(message, ProcessNote):
            return None if message.note == "born" else self._on_note(message)
        if isinstance(message, Start):
            return self.start_now(message.token, message.arm, message.spawned, message.settle)
        if isinstance(message, PrepareStart):
            return self.ahead.ticket()
        if isinstance(message, Unstart):
            return self.ahead.unstart(message.token)
        # The three stops, one entry: who waits differs (docs in _worker_stop.py).
        if isinstance(message, Stop):
            return self._stops.stop("later", message.deadline)
        if isinstance(message, PrepareStop):
            return self._stops.stop("by_supervisor")
        if isinstance(message, StopTimeout):
            return self._stops.timed_out(message.token)
        if isinstance(message, FinishStop):
            return self._stops.finished(message.outcome)
        if isinstance(message, (MemoryExceeded, WatchdogTick, HealthChanged)):
            return self._on_guard(message)
        if isinstance(message, ArmExit):
            return self._arm(message)
        if isinstance(message, NotifyReadable):
            self._notify.drain(self.proc, self._take_note)
            self._watch_notify()
            return None
        if isinstance(message, ReloadChild):
            return reload_process(self.spec, self.proc, self._supervisor)
        if isinstance(message, Signal):
            return self._signal(message.sig, "send a signal to it")
        if isinstance(message, Pause):
            if self.proc is not None:
                self.spawner().disarm(self.proc)  # a paused child is the host's
            self._guards.pause()
            self._signal(signal.SIGSTOP, "pause it")
            self._guards.paused = True
            return None
        if isinstance(message, Resume):
            self._signal(signal.SIGCONT, "resume it")
            self._guards.resume(self.actor_ref, self.incarnation, self.proc is not None)
            return None
        if isinstance(message, ReadOutput):
            data = self.history.output(self.proc, message.stream, message.previous)
            return data.decode(errors="replace")
        raise TypeError(f"worker {self.spec.id!r} got an unknown message {message!r}")

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # A bug here must not lose the child: kill the process, report the crash.
        self._stops.crashed(exception_type, exception_value)

    def on_stop(self) -> None:
        # The nanny stops its children before its workers; this is the backstop.
        if self.proc is not None:
            self._stops.stop("now")
        self.ahead.let_go("its worker stopped")
        if self._notify.endpoint is not None:
            self.context.notify.forget(self._notify.endpoint.fileno())
        self._notify.close()
        self._template.forget()

    # -- start ------------------------------------------------------------------

    def start_now(
        self,
        token: int,
        arm: ArmExit | None,
        spawned: PendingSpawn | None = None,
        settle: float = 0.0,
    ) -> None:
        if self.ahead.withdrawn(token):  # withdrawn before it came: nothing of it may run
            if spawned is not None and spawned.child is not None:
                self.kill_now(spawned.child)
            return
        try:
            pid = self._start_process(spawned, settle)
        except StartProblem as failed:
            if spawned is None or not spawned.cancelled:  # a cancelled one never ran
                self.history.last_exit = failed.reason
            self.ahead.started(token, None)
            self.tell_parent(StartFailed(self.spec.id, token, failed.reason))
            return
        proc = self.proc
        self.arm_start(token, proc, arm)
        ended = self._ended_in_start(proc)
        self.tell_parent(StartDone(self.spec.id, token, pid, self.incarnation, ended))
        if proc is not None and ended is None:
            self.open_gate(proc)

    def _ended_in_start(self, proc: ChildHandle | None) -> ChildExited | None:
        """A one-shot step's exit, which its start waited for: the start's answer tells
        it, so that its supervisor records it before the next child starts."""
        if self.spec.ready != "exited" or proc is None or proc.exit is None:
            return None
        if self.own_exit(proc) is None:
            return None  # (the gate is not open yet: the reader cannot have claimed it)
        return self._exited(proc, proc.exit)

    def arm_start(self, token: int, proc: ChildHandle | None, arm: ArmExit | None) -> None:
        """The start `token` started `proc`, to be armed with `arm`."""
        self.ahead.started(token, proc)
        self.ahead.arm = arm
        if arm is not None and proc is not None:
            self.spawner().arm(proc, arm.budget, arm.plan, self.ahead.standby_id())

    def open_gate(self, proc: ChildHandle) -> None:
        """`proc` counts as started: its exit is the reader's to report from now on."""
        self.gate.open(proc, self.incarnation)
        if proc.exit is not None:
            # An exit whose note came before (or one of an adopted successor that had
            # already ended, while it was not ours yet): reported now, after its start.
            self._on_note(ProcessNote(proc.pid, "exited"))

    def notifier(self) -> Callable[[ChildHandle, Note], None]:
        return self.gate.notifier(self.actor_ref)

    def _start_process(self, spawned: PendingSpawn | None = None, settle: float = 0.0) -> int:
        if self.proc is not None:
            if self.proc.exit is None:
                if spawned is not None and spawned.child is not None:
                    self.kill_now(spawned.child)  # (not sent for a live process)
                return self.proc.pid
            # Exited; its note is on its way and will be stale.
            if self.own_exit(self.proc) is not None:
                self.forget(self.proc, "a new start came before its exit was reported")
        prepared = self._template.prepared
        if spawned is not None and prepared is not None:
            launcher, template = prepared  # as prepared
            self.ahead.drop("a start of a run came instead")
            try:
                proc: ChildHandle = spawned.result()
            except LaunchError as e:
                raise StartProblem(ExitReason.start_failure(str(e))) from None
        else:
            launcher, template = self.define()
            start_check(self.spec)
            proc = self._spawn(launcher, template)
        self._template.current = template
        self.begin(proc)
        waiting = Waiting()
        with blocking():
            ready_now = wait_ready(
                self.spec,
                proc,
                self._notify.endpoint,
                self._take_note,
                self.context.prober,
                lambda: probe_site(self.spec, self.spec.ready),
                waiting,
                settle,
            )
        if not ready_now:
            killed = proc.exit is None
            exit = proc.exit if proc.exit is not None else self.kill_now(proc)
            reason = not_ready(self.spec, exit, waiting, self.history, killed=killed)
            self.forget(proc, "its start failed")
            raise StartProblem(reason)
        self.started(proc)
        return proc.pid

    def begin(self, proc: ChildHandle) -> None:
        """A process was started (or adopted): a new incarnation."""
        if self._notify.endpoint is not None:
            self._notify.endpoint.attach(proc.pid)
        self.incarnation += 1
        self.proc = proc
        self._guards.paused = False

    def started(self, proc: ChildHandle) -> None:
        """Its process counts as started: its standby refilled, its guards set."""
        prepared = self._template.prepared
        if self.spec.warm_start and prepared is not None:
            self.ahead.refill_standby(*prepared)
        self._notify.beat = time.monotonic()  # a watchdog's deadline counts from the start
        self._guards.start(self.actor_ref, self.incarnation, proc.pid, proc.exit is None)
        if self._notify.endpoint is not None:
            self._watch_notify()

    def _spawn(self, launcher: Spawner, template: int) -> ChildHandle:
        """A process from our template: the successor started ahead, if it was started
        from it, else a new one."""
        successor = self.ahead.take(template, self._template.current)
        ready = self.spec.ready
        if isinstance(ready, ReadyFile):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ready.path)  # a file left by the last incarnation proves nothing
        if successor is not None:
            return successor
        self.history.mark()
        try:
            with blocking():
                return launcher.spawn(
                    template,
                    name=self.spec.id,
                    notify=self.notifier(),
                    standby=self.ahead.take_standby(launcher, template),
                )
        except LaunchError as e:
            raise StartProblem(ExitReason.start_failure(str(e))) from None

    def define(self) -> tuple[Spawner, int]:
        """The launcher to use and our template on it (defined again only when the
        host's state changed)."""
        return self._template.define(self._notify.open())

    # -- its NOTIFY_SOCKET ------------------------------------------------------------

    def _watch_notify(self) -> None:
        ref = self.actor_ref
        self._notify.watch(self.context.notify, lambda: tell_quietly(ref, NotifyReadable()))

    def _take_note(self, proc: ChildHandle, note: Notification) -> None:
        """What a running child said on its NOTIFY_SOCKET (the sender was checked)."""
        if self._notify.took(note, time.monotonic()):
            self.tell_parent(ChildStatus(self.spec.id, self._notify.status))
        if note.main_pid is not None and note.main_pid != proc.pid:
            # MAINPID=: once this process exits, the launcher follows that one.
            self.spawner().follow(proc, note.main_pid)

    # -- guards: memory, watchdog, liveness ------------------------------------------

    def _on_guard(self, message: MemoryExceeded | WatchdogTick | HealthChanged) -> None:
        """A guard of the current process says it must go: killed, and reported."""
        proc = self.proc
        if proc is None or message.incarnation != self.incarnation:
            return  # that process is gone: what its guards said goes with it
        reason_of: Callable[[ProcessExit], ExitReason] | None
        if isinstance(message, MemoryExceeded):
            reason_of = over_memory(self.spec, self.history, message.rss)
        elif isinstance(message, WatchdogTick):
            self._notify.drain(proc, self._take_note)  # its WATCHDOG=1 beats
            late = self._notify.late(proc.last_beat, time.monotonic())
            reason_of = self._guards.missed_watchdog(self.actor_ref, proc, message, late)
        else:
            if self.spec.liveness is not None:
                health = ChildHealth(
                    self.spec.id, self.incarnation, proc.pid, message.health, message.verdict
                )
                self.tell_parent(health)
            reason_of = unhealthy(self.spec, self.history, proc, message)
        if reason_of is not None:
            self._stops.kill_and_report(proc, reason_of)

    # -- for the objects it owns --------------------------------------------------------

    def _arm(self, message: ArmExit) -> None:
        proc = self.proc
        if proc is None or proc.exit is not None or message.plan.incarnation != self.incarnation:
            return  # the plan was for a process that is gone
        self.ahead.arm = message
        self.spawner().arm(proc, message.budget, message.plan, self.ahead.standby_id())

    def spawner(self) -> Spawner:
        """The spawner our process came from (the one our template is defined on)."""
        return self._template.spawner()

    def respawner(self) -> Spawner | None:
        """Who restarts our process ahead of a decision, if anybody may."""
        return self._template.respawner()

    def take_back(self, proc: ChildHandle) -> None:
        """The exit to come is ours: no memory watch, no restart ahead of it."""
        self._guards.unwatch_memory(proc.pid)
        self._template.disarm(proc)

    def kill_now(self, proc: ChildHandle) -> ProcessExit:
        """SIGKILL the group and wait for the exit: from the launcher, or else the OS."""
        with blocking():
            return kill_and_wait(proc)

    # -- signals and exits ------------------------------------------------------------

    def _signal(self, sig: int, what: str) -> None:
        if self.proc is None or not self.proc.send_signal(sig):
            raise ChildNotRunning(self._supervisor, self.spec.id, what)

    def _on_note(self, message: ProcessNote) -> None:
        proc = self.proc
        if proc is None or proc.pid != message.pid:
            return  # consumed by a stop or a failed start, or from an older incarnation
        if message.note == "forked":
            self._on_forked(proc)
            return
        if message.note == "channel_closed":
            self.tell_parent(
                ChildNote(
                    self.spec.id,
                    self.incarnation,
                    proc.pid,
                    f"control channel closed: {proc.channel_note}; it may no longer "
                    "report readiness or errors",
                )
            )
            return
        exit = proc.exit
        if exit is None or self._stops.exited(proc) or self.own_exit(proc) is None:
            return
        self.tell_parent(self._exited(proc, exit))

    def _exited(self, proc: ChildHandle, exit: ProcessExit) -> ChildExited:
        """`proc` ended by itself (its exit taken back from the reader): forgotten, its
        successor kept, its exit classified; the report for the supervisor."""
        self.ahead.successor = self.forget(proc, "", adopt=True)
        respawned_by = self.respawner() if self.ahead.successor is not None else None
        reason = self.classify(exit, stop_requested=False)
        if self.ahead.successor is not None:  # its output begins about now
            self.history.mark()
        self.history.last_exit = reason
        return ChildExited(
            self.spec.id, self.incarnation, proc.pid, reason, exit.uptime, respawned_by
        )

    def _on_forked(self, proc: ChildHandle) -> None:
        """Its first process handed over to a main process (pid file or MAINPID=)."""
        if self._notify.endpoint is not None:
            self._notify.endpoint.main_pid = proc.pid
        self._guards.watch_memory(self.actor_ref, self.incarnation, proc.pid)
        self.tell_parent(
            ChildNote(
                self.spec.id,
                self.incarnation,
                proc.pid,
                f"main process is now pid {proc.pid} (named by "
                + ("its pid file)" if self.spec.pid_file is not None else "MAINPID=)"),
                main_pid=proc.pid,
            )
        )

    def forget(self, proc: ChildHandle, why: str, *, adopt: bool = False) -> ChildHandle | None:
        """The process is gone (or going): drop it, keep what it said. The successor the
        spawner started in its place is returned to `adopt` it (its exit is reported,
        and the decision may take it); else it is killed, and `why` says so."""
        successor = proc.take_successor()
        if not adopt:
            self.ahead.kill(successor, why)
            successor = None
        if proc.exit is not None and proc.exit.lingering:
            self.tell_parent(lingering_note(self.spec.id, self.incarnation, proc.exit))
        current = self.proc is proc
        if current:
            self.proc = None
        self._guards.end(proc.pid, current)
        self.history.keep(proc)
        if self._notify.status:  # what a process said of itself goes with it
            self._notify.status = ""
            self.tell_parent(ChildStatus(self.spec.id, ""))
        return successor

    def classify(self, exit: ProcessExit, *, stop_requested: bool) -> ExitReason:
        return self.history.classify(exit, stop_requested=stop_requested)

    # -- the exit the reader reported ----------------------------------------------------

    def own_exit(self, proc: ChildHandle) -> ChildHandle | None:
        """Take `proc`'s exit back from the reader (a stop, a kill, a new start): `proc`,
        or None if the reader reported it first (then caught up on: `proc` is gone)."""
        if self.gate.close(proc):
            return proc
        self.ahead.catch_up(self.gate.take_claim())
        return None

    def tell_parent(self, message: Any) -> None:
        self.gate.tell(message)
