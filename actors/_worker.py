"""WorkerActor: owns at most one OS process at a time; a restart replaces the
process, not the actor."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from types import TracebackType
from typing import Any, NoReturn

import cloudpickle
import pykka

from supervision import (
    ChildNotRunning,
    ChildSpec,
    ExitKind,
    ExitReason,
    StartError,
    classify_exit,
)

from ._launcher import ChildProcess, Launcher, LaunchError, ProcessExit, SpawnRequest
from ._messages import (
    ChildExited,
    Info,
    Pause,
    ProcessExited,
    Restart,
    Resume,
    Signal,
    Start,
    Started,
    Stop,
    WorkerInfo,
)

log = logging.getLogger("nannytree")


class WorkerActor(pykka.ThreadingActor):
    """One child of a nanny: starts, stops, signals and watches its OS process.

    Its nanny asks it `Start`, `Stop`, `Restart`, `Signal`, `Pause`, `Resume`
    and `Info`; it tells its nanny `ChildExited` when the process ends by itself.
    """

    use_daemon_thread = True

    def __init__(
        self,
        spec: ChildSpec,
        launcher: Launcher,
        parent: pykka.ActorRef[Any] | None,
        supervisor: str = "",
    ) -> None:
        super().__init__()
        self.spec = spec
        self._launcher = launcher
        self._parent = parent
        self._supervisor = supervisor
        self._proc: ChildProcess | None = None
        self._incarnation = 0
        self._paused = False
        self._last_exit: ExitReason | None = None
        self._payload: bytes | None = None

    # -- messages -------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, ProcessExited):
            return self._on_process_exited(message)
        if isinstance(message, Start):
            return self._start_process()
        if isinstance(message, Stop):
            return self._stop_process()
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
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(5.0)
        reason = ExitReason(
            ExitKind.ACTOR_CRASHED,
            exc_type=exception_type.__name__ if exception_type else None,
            message=str(exception_value),
        )
        self._tell_parent(ChildExited(self.spec.id, self._incarnation, None, reason))

    def on_stop(self) -> None:
        # The nanny stops its children before its workers; this is the backstop.
        if self._proc is not None:
            self._stop_process()

    # -- start ------------------------------------------------------------------

    def _start_process(self) -> Started:
        if self._proc is not None:
            return Started(self._proc.pid, self._incarnation)
        request = self._request()
        self._incarnation += 1
        incarnation = self._incarnation
        ref = self.actor_ref

        def on_exit(exit: ProcessExit) -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(ProcessExited(incarnation, exit))

        try:
            proc = self._launcher.spawn(request, on_exit=on_exit)
        except LaunchError as e:
            self._fail(ExitReason.start_failure(str(e)))
        self._proc, self._paused = proc, False
        if self.spec.ready == "notify" and not proc.wait_ready(self.spec.start_timeout):
            self._proc = None
            exit = proc.exit
            if exit is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                self._fail(
                    ExitReason(
                        ExitKind.START_TIMEOUT,
                        message=f"not ready within start_timeout={self.spec.start_timeout}s; "
                        "call actors.child.ready() sooner or raise start_timeout",
                    )
                )
            self._fail(self._classify(exit, stop_requested=False))
        return Started(proc.pid, incarnation)

    def _fail(self, reason: ExitReason) -> NoReturn:
        self._last_exit = reason
        raise StartError(self._supervisor, self.spec.id, reason)

    def _request(self) -> SpawnRequest:
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
                        f"target cannot be pickled ({type(e).__name__}: {e}); "
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

    def _stop_process(self) -> ExitReason:
        proc = self._proc
        if proc is None:
            return self._last_exit or ExitReason.shutdown()
        shutdown = self.spec.shutdown
        note = ""
        if shutdown == "brutal_kill":
            proc.send_signal(signal.SIGKILL)
            exit = proc.wait()
        else:
            proc.send_signal(signal.SIGTERM)
            if self._paused:
                proc.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
            timeout = None if shutdown == "infinity" else float(shutdown)
            exit = proc.wait(timeout)
            if exit is None:
                note = f"ignored SIGTERM for {timeout}s; killed with SIGKILL"
                log.warning("child %r (pid %d) %s", self.spec.id, proc.pid, note)
                proc.send_signal(signal.SIGKILL)
                exit = proc.wait()
        assert exit is not None
        self._proc, self._paused = None, False
        reason = self._classify(exit, stop_requested=True)
        if note:
            reason = ExitReason(ExitKind.SHUTDOWN, signal=reason.signal, message=note)
        self._last_exit = reason
        return reason

    # -- signals and exits ------------------------------------------------------------

    def _signal(self, sig: int, what: str) -> None:
        if self._proc is None or not self._proc.send_signal(sig):
            raise ChildNotRunning(self._supervisor, self.spec.id, what)

    def _on_process_exited(self, message: ProcessExited) -> None:
        proc = self._proc
        if proc is None or message.incarnation != self._incarnation or proc.pid != message.exit.pid:
            return  # consumed by a stop, or from an older incarnation
        self._proc, self._paused = None, False
        reason = self._classify(message.exit, stop_requested=False)
        self._last_exit = reason
        self._tell_parent(ChildExited(self.spec.id, message.incarnation, proc.pid, reason))

    def _classify(self, exit: ProcessExit, *, stop_requested: bool) -> ExitReason:
        if exit.launcher_died and not stop_requested:
            return ExitReason(ExitKind.LAUNCHER_DIED, signal=-exit.returncode)
        error = exit.error
        return classify_exit(
            exit.returncode,
            normal_exit_codes=frozenset(self.spec.normal_exit_codes),
            stop_requested=stop_requested,
            exc_type=error.type if error else None,
            exc_message=error.message if error else "",
            traceback=error.traceback if error else "",
        )

    def _tell_parent(self, message: ChildExited) -> None:
        if self._parent is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                self._parent.tell(message)
