"""A check command run for a child: its reload's check (`_reload.py`) and its
`start_check` (`_worker.py`), as systemd's ExecReload= check and ExecStartPre=: an
argv run as the child (`_run_as.py`: its ids, environment and cwd; as nannytree in /
when the spec says as_root), in a session of its own, bounded by a timeout, its output
kept (the last CHECK_OUTPUT bytes) to say why it failed. When it ends, by itself or
at its timeout, whatever it left in its group is killed."""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from supervision import ChildSpec

from .._runtime._pooled import blocking
from ._run_as import RunAs, run_as

CHECK_OUTPUT = 2048  # bytes of a failed check's output kept
READ = 65536  # bytes read at a time


@dataclass(frozen=True)
class CheckFailed:
    """Why a check failed (`why`: "its check 'nginx -t' exited 1") and what it said."""

    why: str
    output: str = ""

    def __str__(self) -> str:
        return f"{self.why}: {self.output}" if self.output else self.why


def run_check(
    spec: ChildSpec,
    argv: Sequence[str],
    timeout: float,
    name: str,
    *,
    as_root: bool = False,
) -> CheckFailed | None:
    """Run `argv` as the child's `name` ("check", "start_check"); None if it exited 0."""
    command = shlex.join(argv)
    site = run_as(spec, argv[0], as_root=as_root)
    if site.error:
        return CheckFailed(f"its {name} {command!r} could not run: {site.error}")
    try:
        with blocking():
            code, tail = _run(list(argv), site, timeout)
    except OSError as e:
        return CheckFailed(f"its {name} {command!r} could not run: {e}")
    said = bytes(tail).decode(errors="replace").strip()
    if code is None:
        return CheckFailed(f"its {name} {command!r} ran over {timeout}s", said)
    if code == 0:
        return None
    return CheckFailed(f"its {name} {command!r} exited {code}", said)


def _run(argv: list[str], site: RunAs, timeout: float) -> tuple[int | None, bytearray]:
    """(its exit code, or None at the timeout; the last CHECK_OUTPUT bytes it wrote)."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its group is killed when it ends
        close_fds=True,
        **site.popen(),
    )
    assert proc.stdout is not None
    out = proc.stdout.fileno()
    os.set_blocking(out, False)
    tail = bytearray()
    exited = False
    pidfd = -1
    try:
        pidfd = os.pidfd_open(proc.pid)
        poll = select.poll()
        poll.register(out, select.POLLIN)
        poll.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while not exited and (left := deadline - time.monotonic()) > 0:
            for fd, _ in poll.poll(left * 1000):
                if fd == pidfd:
                    exited = True
                elif _read(out, tail) is False:
                    poll.unregister(out)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            # Unreaped, its pid still names its group: what it left there goes too.
            os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
        with contextlib.suppress(OSError):
            while _read(out, tail):  # what is left in the pipe: its writers are gone
                pass
        proc.stdout.close()
        if pidfd >= 0:
            os.close(pidfd)
    return (code if exited else None), tail


def _read(fd: int, tail: bytearray) -> bool | None:
    """One read into `tail`, kept to its last CHECK_OUTPUT bytes: True if it got some,
    False at the end of the output, None when there is nothing now."""
    try:
        data = os.read(fd, READ)
    except BlockingIOError:
        return None
    tail += data
    del tail[:-CHECK_OUTPUT]
    return bool(data)
