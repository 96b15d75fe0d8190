"""A child's log file, read from the control socket's side: safely and in part."""

from __future__ import annotations

import os

from actors import open_read

MAX_TAIL = 64 * 1024


def open_log(path: str) -> int:
    """A child's log file for reading: never through a symlink a child's user could
    have put on the way, never a FIFO's block, never a hard link (`open_read`)."""
    return open_read(path)


def tail_file(path: str, limit: int = MAX_TAIL) -> str:
    """The last `limit` bytes of a log file, from a line start; "" if there is none yet."""
    try:
        fd = open_log(path)
    except FileNotFoundError:
        return ""
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - limit)
        data = os.pread(fd, limit, start)
    finally:
        os.close(fd)
    if start > 0 and b"\n" in data:
        data = data[data.index(b"\n") + 1 :]
    return data.decode(errors="replace")
