"""When a started child counts as started: the spec's `ready` (docs/launcher.md).

"started" at once; "notify" when a Python child calls `actors.child.ready()`; a
number of seconds alive; "sd_notify" when a command says READY=1 on its
NOTIFY_SOCKET; a `ReadyFile` once the file exists; with a pid file, once the
launcher found the main process; a probe (tcp, http, exec) once it passes (a
port must be the child's); a `LogLine` once a line of its output matches;
"exited" once it exited with a normal code. Each waits at most `start_timeout`,
and not a moment after the child exited (docs/health.md).
"""

from __future__ import annotations

import dataclasses
import os
import re
import select
import threading
import time
from collections.abc import Callable

from supervision import (
    ChildSpec,
    ExecProbe,
    ExitKind,
    ExitReason,
    HttpProbe,
    LogLine,
    ReadyFile,
    TcpProbe,
)
from supervision.spec._probes import Probe, ready_period

from .._process._port import ChildHandle, ProcessExit
from ._check_run import run_check
from ._ports import foreign_holder, process_tree
from ._prober import Prober
from ._request import StartProblem
from ._run_as import RunAs
from ._sd_notify import Notification, NotifyEndpoint
from ._start_output import RunHistory, last_line
from ._stopping import KILL_REPORT_GRACE

READY_FILE_POLL = 0.005  # seconds; a file appearing has no portable event to wait on
NOTIFY_POLL = 0.05  # seconds; how often a start waiting for READY=1 looks at the exit
EXIT_POLL = 0.01  # seconds; how often a probe's wait looks at the child's exit
LINE_LIMIT = 65536  # bytes of a line without its end kept for a LogLine match


class Waiting:
    """What a readiness wait learned: the last probe's error, for the reason."""

    def __init__(self) -> None:
        self.error = ""


def wait_ready(
    spec: ChildSpec,
    proc: ChildHandle,
    notify: NotifyEndpoint | None,
    take_note: Callable[[ChildHandle, Notification], None],
    prober: Prober | None = None,
    site: Callable[[], RunAs] | None = None,
    waiting: Waiting | None = None,
    settle: float = 0.0,
) -> bool:
    """True once the child is ready; False if it exited or start_timeout passed.
    `take_note` gets what an sd_notify child says meanwhile (STATUS=, MAINPID=);
    `waiting.error` what the last probe said; `settle`: seconds a "started" child
    must stay up (an operator's replace or insert)."""
    ready, timeout = spec.ready, spec.start_timeout
    waiting = Waiting() if waiting is None else waiting
    if isinstance(ready, TcpProbe | HttpProbe | ExecProbe):
        assert prober is not None
        deadline = time.monotonic() + timeout
        where = site() if site is not None else RunAs()  # only now: it reads the env
        return _wait_probe(ready, prober, where, proc, deadline, waiting)
    if isinstance(ready, LogLine):
        return _wait_line(ready, proc, time.monotonic() + timeout, waiting)
    if ready == "exited":
        exit = proc.wait(timeout)
        return exit is not None and exit.returncode in spec.normal_exit_codes
    if spec.pid_file is not None:
        # The launcher looks for the pid file until start_timeout and then says
        # Forked or Exited: its answer is waited for, a little past that.
        return proc.wait_ready(timeout + KILL_REPORT_GRACE)
    if ready == "started":
        return settle <= 0 or proc.wait(settle) is None
    if ready == "notify":
        return proc.wait_ready(timeout)
    if isinstance(ready, float):
        return proc.wait(ready) is None  # the spec keeps ready < start_timeout
    if ready == "sd_notify":
        assert notify is not None
        return _wait_notify(notify, proc, time.monotonic() + timeout, take_note)
    assert isinstance(ready, ReadyFile)
    deadline = time.monotonic() + timeout
    while not os.path.exists(ready.path):
        if proc.wait(READY_FILE_POLL) is not None or time.monotonic() > deadline:
            return False
    return True


def _wait_notify(
    endpoint: NotifyEndpoint,
    proc: ChildHandle,
    deadline: float,
    take_note: Callable[[ChildHandle, Notification], None],
) -> bool:
    """Until READY=1 on the child's NOTIFY_SOCKET, its exit, or the deadline."""
    while proc.exit is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        readable, _, _ = select.select([endpoint], [], [], min(left, NOTIFY_POLL))
        for note in endpoint.read() if readable else ():
            take_note(proc, note)
            if note.ready:
                return True
    return False


