"""Why a child stopped: one value, classified once, by the worker."""

from __future__ import annotations

import signal as _signal
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum


class ExitKind(StrEnum):
    """Why a child stopped, in one word: `EXIT_KIND_MEANINGS` says what each means."""

    NORMAL = "normal"
    SHUTDOWN = "shutdown"
    EXIT_CODE = "exit_code"
    KILLED = "killed"
    EXCEPTION = "exception"
    START_FAILURE = "start_failure"
    START_TIMEOUT = "start_timeout"
    MEMORY_LIMIT = "memory_limit"
    LAUNCHER_DIED = "launcher_died"
    ACTOR_CRASHED = "actor_crashed"
    WATCHDOG = "watchdog"
    UNHEALTHY = "unhealthy"
    DAEMONIZED = "daemonized"
    # Multi-host (a remote subtree): all abnormal; a remote give-up crosses as SHUTDOWN.
    REMOTE_CRASH = "remote_crash"
    NODE_DOWN = "node_down"
    REMOTE_UNRESPONSIVE = "remote_unresponsive"


EXIT_KIND_MEANINGS: dict[ExitKind, str] = {
    ExitKind.NORMAL: "It exited with a code in the spec's normal_exit_codes (default 0).",
    ExitKind.SHUTDOWN: "Its supervisor stopped it (a stop, a restart of its group, the "
    "tree's shutdown), or a supervisor gave up.",
    ExitKind.EXIT_CODE: "It exited with any other code (in `code`).",
    ExitKind.KILLED: "A signal the supervisor did not send killed it (in `signal`).",
    ExitKind.EXCEPTION: "A Python target raised: the exception's type, message and "
    "traceback text travel with the reason.",
    ExitKind.START_FAILURE: "It could not be started: the program is missing or not "
    "executable, start_check failed, it exited while its readiness was awaited, or "
    "sooner than min_uptime.",
    ExitKind.START_TIMEOUT: "It was not ready within start_timeout.",
    ExitKind.MEMORY_LIMIT: "It was stopped for using more than memory_limit (RSS of "
    "its process tree).",
    ExitKind.LAUNCHER_DIED: "The launcher process that spawned it died, and its children with it.",
    ExitKind.ACTOR_CRASHED: "The actor that owned it crashed (a bug in nannytree).",
    ExitKind.WATCHDOG: "Alive but silent: no heartbeat within the spec's watchdog "
    "(WATCHDOG=1, or actors.child.heartbeat()).",
    ExitKind.UNHEALTHY: "Alive but failing: its liveness probe failed `failures` times in a row.",
    ExitKind.DAEMONIZED: "A command's first process exited 0 leaving a process of its "
    "tree running: it forked itself into the background without a pid_file (those "
    "processes were killed).",
    ExitKind.REMOTE_CRASH: "A remote subtree: its supervisor's process died (the cause is kept).",
    ExitKind.NODE_DOWN: "A remote subtree: its node was declared dead (Erlang's noconnection).",
    ExitKind.REMOTE_UNRESPONSIVE: "A remote subtree: the opt-in liveness ping "
    "(liveness_timeout) went unanswered.",
}
"""What each ExitKind means (the site's reference is made from it)."""


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
