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
report, in one actor. What is not that lives beside it: what to ask the launcher
(`_request.py`), when a start counts (`_readiness.py`), how a process is stopped
(`_stopping.py`), a reload (`_reload.py`), and why a process ended (the core's
`classify_exit`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import pykka

from supervision import (
    ChildNotRunning,
    ChildSpec,
    ExitKind,
    ExitReason,
    ReadyFile,
    classify_exit,
    signal_name,
)

from .._process._port import (
    SPAWN_TIMEOUT,
    ChildHandle,
    LaunchError,
    Note,
    PendingSpawn,
    ProcessExit,
    Spawner,
    SpawnRequest,
)
from .._runtime._actor_loop import LATER, tell_quietly
from .._runtime._pooled import PooledActor, blocking
from ._account import notify_owner
from ._check_run import run_check
from ._context import TreeContext
from ._liveness import LivenessWatch, probe_site
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
    StartTicket,
    Stop,
    StopTimeout,
    Unstart,
    WatchdogTick,
)
from ._readiness import Waiting, wait_ready
from ._reload import reload_process
from ._request import StartProblem, build_request, pickled_target, request_shape
from ._sd_notify import Notification, NotifyEndpoint
from ._start_output import file_marks, output_tail
from ._stopping import KILL_REPORT_GRACE, StopOrder, StopOutcome, carry_out, kill_and_wait

log = logging.getLogger("nannytree")


_STOPPED = "a stop came first"

# What a stop in progress still handles; the rest waits until it is done.
_DURING_STOP = (ProcessNote, StopTimeout, FinishStop, NotifyReadable, ReadOutput)