def _wait_probe(
    probe: Probe,
    prober: Prober,
    site: RunAs,
    proc: ChildHandle,
    deadline: float,
    waiting: Waiting,
) -> bool:
    """Until the probe passes (on the child's own port), the child exits, or the deadline."""
    period = ready_period(probe)
    while proc.exit is None:
        began = time.monotonic()
        if began >= deadline:
            return False
        answered, result = threading.Event(), list[tuple[bool, str]]()
        attempt = prober.attempt(probe, site, _collect(answered, result))
        while not answered.wait(EXIT_POLL):
            if proc.exit is not None or time.monotonic() >= deadline:
                attempt.cancel()
                return False
        ok, error = result[0]
        if ok and isinstance(probe, TcpProbe | HttpProbe):
            # The handle's pid is the main process (a forking daemon's once it handed over).
            error = foreign_holder(probe.port, process_tree(proc.pid)) or ""
            ok = not error
        if ok:
            return True
        waiting.error = f"{probe}: {error}"
        pause = min(period - (time.monotonic() - began), deadline - time.monotonic())
        if pause > 0 and proc.wait(pause) is not None:
            return False
    return False


def _collect(
    answered: threading.Event, result: list[tuple[bool, str]]
) -> Callable[[bool, str], None]:
    def done(ok: bool, error: str) -> None:
        result.append((ok, error))
        answered.set()

    return done


def _wait_line(line: LogLine, proc: ChildHandle, deadline: float, waiting: Waiting) -> bool:
    """Until a line of the child's output matches, it exits, or the deadline. A line
    is matched once it ends; what the child wrote before its exit is read too."""
    pattern = re.compile(line.pattern)
    offsets = {stream: 0 for stream in line.streams}
    partial = {stream: b"" for stream in line.streams}
    while True:
        ended = proc.exit is not None
        for stream in line.streams:
            data, offsets[stream] = proc.output_since(stream, offsets[stream])
            if not data:
                continue
            lines = (partial[stream] + data).split(b"\n")
            partial[stream] = lines.pop()[-LINE_LIMIT:]
            for text in lines:
                if pattern.search(text.decode(errors="replace")):
                    return not ended
        left = deadline - time.monotonic()
        if ended or left <= 0:
            waiting.error = f"no line of its output matched {line.pattern!r}"
            return False
        if len(line.streams) == 1:
            proc.wait_output(line.streams[0], offsets[line.streams[0]], min(left, NOTIFY_POLL))
        elif proc.wait(min(left, EXIT_POLL)) is not None:
            continue  # read what it wrote last, then give up


def start_check(spec: ChildSpec) -> None:
    """Its spec's start_check, before each start (systemd's ExecStartPre=): one that
    fails fails the start (StartProblem), with what it said."""
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


def not_ready(
    spec: ChildSpec, exit: ProcessExit, waiting: Waiting, history: RunHistory, *, killed: bool
) -> ExitReason:
    """Why a start failed: it ended (`exit`), or it was not ready in time and was
    `killed`."""
    if not killed:
        return exited_unready(history.classify(exit, stop_requested=False), waiting.error)
    if spec.pid_file is not None:
        why = (
            f"its first process did not exit within start_timeout="
            f"{spec.start_timeout}s; with pid_file the program must fork into "
            "the background and its first process exit 0 (systemd's Type=forking): "
            "drop pid_file for a program that stays in the foreground"
        )
    else:
        why = (
            f"not ready within start_timeout={spec.start_timeout}s "
            f"(ready={spec.ready!r}); make it ready sooner or raise start_timeout"
        )
        if waiting.error:
            why += f"; last: {waiting.error}"
    return ExitReason(ExitKind.START_TIMEOUT, message=why, stderr_tail=history.tail(exit.stderr))


def exited_unready(reason: ExitReason, probe_error: str) -> ExitReason:
    """The reason of a child that ended before it was ready: the cause first (its
    exit, then the last line it wrote: the traceback's exception, the `[emerg]`
    line), the readiness probe's last refusal after it, as what it was: a symptom."""
    if reason.message:
        return reason  # a Python target's exception, a daemonized program: its own words
    parts = [said] if (said := last_line(reason.stderr_tail)) else []
    if probe_error:
        parts.append(f"its readiness probe had found: {probe_error}")
    return dataclasses.replace(reason, message="; ".join(parts)) if parts else reason
