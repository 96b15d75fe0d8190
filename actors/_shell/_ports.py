"""Whose is a listening port: a TCP or HTTP readiness must be answered by the child.

A probe that connects proves that something listens, not that the child does: a
second copy of a service (a test run beside another, an old instance that kept
the port) answers as well. The kernel says which socket listens on a port
(/proc/net/tcp and tcp6, state LISTEN) and which process holds that socket (its
/proc/PID/fd links); the child owns the port when the child's main process or
one of its descendants holds it. Linux only, read once per readiness, not per
liveness probe (docs/health.md).
"""

from __future__ import annotations

import psutil

from .._launcher._procfs import holds_socket, listening_inodes


def process_tree(pid: int) -> list[int]:
    """`pid` and its living descendants (empty if `pid` is gone)."""
    try:
        proc = psutil.Process(pid)
        return [pid, *(c.pid for c in proc.children(recursive=True))]
    except psutil.Error:
        return []


def _describe(pid: int) -> str:
    try:
        name = psutil.Process(pid).name()
    except psutil.Error:
        return f"pid {pid}"
    return f"pid {pid} ({name})"


def foreign_holder(port: int, pids: list[int]) -> str | None:
    """None when one of `pids` listens on `port`; else what does, as an error text."""
    inodes = listening_inodes(port)
    if not inodes:
        # Something answered, yet nothing of this network namespace listens: a port
        # forwarded from elsewhere (a container, an SSH tunnel) is not the child's.
        return f"port {port} answers, but no process on this host listens on it (not this child)"
    links = {f"socket:[{inode}]" for inode in inodes}
    if any(holds_socket(pid, links) for pid in pids):
        return None
    ours = set(pids)
    for pid in psutil.pids():
        if pid not in ours and holds_socket(pid, links):
            return f"port {port} is held by {_describe(pid)}, not this child"
    return f"port {port} is held by a process this user cannot see, not this child"
