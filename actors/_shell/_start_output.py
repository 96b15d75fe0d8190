"""What a child wrote before it ended, for the reason of a failed start or an exit;
and what a worker keeps of its runs (`RunHistory`), with the one classification of
an exit (on the worker's thread, or on the reader's for an exit it reports).

Its stderr reaches the host when the launcher tees it (docs/launcher.md, "Tee'd
output"); a stream that goes to a file without a tee (stdout by default, stderr
when the launcher had no fd to spare) is read back from that file: only what
was appended since this incarnation's start (the size the file had then), at most
TAIL_BYTES of it.
"""

from __future__ import annotations

import logging
import os
import re
import stat

from supervision import ChildSpec, ExitKind, ExitReason, classify_exit

from .._launcher._journal import identifier_of
from .._process._port import ChildHandle, ProcessExit

log = logging.getLogger("nannytree")

TAIL_LINES = 20
TAIL_BYTES = 4096


def file_marks(spec: ChildSpec) -> dict[str, int]:
    """The size of each file the child's output goes to, before its start: where
    this incarnation's output begins (stderr's file first)."""
    marks: dict[str, int] = {}
    for path in (spec.stderr, spec.stdout):
        if path is None or path == "capture" or identifier_of(path) is not None:
            continue
        name = os.fspath(path)
        try:
            marks.setdefault(name, os.stat(name).st_size)
        except OSError:
            marks.setdefault(name, 0)  # created by the start: all of it is this one's
    return marks


def tail_text(data: bytes) -> str:
    """The last lines of `data`, bounded in lines and bytes."""
    lines = data[-TAIL_BYTES:].decode(errors="replace").splitlines()
    return "\n".join(lines[-TAIL_LINES:])


# Control characters a child may write (C0, DEL, C1, bidi): escaped in a reason's text.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
LAST_LINE_CHARS = 300


def last_line(tail: str) -> str:
    """The last line with something on it of what a child wrote (a traceback's
    exception, nginx's `[emerg]` line): bounded, its control characters escaped."""
    for line in reversed(tail.splitlines()):
        if line.strip():
            line = line.strip()[-LAST_LINE_CHARS:]
            return _UNSAFE.sub(lambda m: f"\\x{ord(m.group()):02x}", line)
    return ""


def output_tail(stderr: bytes, marks: dict[str, int]) -> str:
    """The last lines the child wrote: its tee'd or captured stderr, else what its
    files got since `marks` (the first file with something in it)."""
    if stderr:
        return tail_text(stderr)
    for path, mark in marks.items():
        data = _since(path, mark)
        if data.strip():
            return tail_text(data)
    return ""


def _since(path: str, mark: int) -> bytes:
    """The last TAIL_BYTES of what `path` got after its first `mark` bytes (all of it
    if it was truncated or replaced since: shorter than the mark)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return b""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return b""  # a terminal, a pipe, /dev/null: nothing to read back
        size = info.st_size
        begin = mark if size >= mark else 0
        begin = max(begin, size - TAIL_BYTES)
        return os.pread(fd, size - begin, begin) if size > begin else b""
    except OSError:
        return b""
    finally:
        os.close(fd)


class RunHistory:
    """What a worker keeps of its runs: where the current run's output begins in its
    files, the last run's and the one before's output (logs --previous), and why the
    last one ended."""

    def __init__(self, spec: ChildSpec) -> None:
        self._spec = spec
        self.marks: dict[str, int] = {}
        self.last: dict[int, bytes] = {}
        self.previous: dict[int, bytes] = {}
        self.last_exit: ExitReason | None = None

    def mark(self) -> None:
        """A run begins about now: its output files are read back from here."""
        self.marks = file_marks(self._spec)

    def tail(self, stderr: bytes) -> str:
        """The last lines of its stderr, else of what its files got since its start."""
        return output_tail(stderr, self.marks)

    def classify(self, exit: ProcessExit, *, stop_requested: bool) -> ExitReason:
        """Why the process ended: once per exit, by the core's rules
        (supervision.classify_exit), with the last lines it wrote."""
        spec, error = self._spec, exit.error
        reason = classify_exit(
            exit.returncode,
            normal_exit_codes=frozenset(spec.normal_exit_codes),
            stop_requested=stop_requested,
            exc_type=error.type if error else None,
            exc_message=error.message if error else "",
            traceback=error.traceback if error else "",
            stderr_tail=self.tail(exit.stderr),
            launcher_died=exit.launcher_died,
            detached=exit.detached,
            child=spec.id,
            pid_file_timeout=spec.start_timeout if spec.pid_file is not None else None,
        )
        if reason.kind is ExitKind.DAEMONIZED:
            log.warning("%s", reason.message)
        return reason

    def keep(self, proc: ChildHandle) -> None:
        """A run ended: what it said becomes the last run's."""
        self.previous = self.last
        self.last = {1: proc.output(1), 2: proc.output(2)}

    def output(self, proc: ChildHandle | None, stream: int, previous: bool) -> bytes:
        """The current run's output (or the last one's once it ended); with
        `previous`, the run's before that."""
        if proc is not None and not previous:
            return proc.output(stream)
        if proc is not None or not previous:
            return self.last.get(stream, b"")
        return self.previous.get(stream, b"")
