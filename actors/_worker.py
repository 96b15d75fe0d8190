"""WorkerActor: owns at most one OS process at a time; a restart replaces the
process, not the actor."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from types import TracebackType
from typing import Any, NoReturn

import cloudpickle
import pykka

from supervision import (
    CAPTURE,
    ChildNotRunning,
    ChildSpec,
    ExitKind,
    ExitReason,
    ReadyFile,
    StartError,
    classify_exit,
)

from ._launcher import ChildProcess, Launcher, LaunchError, ProcessExit, SpawnRequest
from ._memory import MemoryWatch
from ._messages import (
    ChildExited,
    Info,
    MemoryExceeded,
    Pause,
    ProcessExited,
    ReadOutput,
    Restart,
    Resume,
    Signal,
    Start,
    Started,
    Stop,
    WorkerInfo,
)

log = logging.getLogger("nannytree")
STDERR_TAIL_LINES = 20
READY_FILE_POLL = 0.005  # seconds; a file appearing has no portable event to wait on


class WorkerActor(pykka.ThreadingActor):
    """One child of a nanny: starts, stops, signals and watches its OS process.

    Its nanny asks it `Start`, `Stop`, `Restart`, `Signal`, `Pause`, `Resume`,
    `Info` and `ReadOutput`; it tells its nanny `ChildExited` when the process
    ends by itself.
    """

    use_daemon_thread = True

    def __init__(
        self,
        spec: ChildSpec,
        launcher: Launcher,
        parent: pykka.ActorRef[Any] | None,
        supervisor: str = "",
        memory: MemoryWatch | None = None,
    ) -> None:
        super().__init__()
        self.spec = spec
        self._launcher = launcher
        self._parent = parent
        self._supervisor = supervisor
        self._memory = memory
        self._proc: ChildProcess | None = None
        self._started_at = 0.0
        self._incarnation = 0
        self._paused = False
        self._last_exit: ExitReason | None = None
        self._last_output: dict[int, bytes] = {}
        self._previous_output: dict[int, bytes] = {}  # the run before, for logs --previous
        self._payload: bytes | None = None
        self._last_request: tuple[tuple[Any, ...], SpawnRequest] | None = None
        self._standby: tuple[int, SpawnRequest] | None = None  # warm_start: (id, its request)
        # Exits go straight from the exit watcher to the nanny (one hop), except those
        # of incarnations this actor handles itself (starting, stopping): "quiet" ones.
        self._handoff = threading.Lock()
        self._quiet: set[int] = set()
        self._swallowed: set[int] = set()

    # -- messages -------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, ProcessExited):
            return self._on_process_exited(message)
        if isinstance(message, Start):
            return self._start_process()
        if isinstance(message, Stop):
            return self._stop_process(message.deadline)
        if isinstance(message, MemoryExceeded):
            return self._on_memory_exceeded(message)
        if isinstance(message, Restart):
            self._stop_process()
            return self._start_process()
        if isinstance(message, Signal):
            return self._signal(message.sig, "send a signal to it")
        if isinstance(message, Pause):
            self._signal(signal.SIGSTOP, "pause it")
            self._paused = True
            return None
        if isinstance(message, Resume):
            self._signal(signal.SIGCONT, "resume it")
            self._paused = False
            return None
        if isinstance(message, ReadOutput):
            if message.previous:
                return self._previous_output.get(message.stream, b"").decode(errors="replace")
            return self._output(message.stream).decode(errors="replace")
        if isinstance(message, Info):
            return WorkerInfo(
                self.spec.id,
                self._proc.pid if self._proc else None,
                self._incarnation,
                self._paused,
                self._last_exit,
            )
        raise TypeError(f"worker {self.spec.id!r} got an unknown message {message!r}")

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # A bug here must not lose the child: kill the process, report the crash.
        with self._handoff:
            self._quiet.add(self._incarnation)
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(5.0)
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
        self._discard_standby()

    # -- start ------------------------------------------------------------------

    def _start_process(self) -> Started:
        if self._proc is not None:
            if self._proc.exit is None:
                return Started(self._proc.pid, self._incarnation)
            self._forget(self._proc)  # exited; its exit is on its way to the nanny
        request = self._request()
        ready = self.spec.ready
        if isinstance(ready, ReadyFile):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ready.path)  # a file left by the last incarnation proves nothing
        self._incarnation += 1
        incarnation = self._incarnation
        ref = self.actor_ref
        started_at = self._started_at = time.monotonic()
        with self._handoff:
            self._quiet, self._swallowed = {incarnation}, set()

        def on_exit(exit: ProcessExit) -> None:
            # In the exit watcher's thread: classify and tell the nanny at once.
            with self._handoff:
                if incarnation in self._quiet:
                    self._swallowed.add(incarnation)
                    return
            reason = self._exit_reason(exit, started_at, stop_requested=False)
            self._tell_parent(ChildExited(self.spec.id, incarnation, exit.pid, reason))
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(ProcessExited(incarnation, exit, reason))

        standby = self._take_standby(request)
        try:
            proc = self._launcher.spawn(request, on_exit=on_exit, standby=standby)
        except LaunchError as e:
            self._fail(ExitReason.start_failure(str(e)))
        self._previous_output = self._last_output or self._previous_output  # the run before
        self._proc, self._paused, self._last_output = proc, False, {}
        if not self._wait_ready(proc):
            exit = proc.exit
            if exit is None:
                self._kill_now(proc)
                reason = ExitReason(
                    ExitKind.START_TIMEOUT,
                    message=f"not ready within start_timeout={self.spec.start_timeout}s "
                    f"(ready={ready!r}); make it ready sooner or raise start_timeout",
                    stderr_tail=self._tail(proc.output(2)),
                )
            else:
                reason = self._exit_reason(exit, started_at, stop_requested=False)
            self._forget(proc)
            self._fail(reason)
        if self.spec.warm_start:
            # Refill behind the start: one standby at most, so a crash storm
            # cannot become a spawn storm.
            with contextlib.suppress(LaunchError, OSError):
                self._standby = (self._launcher.prepare(request), request)
        if self.spec.memory_limit is not None and self._memory is not None:
            limit = self.spec.memory_limit
            self._memory.watch(
                proc.pid,
                limit,
                lambda rss: ref.tell(MemoryExceeded(incarnation, rss)),
            )
        with self._handoff:
            self._quiet.discard(incarnation)
            swallowed = incarnation in self._swallowed
        if swallowed:  # it died while starting, after all: report it as any exit
            exit = proc.exit
            assert exit is not None
            self._forget(proc)
            reason = self._exit_reason(exit, started_at, stop_requested=False)
            self._report_exit(incarnation, proc.pid, reason)
        return Started(proc.pid, incarnation)

    def _take_standby(self, request: SpawnRequest) -> int | None:
        """The standby for this start, if its request (env, cwd, ...) still holds."""
        standby, self._standby = self._standby, None
        if standby is None:
            return None
        sid, prepared = standby
        if prepared != request:
            self._launcher.discard(sid)  # forked before env, cwd or sys.path changed
            return None
        return sid

    def _discard_standby(self) -> None:
        if self._standby is not None:
            self._launcher.discard(self._standby[0])
            self._standby = None

    def _wait_ready(self, proc: ChildProcess) -> bool:
        """True once the child is ready; False if it exited or start_timeout passed."""
        ready, timeout = self.spec.ready, self.spec.start_timeout
        if ready == "started":
            return True
        if ready == "notify":
            return proc.wait_ready(timeout)
        if isinstance(ready, float):
            return proc.wait(ready) is None  # the spec keeps ready < start_timeout
        assert isinstance(ready, ReadyFile)
        deadline = time.monotonic() + timeout
        while not os.path.exists(ready.path):
            if proc.wait(READY_FILE_POLL) is not None or time.monotonic() > deadline:
                return False
        return True

    def _fail(self, reason: ExitReason) -> NoReturn:
        self._last_exit = reason
        raise StartError(self._supervisor, self.spec.id, reason)

    def _request(self) -> SpawnRequest:
        """What to spawn, from the spec and the host's env, cwd and sys.path as they are now.

        Built again only when one of those changed since the last start: it is on
        the restart path.
        """
        key = (
            os.environ._data.copy() if self.spec.inherit_env else None,  # type: ignore[attr-defined]
            os.getcwd(),
            tuple(sys.path),
            tuple(sys.argv),
        )
        if self._last_request is not None and self._last_request[0] == key:
            return self._last_request[1]
        request = self._build_request()
        self._last_request = (key, request)
        return request

    def _build_request(self) -> SpawnRequest:
        spec = self.spec
        env = dict(os.environ) if spec.inherit_env else {}
        env.update(spec.env or {})
        common: dict[str, Any] = {
            "env": env,
            "cwd": os.fspath(spec.cwd) if spec.cwd is not None else os.getcwd(),
            "stdout": os.fspath(spec.stdout) if spec.stdout is not None else None,
            "stderr": os.fspath(spec.stderr) if spec.stderr is not None else None,
            "name": spec.id,
        }
        if spec.command is not None:
            return SpawnRequest(command=list(spec.command), **common)
        if self._payload is None:
            try:
                self._payload = cloudpickle.dumps((spec.target, spec.args, spec.kwargs))
            except Exception as e:
                self._fail(
                    ExitReason.start_failure(
                        f"field 'target': cannot be pickled ({type(e).__name__}: {e}); "
                        "pass what it needs as args, or create locks, sockets and "
                        "files inside the target"
                    )
                )
        return SpawnRequest(
            payload=self._payload,
            sys_path=list(sys.path),
            argv=list(sys.argv),
            fresh_interpreter=spec.fresh_interpreter,
            **common,
        )

    # -- stop ---------------------------------------------------------------------

    def _stop_process(self, deadline: float | None = None) -> ExitReason:
        self._discard_standby()  # part of the child: stopped with it
        proc = self._proc
        if proc is None:
            return self._last_exit or ExitReason.shutdown()
        exit, note = self._terminate(proc, deadline)
        reason = self._exit_reason(exit, self._started_at, stop_requested=True)
        if note:
            reason = ExitReason(ExitKind.SHUTDOWN, signal=reason.signal, message=note)
        self._last_exit = reason
        return reason

    def _terminate(
        self, proc: ChildProcess, deadline: float | None = None
    ) -> tuple[ProcessExit, str]:
        """The shutdown protocol: SIGTERM, wait `shutdown` s, SIGKILL; or at once / forever.

        A `deadline` from a supervisor above cuts the wait short.
        """
        with self._handoff:
            self._quiet.add(self._incarnation)  # this exit is ours to report, or not
        if self._memory is not None:
            self._memory.unwatch(proc.pid)
        note = ""
        shutdown = self.spec.shutdown
        exit: ProcessExit | None = None
        if shutdown != "brutal_kill":
            proc.send_signal(signal.SIGTERM)
            if self._paused:
                proc.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            timeout = None if shutdown == "infinity" else float(shutdown)
            capped = False
            if deadline is not None:
                left = max(0.0, deadline - time.monotonic())
                capped = timeout is None or left < timeout
                timeout = left if capped else timeout
            exit = proc.wait(timeout)
            if exit is None and capped:
                note = "still running at its supervisor's shutdown deadline; killed with SIGKILL"
            elif exit is None:
                note = f"ignored SIGTERM for {timeout}s; killed with SIGKILL"
            if exit is None:
                log.warning("child %r (pid %d) %s", self.spec.id, proc.pid, note)
        if exit is None:
            exit = self._kill_now(proc)
        self._forget(proc)
        return exit, note

    def _kill_now(self, proc: ChildProcess) -> ProcessExit:
        proc.send_signal(signal.SIGKILL)
        exit = proc.wait()
        assert exit is not None
        return exit

    # -- signals and exits ------------------------------------------------------------

    def _signal(self, sig: int, what: str) -> None:
        if self._proc is None or not self._proc.send_signal(sig):
            raise ChildNotRunning(self._supervisor, self.spec.id, what)

    def _on_process_exited(self, message: ProcessExited) -> None:
        """Bookkeeping only: the exit watcher already told the nanny."""
        proc = self._proc
        if proc is None or message.incarnation != self._incarnation or proc.pid != message.exit.pid:
            return  # consumed by a stop, or from an older incarnation
        self._forget(proc, message.reason)

    def _forget(self, proc: ChildProcess, reason: ExitReason | None = None) -> None:
        """The process is gone (or going): drop it, keep what it said."""
        if self._proc is proc:
            self._proc, self._paused = None, False
        if self._memory is not None:
            self._memory.unwatch(proc.pid)
        self._last_output = {1: proc.output(1), 2: proc.output(2)}
        if reason is not None:
            self._last_exit = reason

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
        self._report_exit(message.incarnation, proc.pid, reason)

    def _report_exit(self, incarnation: int, pid: int, reason: ExitReason) -> None:
        self._last_exit = reason
        self._tell_parent(ChildExited(self.spec.id, incarnation, pid, reason))

    def _exit_reason(
        self, exit: ProcessExit, started_at: float, *, stop_requested: bool
    ) -> ExitReason:
        """Classify an exit once. Reads only the spec: safe in the exit watcher's thread."""
        if exit.launcher_died and not stop_requested:
            return ExitReason(ExitKind.LAUNCHER_DIED, signal=-exit.returncode)
        error = exit.error
        reason = classify_exit(
            exit.returncode,
            normal_exit_codes=frozenset(self.spec.normal_exit_codes),
            stop_requested=stop_requested,
            exc_type=error.type if error else None,
            exc_message=error.message if error else "",
            traceback=error.traceback if error else "",
            stderr_tail=self._tail(exit.stderr),
        )
        uptime = time.monotonic() - started_at
        if stop_requested or uptime >= self.spec.min_uptime:
            return reason
        return ExitReason(
            ExitKind.START_FAILURE,
            code=reason.code,
            signal=reason.signal,
            exc_type=reason.exc_type,
            message=f"exited after {uptime:.3f}s, before min_uptime={self.spec.min_uptime}s "
            f"({reason})",
            traceback=reason.traceback,
            stderr_tail=reason.stderr_tail,
        )

    def _tail(self, stderr: bytes) -> str:
        if self.spec.stderr != CAPTURE:
            return ""
        lines = stderr.decode(errors="replace").splitlines()
        return "\n".join(lines[-STDERR_TAIL_LINES:])

    def _output(self, stream: int) -> bytes:
        if self._proc is not None:
            return self._proc.output(stream)
        return self._last_output.get(stream, b"")

    def _tell_parent(self, message: ChildExited) -> None:
        if self._parent is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                self._parent.tell(message)
