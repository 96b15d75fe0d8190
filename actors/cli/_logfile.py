"""A child's log file, read from the control socket's side: safely and in part."""

from __future__ import annotations

import os
import stat

MAX_TAIL = 64 * 1024


def open_log(path: str) -> int:
    """A child's log file for reading: never through a symlink, never a FIFO's block."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path} is not a regular file")
    return fd


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
