"""Targets for the restart benchmark, in a module that imports only the stdlib:
a fresh interpreter pays for the target's imports, and the floor imports nothing
beyond socket and time either."""

from __future__ import annotations

import socket
import time


def mark_and_sleep(path: str) -> None:
    """Send time.monotonic() to `path` as the first thing, then run until killed."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(repr(time.monotonic()).encode(), path)
    while True:
        time.sleep(3600)


def exit_at_once() -> None:
    raise SystemExit(1)