class _Stopping:
    """A Stop sent its signal and waits for the exit (or its timeout) without a thread;
    or (`by_supervisor`) the supervisor stops the process and says so with FinishStop."""

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
        self._context = context
        self._parent = parent
        self._supervisor = supervisor
        self._proc: ChildHandle | None = None
        # Started by the spawner in place of the last process, ahead of the core's
        # decision (an armed exit): adopted by the next Start, killed by a Stop.
        self._successor: ChildHandle | None = None
        self._proc_template = 0  # the template the current process was started from
        self._incarnation = 0
        self._paused = False
        self._last_exit: ExitReason | None = None
        self._last_output: dict[int, bytes] = {}  # the last run that ended
        self._previous_output: dict[int, bytes] = {}  # the run before it, for logs --previous
        self._payload: bytes | None = None
        # The launcher's template for our request: (launcher, key of the host state, id).
        self._template: tuple[Spawner, tuple[Any, ...], int] | None = None
        self._standby: tuple[Spawner, int, int] | None = None  # (launcher, template, id)
        # A command's NOTIFY_SOCKET (ready="sd_notify"), one for the worker's life, so
        # that its path, and the child's environment, stay the same across restarts.
        self._notify: NotifyEndpoint | None = None
        self.status = ""  # the child's last sd_notify STATUS= line
        self._beat = 0.0  # when the child last said it was alive (watchdog)
        self._watchdog_trigger = False  # WATCHDOG=trigger: the child asked to be restarted
        self._memory_pid = 0  # the pid whose tree the memory limit is watched on
        self._liveness = LivenessWatch(spec, context.prober)
        self._stopping: _Stopping | None = None
        self._stops = 0
        # Runs of starts: the last Start's token and what it started; and the tokens
        # the nanny withdrew (Unstart) before their Start came.
        self._last_start: tuple[int, ChildHandle | None] | None = None
        self._withdrawn: set[int] = set()
        # The pid whose exit note is not wanted: its supervisor stops it in a run (the
        # note would only wake a pool thread during the run). Read on the reader thread.
        self._quiet = [0]
        # The sizes of its output files when its process started: what it wrote since.
        self._marks: dict[str, int] = {}

    # -- messages -------------------------------------------------------------

    def holds(self, message: Any) -> bool:
        return self._stopping is not None and not isinstance(message, _DURING_STOP)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, ProcessNote):
            return self._on_note(message)
        if isinstance(message, Start):
            return self._start(message.token, message.arm, message.spawned, message.settle)
        if isinstance(message, PrepareStart):
            return self._prepare_start()
        if isinstance(message, Unstart):
            return self._unstart(message.token)
        if isinstance(message, Stop):
            return self._stop_later(message.deadline)
        if isinstance(message, StopTimeout):
            return self._on_stop_timeout(message)
        if isinstance(message, PrepareStop):
            return self._prepare_stop()
        if isinstance(message, FinishStop):
            return self._finish_stop_by_supervisor(message.outcome)
        if isinstance(message, MemoryExceeded):
            return self._on_memory_exceeded(message)
        if isinstance(message, ArmExit):
            return self._arm(message)
        if isinstance(message, WatchdogTick):
            return self._on_watchdog(message)
        if isinstance(message, NotifyReadable):
            return self._on_notify_readable()
        if isinstance(message, ReloadChild):
            return reload_process(self.spec, self._proc, self._supervisor)
        if isinstance(message, Signal):
            return self._signal(message.sig, "send a signal to it")
        if isinstance(message, Pause):
            if self._proc is not None:
                self._spawner().disarm(self._proc)  # a paused child is the host's
            self._liveness.stop()  # a stopped process cannot answer its probe
            self._signal(signal.SIGSTOP, "pause it")
            self._paused = True
            return None
        if isinstance(message, Resume):
            self._signal(signal.SIGCONT, "resume it")
            self._paused = False
            if self._proc is not None:
                self._liveness.start(self.actor_ref, self._incarnation)
            return None
        if isinstance(message, HealthChanged):
            return self._on_health(message)
        if isinstance(message, ReadOutput):
            return self._output(message.stream, message.previous).decode(errors="replace")
        raise TypeError(f"worker {self.spec.id!r} got an unknown message {message!r}")

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # A bug here must not lose the child: kill the process, report the crash.
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            with blocking():
                proc.wait(5.0)
            self._kill_successor(proc.take_successor(), "its worker failed")
        reason = ExitReason(
            ExitKind.ACTOR_CRASHED,
            exc_type=exception_type.__name__ if exception_type else None,
            message=f"worker actor of {self.spec.id!r} failed: {exception_value}",
        )
        self._tell_parent(ChildExited(self.spec.id, self._incarnation, None, reason))

    def on_stop(self) -> None:
        # The nanny stops its children before its workers; this is the backstop.
        if self._proc is not None:
            self._stop_process()
        self._drop_successor("its worker stopped")
        self._discard_standby()
        if self._notify is not None:
            self._context.notify.forget(self._notify.fileno())
            self._notify.close()
        if self._template is not None:
            launcher, _, tid = self._template
            launcher.forget(tid)

    # -- start ------------------------------------------------------------------

    def _start(
        self,
        token: int,
        arm: ArmExit | None,
        spawned: PendingSpawn | None = None,
        settle: float = 0.0,
    ) -> None:
        if token in self._withdrawn:  # withdrawn before it came: nothing of it may run
            self._withdrawn.discard(token)
            if spawned is not None and spawned.child is not None:
                self._kill_now(spawned.child)
            return
        try:
            pid = self._start_process(spawned, settle)
        except StartProblem as failed:
            if spawned is None or not spawned.cancelled:  # a cancelled one never ran
                self._last_exit = failed.reason
            self._last_start = (token, None)
            self._tell_parent(StartFailed(self.spec.id, token, failed.reason))
            return
        proc = self._proc
        self._last_start = (token, proc)
        if arm is not None and proc is not None:
            self._spawner().arm(proc, arm.budget, arm.plan, self._standby_id())
        self._tell_parent(StartDone(self.spec.id, token, pid, self._incarnation))
        if proc is not None and proc.exit is not None:
            # An adopted successor that had already ended: its note came while it was
            # not ours yet, so its exit is reported now, after its start.
            self._on_note(ProcessNote(proc.pid, "exited"))

    def _prepare_start(self) -> StartTicket | None:
        """Whether our next start is only a spawn from our template (ready="started",
        nothing to adopt or wait for), and if so what its supervisor sends for it."""
        spec = self.spec
        if (
            spec.ready != "started"
            or spec.start_check is not None  # checked by its worker before each start
            or spec.pid_file is not None
            or spec.notify_socket
            or spec.warm_start
            or self._successor is not None
            or self._standby is not None
            or (self._proc is not None and self._proc.exit is None)
        ):
            return None
        try:
            launcher, template = self._define()
        except StartProblem:
            return None  # the Start itself reports why
        self._marks = file_marks(spec)
        return StartTicket(launcher, template, spec.id, self._notifier())

    def _unstart(self, token: int) -> None:
        """The core did not ask for that start of a run: undo it, unreported."""
        last = self._last_start
        if last is None or last[0] != token:
            self._withdrawn.add(token)
            return
        self._last_start = None
        proc = last[1]
        if proc is None or proc is not self._proc:
            self._drop_successor("its start was withdrawn")  # restarted ahead: not wanted
            return
        self._spawner().disarm(proc)
        self._drop_successor("its start was withdrawn")
        if proc.exit is None:
            self._kill_now(proc)
        self._forget(proc, "its start was withdrawn")

    def _notifier(self) -> Callable[[ChildHandle, Note], None]:
        ref, quiet = self.actor_ref, self._quiet

        def notify(process: ChildHandle, note: Note) -> None:
            # On the exit watcher's thread: only a message, nothing of ours is touched.
            if note == "exited" and process.pid == quiet[0]:
                return  # its supervisor stops it and reads its exit itself
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(ProcessNote(process.pid, note))

        return notify

    def _start_process(self, spawned: PendingSpawn | None = None, settle: float = 0.0) -> int:
        if self._proc is not None:
            if self._proc.exit is None:
                if spawned is not None and spawned.child is not None:
                    self._kill_now(spawned.child)  # (not sent for a live process)
                return self._proc.pid
            # Exited; its note is on its way and will be stale.
            self._forget(self._proc, "a new start came before its exit was reported")
        if spawned is not None and self._template is not None:
            launcher, template = self._template[0], self._template[2]  # as prepared
            self._drop_successor("a start of a run came instead")
            try:
                proc: ChildHandle = spawned.result()
            except LaunchError as e:
                raise StartProblem(ExitReason.start_failure(str(e))) from None
        else:
            launcher, template = self._define()
            self._start_check()
            proc = self._spawn(launcher, template)
        self._proc_template = template
        if self._notify is not None:
            self._notify.attach(proc.pid)
        self._incarnation += 1  # a process was started: a new incarnation
        incarnation = self._incarnation
        self._proc, self._paused = proc, False
        waiting = Waiting()
        with blocking():
            ready_now = wait_ready(
                self.spec,
                proc,
                self._notify,
                self._take_note,
                self._context.prober,
                lambda: probe_site(self.spec, self.spec.ready),
                waiting,
                settle,
            )
        if not ready_now:
            exit = proc.exit
            if exit is None:
                exit = self._kill_now(proc)
                if self.spec.pid_file is not None:
                    why = (
                        f"its first process did not exit within start_timeout="
                        f"{self.spec.start_timeout}s; with pid_file the program must fork into "
                        "the background and its first process exit 0 (systemd's Type=forking): "
                        "drop pid_file for a program that stays in the foreground"
                    )
                else:
                    why = (
                        f"not ready within start_timeout={self.spec.start_timeout}s "
                        f"(ready={self.spec.ready!r}); make it ready sooner or raise start_timeout"
                    )
                    if waiting.error:
                        why += f"; last: {waiting.error}"
                reason = ExitReason(
                    ExitKind.START_TIMEOUT, message=why, stderr_tail=self._tail(exit.stderr)
                )
            else:
                reason = self._classify(exit, stop_requested=False)
                if waiting.error and not reason.message:
                    reason = dataclasses.replace(reason, message=waiting.error)
            self._forget(proc, "its start failed")
            raise StartProblem(reason)
        if self.spec.warm_start:
            # Refill behind the start: one standby at most, so a crash storm
            # cannot become a spawn storm.
            self._discard_standby()
            with contextlib.suppress(LaunchError, OSError):
                self._standby = (launcher, template, launcher.prepare(template).id)
        if self.spec.watchdog is not None:
            self._beat = time.monotonic()  # the deadline counts from the start
            self._schedule_watchdog(incarnation, self.spec.watchdog)
        self._watch_memory(proc.pid)
        if self._notify is not None:
            self._watch_notify()
        if proc.exit is None:
            self._liveness.start(self.actor_ref, incarnation)
        return proc.pid

    def _start_check(self) -> None:
        """Its spec's start_check, before each start (systemd's ExecStartPre=): one that
        fails fails the start, with what it said."""
        spec = self.spec
        if spec.start_check is None:
            return
        failed = run_check(
            spec,
            spec.start_check,
            spec.start_check_timeout,
            "start_check",
            as_root=spec.start_check_as_root,
        )
        if failed is not None:
            raise StartProblem(
                ExitReason(ExitKind.START_FAILURE, message=failed.why, stderr_tail=failed.output)
            )

    def _spawn(self, launcher: Spawner, template: int) -> ChildHandle:
        """A process from our template: the successor started ahead, if it was started
        from it, else a new one."""
        successor = self._born(self._successor)
        self._successor = None
        ready = self.spec.ready
        if isinstance(ready, ReadyFile):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ready.path)  # a file left by the last incarnation proves nothing
        if successor is not None and template == self._proc_template:
            # Already started, as the exit plan allowed: adopt it, even if it has ended
            # since (it did run: its exit is reported once it counts as started). It may
            # have run our standby: a new one is forked behind it.
            self._discard_standby()
            return successor
        if successor is not None:
            self._kill_successor(successor, "it was started from a request that no longer holds")
        self._marks = file_marks(self.spec)
        try:
            with blocking():
                return launcher.spawn(
                    template,
                    name=self.spec.id,
                    notify=self._notifier(),
                    standby=self._take_standby(launcher, template),
                )
        except LaunchError as e:
            raise StartProblem(ExitReason.start_failure(str(e))) from None

    def _watch_memory(self, pid: int) -> None:
        limit = self.spec.memory_limit
        if limit is None:
            return
        if self._memory_pid:
            self._context.memory.unwatch(self._memory_pid)
        ref, incarnation = self.actor_ref, self._incarnation
        self._memory_pid = pid
        self._context.memory.watch(
            pid, limit, lambda rss: tell_quietly(ref, MemoryExceeded(incarnation, rss))
        )

    def _take_standby(self, launcher: Spawner, template: int) -> int | None:
        """The standby for this start, if it was forked from the same template."""
        standby, self._standby = self._standby, None
        if standby is None:
            return None
        owner, prepared, sid = standby
        if owner is not launcher or prepared != template:
            owner.discard(sid)  # forked before env, cwd or sys.path changed
            return None
        return sid

    def _standby_id(self) -> int:
        """Our warm standby's id, for a restart ahead to run (0: none)."""
        return self._standby[2] if self._standby is not None else 0

    def _discard_standby(self) -> None:
        if self._standby is not None:
            launcher, _, sid = self._standby
            launcher.discard(sid)
            self._standby = None

    def _watch_notify(self) -> None:
        """Have the tree's watcher tell us when our NOTIFY_SOCKET has something."""
        endpoint, ref = self._notify, self.actor_ref
        if endpoint is None:
            return

        def readable() -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(NotifyReadable())

        self._context.notify.watch(endpoint.fileno(), readable)

    def _on_notify_readable(self) -> None:
        self._drain_notify()
        self._watch_notify()

    def _drain_notify(self) -> None:
        endpoint, proc = self._notify, self._proc
        if endpoint is None:
            return
        for note in endpoint.read():
            if proc is not None and proc.exit is None:
                self._take_note(proc, note)

    def _take_note(self, proc: ChildHandle, note: Notification) -> None:
        """What a running child said on its NOTIFY_SOCKET (the sender was checked)."""
        if note.status is not None and note.status != self.status:
            self.status = note.status
            self._tell_parent(ChildStatus(self.spec.id, note.status))
        if note.watchdog:
            self._beat = time.monotonic()
        if note.watchdog_trigger:
            self._watchdog_trigger = True
        if note.main_pid is not None and note.main_pid != proc.pid:
            # MAINPID=: once this process exits, the launcher follows that one.
            self._spawner().follow(proc, note.main_pid)

    def _request(self, host: tuple[Any, ...]) -> SpawnRequest:
        """Our spawn request: one object for every child of the tree built alike in
        the same host state, which the launcher then defines once."""
        spec = self.spec
        if spec.notify_socket and self._notify is None:
            self._notify = NotifyEndpoint(spec.id, watchdog=spec.watchdog, owner=notify_owner(spec))
        if spec.target is not None and self._payload is None:
            self._payload = pickled_target(spec)
        shape = request_shape(spec, self._payload)
        if shape is None:
            return build_request(spec, self._payload, self._notify)
        shared = self._context.requests.get(shape)
        if shared is not None and shared[0] == host:
            return shared[1]
        request = build_request(spec, self._payload, self._notify)
        self._context.requests[shape] = (host, request)
        return request

    def _define(self) -> tuple[Spawner, int]:
        """The launcher to use and our template on it, defined again only when the
        host's env, cwd, sys.path or argv changed (or the launcher was replaced)."""
        try:
            launcher = self._context.current_spawner()
        except LaunchError as e:
            raise StartProblem(ExitReason(ExitKind.LAUNCHER_DIED, message=str(e))) from None
        key = (
            os.environ._data.copy() if self.spec.inherit_env else None,  # type: ignore[attr-defined]
            os.getcwd(),
            tuple(sys.path),
            tuple(sys.argv),
        )
        cached = self._template
        if cached is not None and cached[0] is launcher and cached[1] == key:
            return launcher, cached[2]
        try:
            with blocking():  # a send: it waits when the launcher does not read
                template = launcher.define(self._request(key))
        except LaunchError as e:
            raise StartProblem(ExitReason.start_failure(str(e))) from None
        finally:
            # After the new one is defined: a listening socket both name stays open.
            if cached is not None:
                cached[0].forget(cached[2])
                self._template = None
        self._template = (launcher, key, template)
        return launcher, template

    # -- stop ---------------------------------------------------------------------

    def _stop_process(self, deadline: float | None = None) -> ExitReason:
        self._discard_standby()  # part of the child: stopped with it
        self._drop_successor(_STOPPED)
        proc = self._proc
        if proc is None:
            return self._last_exit or ExitReason.shutdown()
        exit, note = self._terminate(proc, deadline)
        return self._stop_reason(exit, note)

    def _stop_later(self, deadline: float | None) -> Any:
        """A Stop that waits for the exit as a message, not on a thread (a thousand
        children stopped at once are a thousand timers, not a thousand threads)."""
        self._discard_standby()  # part of the child: stopped with it
        self._drop_successor(_STOPPED)
        proc = self._proc
        if proc is None:
            return self._last_exit or ExitReason.shutdown()
        if self.spec.shutdown == "brutal_kill":
            return self._stop_process(deadline)
        self._take_back(proc)
        timeout, capped = self._stop_order(proc).begin(deadline, time.monotonic())
        if proc.exit is not None or timeout == 0:  # nothing to wait for
            return self._conclude(proc, *self._settle(proc, _ran_out(proc, timeout, capped)))
        self._stops += 1
        self._stopping = _Stopping(self._stops, proc, self.take_reply(), timeout, capped)
        self.hold()
        if timeout is not None:
            ref, token = self.actor_ref, self._stops

            def ran_out() -> None:
                with contextlib.suppress(pykka.ActorDeadError):
                    ref.tell(StopTimeout(token))

            self._context.scheduler.call_later(timeout, ran_out)
        if proc.exit is not None:  # exited as we armed the timer: its note may be gone
            self._finish_stop(proc.exit, "")
        return LATER

    def _prepare_stop(self) -> StopOrder | ExitReason:
        """Let go of the process for the supervisor to stop it (its run of stops)."""
        self._discard_standby()  # part of the child: stopped with it
        self._drop_successor(_STOPPED)
        proc = self._proc
        if proc is None:
            return self._last_exit or ExitReason.shutdown()
        if proc.exit is not None:
            return self._conclude(proc, proc.exit, "")
        self._take_back(proc)
        self._quiet[0] = proc.pid
        self._stops += 1
        self._stopping = _Stopping(self._stops, proc, None, None, False, by_supervisor=True)
        self.hold()
        return self._stop_order(proc)

    def _finish_stop_by_supervisor(self, outcome: StopOutcome) -> ExitReason:
        stopping = self._stopping
        if stopping is None or not stopping.by_supervisor:
            return self._last_exit or ExitReason.shutdown()
        proc, self._stopping = stopping.proc, None
        self._quiet[0] = 0
        reason = self._conclude(proc, *self._settle(proc, outcome))
        self.release_held()
        return reason

    def _on_stop_timeout(self, message: StopTimeout) -> None:
        stopping = self._stopping
        if stopping is None or stopping.token != message.token:
            return
        proc = stopping.proc
        self._finish_stop(*self._settle(proc, _ran_out(proc, stopping.timeout, stopping.capped)))

    def _finish_stop(self, exit: ProcessExit, note: str) -> None:
        stopping, self._stopping = self._stopping, None
        assert stopping is not None
        reason = self._conclude(stopping.proc, exit, note)
        if stopping.reply is not None:
            stopping.reply.set(reason)
        self.release_held()

    def _conclude(self, proc: ChildHandle, exit: ProcessExit, note: str) -> ExitReason:
        """A stopped process's exit reason (a stop's answer), the process forgotten."""
        self._forget(proc, _STOPPED)
        return self._stop_reason(exit, note)

    def _stop_reason(self, exit: ProcessExit, note: str) -> ExitReason:
        reason = self._classify(exit, stop_requested=True)
        if note:
            reason = ExitReason(ExitKind.SHUTDOWN, signal=reason.signal, message=note)
        self._last_exit = reason
        return reason

    def _stop_order(self, proc: ChildHandle) -> StopOrder:
        """How our spec stops `proc`: its stop signal to the group, or to the main
        process alone (kill_mode "main", systemd's KillMode=mixed)."""
        group = self.spec.kill_mode == "group"
        return StopOrder(proc, int(self.spec.stop_signal), group, self._paused, self.spec.shutdown)

    def _take_back(self, proc: ChildHandle) -> None:
        """The exit to come is ours: no memory watch, no restart ahead of it."""
        self._context.memory.unwatch(proc.pid)
        if self._template is not None:
            self._template[0].disarm(proc)

    def _settle(self, proc: ChildHandle, outcome: StopOutcome) -> tuple[ProcessExit, str]:
        """A stop's exit, and the note why it was killed if it was: the exit reported,
        else waited for once the OS says it is gone, else a kill."""
        exit = outcome.exit or proc.exit
        if exit is None and outcome.dead:
            with blocking():  # gone, as the OS said: the launcher's report is on its way
                exit = proc.wait(KILL_REPORT_GRACE)
        note = self._timeout_note(proc, outcome.timeout, outcome.capped) if outcome.killed else ""
        if exit is None:
            exit = self._kill_now(proc)
        return exit, note

    def _timeout_note(self, proc: ChildHandle, timeout: float | None, capped: bool) -> str:
        if capped:
            note = "still running at its supervisor's shutdown deadline; killed with SIGKILL"
        else:
            name = signal_name(int(self.spec.stop_signal))
            note = f"ignored {name} for {timeout}s; killed with SIGKILL"
        # Past its supervisor's deadline, the supervisor says it once for all.
        level = logging.DEBUG if capped else logging.WARNING
        log.log(level, "child %r (pid %d) %s", self.spec.id, proc.pid, note)
        return note

    def _terminate(
        self, proc: ChildHandle, deadline: float | None = None
    ) -> tuple[ProcessExit, str]:
        """The shutdown protocol on this thread: the stop signal, wait `shutdown` s (or
        until a supervisor's `deadline`), SIGKILL; or at once, or forever."""
        self._take_back(proc)
        with blocking():
            outcome = carry_out(self._stop_order(proc), deadline, time.monotonic())
        exit, note = self._settle(proc, outcome)
        self._forget(proc, _STOPPED)
        return exit, note

    # -- watchdog and reload ------------------------------------------------------------

    def _schedule_watchdog(self, incarnation: int, delay: float) -> None:
        ref = self.actor_ref

        def tick() -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(WatchdogTick(incarnation))

        self._context.scheduler.call_later(max(delay, 0.001), tick)

    def _on_watchdog(self, message: WatchdogTick) -> None:
        proc, seconds = self._proc, self.spec.watchdog
        if proc is None or seconds is None or message.incarnation != self._incarnation:
            return  # that process is gone: its ticks end with it
        self._drain_notify()  # a command beats with WATCHDOG=1 on its socket
        triggered, self._watchdog_trigger = self._watchdog_trigger, False
        beat = max(self._beat, proc.last_beat)
        late = time.monotonic() - beat
        if not triggered and late < seconds:
            self._schedule_watchdog(message.incarnation, seconds - late)
            return
        log.warning("child %r (pid %d) missed its watchdog of %ss", self.spec.id, proc.pid, seconds)
        exit, _ = self._terminate(proc)
        reason = ExitReason.watchdog(seconds)
        self._last_exit = reason
        self._tell_parent(
            ChildExited(self.spec.id, self._incarnation, proc.pid, reason, exit.uptime)
        )

    def _on_health(self, message: HealthChanged) -> None:
        proc, liveness = self._proc, self.spec.liveness
        if proc is None or liveness is None or message.incarnation != self._incarnation:
            return  # that process is gone: what its probe said goes with it
        self._tell_parent(
            ChildHealth(self.spec.id, self._incarnation, proc.pid, message.health, message.verdict)
        )
        if message.verdict != "stop":
            return
        health = message.health
        log.warning(
            "child %r (pid %d) failed %d liveness probes in a row (%s): %s",
            self.spec.id,
            proc.pid,
            health.failures,
            liveness.probe,
            health.error,
        )
        exit, _ = self._terminate(proc)
        reason = ExitReason.unhealthy(health.failures, str(liveness.probe), health.error)
        reason = dataclasses.replace(reason, stderr_tail=self._tail(exit.stderr))
        self._last_exit = reason
        self._tell_parent(
            ChildExited(self.spec.id, self._incarnation, proc.pid, reason, exit.uptime)
        )

    def _drop_successor(self, why: str) -> None:
        """The successor an exit report handed us, for a decision that did not come."""
        successor, self._successor = self._successor, None
        self._kill_successor(successor, why)

    def _kill_successor(self, successor: ChildHandle | None, why: str) -> None:
        """A process started ahead of a decision that did not come: killed, and said so
        (an event names its pid, and its supervisor counts the restart its grant spent)."""
        successor = self._born(successor)
        if successor is None:
            return
        if successor.exit is None:
            self._kill_now(successor)
        note = ChildNote(
            self.spec.id,
            self._incarnation,
            successor.pid,
            f"killed pid {successor.pid}, started ahead of its supervisor's decision: {why}",
            respawned_by=self._template[0] if self._template is not None else None,
        )
        with contextlib.suppress(pykka.ActorDeadError):  # a supervisor gone first
            self._tell_parent(note)

    def _born(self, successor: ChildHandle | None) -> ChildHandle | None:
        """The successor the launcher started, once its pid is known (it is announced
        with its predecessor's exit, before the spawn); None if it was not started."""
        if successor is None:
            return None
        with blocking():
            return successor if successor.wait_born(SPAWN_TIMEOUT) else None

    def _arm(self, message: ArmExit) -> None:
        proc = self._proc
        if proc is None or proc.exit is not None or message.plan.incarnation != self._incarnation:
            return  # the plan was for a process that is gone
        self._spawner().arm(proc, message.budget, message.plan, self._standby_id())

    def _spawner(self) -> Spawner:
        """The spawner our process came from (the one our template is defined on)."""
        cached = self._template
        if cached is not None:
            return cached[0]
        return self._context.current_spawner()

    def _kill_now(self, proc: ChildHandle) -> ProcessExit:
        """SIGKILL the group and wait for the exit: from the launcher, or else the OS."""
        with blocking():
            return kill_and_wait(proc)

    # -- signals and exits ------------------------------------------------------------

    def _signal(self, sig: int, what: str) -> None:
        if self._proc is None or not self._proc.send_signal(sig):
            raise ChildNotRunning(self._supervisor, self.spec.id, what)

    def _on_note(self, message: ProcessNote) -> None:
        proc = self._proc
        if proc is None or proc.pid != message.pid:
            return  # consumed by a stop or a failed start, or from an older incarnation
        if message.note == "forked":
            self._on_forked(proc)
            return
        if message.note == "channel_closed":
            self._tell_parent(
                ChildNote(
                    self.spec.id,
                    self._incarnation,
                    proc.pid,
                    f"control channel closed: {proc.channel_note}; it may no longer "
                    "report readiness or errors",
                )
            )
            return
        exit = proc.exit
        if exit is None:
            return
        if self._stopping is not None and self._stopping.proc is proc:
            if not self._stopping.by_supervisor:  # that one ends with its FinishStop
                self._finish_stop(exit, "")
            return
        self._successor = self._forget(proc, "", adopt=True)
        respawned_by = self._template[0] if self._successor is not None and self._template else None
        reason = self._classify(exit, stop_requested=False)
        if self._successor is not None:  # its output begins about now
            self._marks = file_marks(self.spec)
        self._last_exit = reason
        self._tell_parent(
            ChildExited(
                self.spec.id, self._incarnation, proc.pid, reason, exit.uptime, respawned_by
            )
        )

    def _on_forked(self, proc: ChildHandle) -> None:
        """Its first process handed over to a main process (pid file or MAINPID=)."""
        if self._notify is not None:
            self._notify.main_pid = proc.pid
        self._watch_memory(proc.pid)
        self._tell_parent(
            ChildNote(
                self.spec.id,
                self._incarnation,
                proc.pid,
                f"main process is now pid {proc.pid} (named by "
                + ("its pid file)" if self.spec.pid_file is not None else "MAINPID=)"),
                main_pid=proc.pid,
            )
        )

    def _forget(self, proc: ChildHandle, why: str, *, adopt: bool = False) -> ChildHandle | None:
        """The process is gone (or going): drop it, keep what it said. The successor the
        spawner started in its place is returned to `adopt` it (its exit is reported,
        and the decision may take it); else it is killed, and `why` says so."""
        successor = proc.take_successor()
        if not adopt:
            self._kill_successor(successor, why)
            successor = None
        if proc.exit is not None and proc.exit.lingering:
            self._tell_parent(lingering_note(self.spec.id, self._incarnation, proc.exit))
        if self._proc is proc:
            self._proc, self._paused = None, False
            self._liveness.stop()
        self._context.memory.unwatch(proc.pid)
        if self._memory_pid:
            self._context.memory.unwatch(self._memory_pid)
            self._memory_pid = 0
        self._previous_output = self._last_output
        self._last_output = {1: proc.output(1), 2: proc.output(2)}
        if self.status:  # what a process said of itself goes with it
            self.status = ""
            self._tell_parent(ChildStatus(self.spec.id, ""))
        return successor

    def _on_memory_exceeded(self, message: MemoryExceeded) -> None:
        proc = self._proc
        if proc is None or message.incarnation != self._incarnation:
            return
        exit, _ = self._terminate(proc)
        limit = self.spec.memory_limit
        reason = ExitReason(
            ExitKind.MEMORY_LIMIT,
            code=exit.returncode if exit.returncode >= 0 else None,
            signal=-exit.returncode if exit.returncode < 0 else None,
            message=f"its process tree used {message.rss} bytes of RSS, over memory_limit="
            f"{limit}; raise memory_limit or find the leak",
            stderr_tail=self._tail(exit.stderr),
        )
        self._report_exit(proc.pid, reason, exit.uptime)

    def _report_exit(self, pid: int, reason: ExitReason, uptime: float | None) -> None:
        self._last_exit = reason
        self._tell_parent(ChildExited(self.spec.id, self._incarnation, pid, reason, uptime))

    def _classify(self, exit: ProcessExit, *, stop_requested: bool) -> ExitReason:
        """Why the process ended: once per exit, in this actor's thread, by the core's
        rules (supervision.classify_exit)."""
        spec, error = self.spec, exit.error
        reason = classify_exit(
            exit.returncode,
            normal_exit_codes=frozenset(spec.normal_exit_codes),
            stop_requested=stop_requested,
            exc_type=error.type if error else None,
            exc_message=error.message if error else "",
            traceback=error.traceback if error else "",
            stderr_tail=self._tail(exit.stderr),
            launcher_died=exit.launcher_died,
            detached=exit.detached,
            child=spec.id,
            pid_file_timeout=spec.start_timeout if spec.pid_file is not None else None,
        )
        if reason.kind is ExitKind.DAEMONIZED:
            log.warning("%s", reason.message)
        return reason

    def _tail(self, stderr: bytes) -> str:
        """The last lines of its stderr (captured, or tee'd by the launcher), else of
        what its output files got since its start; bounded in lines and bytes."""
        return output_tail(stderr, self._marks)

    def _output(self, stream: int, previous: bool) -> bytes:
        """The current run's output (or the last one's once it ended); with
        `previous`, the run's before that."""
        if self._proc is not None and not previous:
            return self._proc.output(stream)
        if self._proc is not None or not previous:
            return self._last_output.get(stream, b"")
        return self._previous_output.get(stream, b"")

    def _tell_parent(self, message: Any) -> None:
        # A report to a supervisor that has stopped is normal (OTP drops a message to
        # a dead process): dropped, not raised into the handler as a crash.
        with contextlib.suppress(pykka.ActorDeadError):
            self._parent.tell(message)


def lingering_note(child: str, incarnation: int, exit: ProcessExit) -> ChildNote:
    """An exit reported before its process group was empty (docs/launcher.md, "A
    restart waits for the old group")."""
    return ChildNote(
        child,
        incarnation,
        exit.pid,
        f"pid {exit.pid} exited, and {exit.group_wait:.1f} s later its process group "
        f"still held processes (SIGKILLed, not yet gone: {exit.lingering} group(s) or "
        "process(es)); its successor may find what they hold (a port) still held",
    )


def _ran_out(proc: ChildHandle, timeout: float | None, capped: bool) -> StopOutcome:
    """A stop whose time is up: its exit if it came, else it is to be killed."""
    return StopOutcome(proc.exit, False, proc.exit is None, timeout, capped)
