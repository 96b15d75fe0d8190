"""What a child wrote before it ended, for the reason of a failed start or an exit.

Its stderr reaches the host when the launcher tees it (docs/launcher.md, "Tee'd
output"); a stream that goes to a file without a tee (stdout by default, stderr
when the launcher had no fd to spare) is read back from that file: only what
was appended since this incarnation's start (the size the file had then), at most
TAIL_BYTES of it.
"""

from __future__ import annotations

import os
import stat

from supervision import ChildSpec

TAIL_LINES = 20
TAIL_BYTES = 4096


def file_marks(spec: ChildSpec) -> dict[str, int]:
    """The size of each file the child's output goes to, before its start: where
    this incarnation's output begins (stderr's file first)."""
    marks: dict[str, int] = {}
    for path in (spec.stderr, spec.stdout):
        if path is None or path == "capture":
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
