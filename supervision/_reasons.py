"""Why a child stopped: one value, classified once, by the worker."""

from __future__ import annotations

import signal as _signal
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum


class ExitKind(StrEnum):
    NORMAL = "normal"  # exit code in the spec's normal_exit_codes
    SHUTDOWN = "shutdown"  # the supervisor stopped it, or a supervisor gave up
    EXIT_CODE = "exit_code"  # any other exit code
    KILLED = "killed"  # killed by a signal the supervisor did not send
    EXCEPTION = "exception"  # a Python target raised
    START_FAILURE = "start_failure"  # could not be spawned at all
    START_TIMEOUT = "start_timeout"  # not ready within start_timeout
    MEMORY_LIMIT = "memory_limit"  # stopped for using more than memory_limit
    LAUNCHER_DIED = "launcher_died"  # the process that spawned it died
    ACTOR_CRASHED = "actor_crashed"  # a bug in the actor that owned it
    WATCHDOG = "watchdog"  # alive but silent: no heartbeat within the spec's watchdog
    UNHEALTHY = "unhealthy"  # alive but failing: its liveness probe failed too often
    # A command's first process exited 0 leaving a process of its tree running: it
    # forked itself into the background without a pid_file (those were killed).
    DAEMONIZED = "daemonized"
    # Multi-host (a remote subtree): all abnormal; a remote give-up crosses as SHUTDOWN.
    REMOTE_CRASH = "remote_crash"  # the remote supervisor's process died (cause kept)
    NODE_DOWN = "node_down"  # its node was declared dead (Erlang's noconnection)
    REMOTE_UNRESPONSIVE = "remote_unresponsive"  # the opt-in liveness ping timed out


@dataclass(frozen=True)
class ExitReason:
    """Why a child stopped. `is_normal` follows OTP: only `normal` and `shutdown`.

    Abnormal reasons carry what explains them: the exit code, the signal, the
    exception's type, message and traceback, and the tail of captured stderr.
    """

    kind: ExitKind
    code: int | None = None
    signal: int | None = None
    exc_type: str | None = None
    message: str = ""
    traceback: str = ""
    stderr_tail: str = ""

    @property
    def is_normal(self) -> bool:
        return self.kind in (ExitKind.NORMAL, ExitKind.SHUTDOWN)

    @classmethod
    def normal(cls, code: int = 0) -> ExitReason:
        return cls(ExitKind.NORMAL, code=code)

    @classmethod
    def shutdown(cls, message: str = "") -> ExitReason:
        return cls(ExitKind.SHUTDOWN, message=message)

    @classmethod
    def start_failure(cls, message: str) -> ExitReason:
        return cls(ExitKind.START_FAILURE, message=message)

    @classmethod
    def daemonized(cls, message: str) -> ExitReason:
        """A command that forked itself into the background without a pid_file."""
        return cls(ExitKind.DAEMONIZED, code=0, message=message)

    @classmethod
    def watchdog(cls, seconds: float) -> ExitReason:
        """A child stopped because it sent no heartbeat for `seconds` (systemd's WatchdogSec=)."""
        return cls(ExitKind.WATCHDOG, message=f"no heartbeat for {seconds:g} s")

    @classmethod
    def unhealthy(cls, failures: int, probe: str, error: str) -> ExitReason:
        """A child stopped because `failures` liveness probes in a row failed."""
        return cls(
            ExitKind.UNHEALTHY,
            message=f"{failures} failed liveness probes in a row ({probe}): {error}",
        )

    def __str__(self) -> str:
        if self.kind is ExitKind.EXIT_CODE:
            text = f"exit code {self.code}"
        elif self.kind is ExitKind.KILLED:
            text = f"killed by {signal_name(self.signal)}"
        elif self.kind is ExitKind.EXCEPTION:
            text = f"{self.exc_type}: {self.message}" if self.message else f"{self.exc_type}"
        elif self.message:
            text = f"{self.kind.value}: {self.message}"
        else:
            text = self.kind.value
        if self.message and self.kind in (ExitKind.EXIT_CODE, ExitKind.KILLED):
            text += f" ({self.message})"  # e.g. what its readiness probe found
        return text


def signal_name(signum: int | None) -> str:
    if signum is None:
        return "a signal"
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def classify_exit(
    returncode: int,
    *,
    normal_exit_codes: Collection[int] = frozenset({0}),
    stop_requested: bool = False,
    exc_type: str | None = None,
    exc_message: str = "",
    traceback: str = "",
    stderr_tail: str = "",
    launcher_died: bool = False,
    detached: Sequence[int] = (),
    child: str = "",
    pid_file_timeout: float | None = None,
) -> ExitReason:
    """Classify a process exit (returncode as subprocess gives it: -N = signal N).

    Every rule, in order: a child whose launcher died died with it (a stop asked for
    is still a stop); a first process that exited 0 leaving `detached` processes of
    its tree running daemonized itself; a `PidFileError` of a child with a pid file
    (`pid_file_timeout` is its start_timeout) is a failed start; then OTP's: a stop
    is `shutdown`, then what a Python target raised, a normal code, a signal, a code.
    """
    code = returncode if returncode >= 0 else None
    sig = -returncode if returncode < 0 else None
    if launcher_died and not stop_requested:
        return ExitReason(
            ExitKind.LAUNCHER_DIED,
            signal=sig,
            message="the launcher process died, and its children with it",
            stderr_tail=stderr_tail,
        )
    if detached and returncode == 0 and not stop_requested:
        return ExitReason.daemonized(daemonized_message(child, list(detached)))
    if exc_type == "PidFileError" and pid_file_timeout is not None:
        return ExitReason.start_failure(
            f"{exc_message} within start_timeout={pid_file_timeout}s after its first "
            "process exited 0; check pid_file (the path the program writes) or raise "
            "start_timeout"
        )
    if stop_requested:
        return ExitReason(ExitKind.SHUTDOWN, code=code, signal=sig)
    if exc_type is not None:
        return ExitReason(
            ExitKind.EXCEPTION,
            code=code,
            exc_type=exc_type,
            message=exc_message,
            traceback=traceback,
            stderr_tail=stderr_tail,
        )
    if code is not None and code in normal_exit_codes:
        return ExitReason(ExitKind.NORMAL, code=code)
    if sig is not None:
        return ExitReason(ExitKind.KILLED, signal=sig, stderr_tail=stderr_tail)
    return ExitReason(ExitKind.EXIT_CODE, code=code, stderr_tail=stderr_tail)


def daemonized_message(child: str, pids: list[int]) -> str:
    """What to tell the operator when a first process exited 0 but left a daemon behind."""
    shown = ", ".join(map(str, pids[:5]))
    return (
        f"child {child!r}: the program daemonized itself (its first process exited 0, "
        f"pid {shown} still runs); set pid_file=... to the file it writes its pid to, "
        "or run it in the foreground (preferred, e.g. nginx -g 'daemon off;')"
    )
