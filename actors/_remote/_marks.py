"""Which processes of this host belong to which remote incarnation, and making sure
an older incarnation of a subtree is gone before a new one starts its children here.

A remote host marks its process environment with `NANNYTREE_REMOTE` before it
starts its tree: `<subtree>|<incarnation token>|<host pid>`, where the subtree
names the parent tree's engine and the subtree's path. Its launcher, the
launcher's guardian and every child inherit the mark (a child that does not
inherit the environment, or runs as a `user`, gets it in its spec's env), and so do
their own children.

A new incarnation placed where an older one of the same subtree ran (a restart
after `remote_crash` or `remote_unresponsive` keeps its node) looks for marked
processes of any other incarnation first: it kills their remote host if it still
runs (hung or frozen, so its launcher sweeps), then whatever is left, and starts
its children only once none is left (docs/multihost.md section 5). Linux only:
it reads /proc.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time

import psutil

from supervision import ChildSpec, SupervisorSpec

MARK = "NANNYTREE_REMOTE"
POLL = 0.02
# A launcher sweeps within half a second of its host's death (HOST_GONE_GRACE in
# actors/_launcher/_main.py); what is left after this is killed here.
SWEEP_WAIT = 1.0


@dataclasses.dataclass(frozen=True)
class Mark:
    """One remote incarnation: its subtree (engine and path), token and host pid."""

    subtree: str
    token: str
    host: int

    def value(self) -> str:
        return f"{self.subtree}|{self.token}|{self.host}"

    @classmethod
    def parse(cls, value: str) -> Mark | None:
        parts = value.rsplit("|", 2)
        if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]))


def marked_spec(spec: SupervisorSpec, mark: Mark) -> SupervisorSpec:
    """`spec` with the mark in the env of every child that does not inherit ours."""
    children: list[ChildSpec | SupervisorSpec] = []
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            children.append(marked_spec(child, mark))
        elif not child.inherit_env or child.user is not None:  # ours is not passed to it
            children.append(
                dataclasses.replace(child, env={**(child.env or {}), MARK: mark.value()})
            )
        else:
            children.append(child)
    return dataclasses.replace(spec, children=children)


def marked(subtree: str) -> dict[int, Mark]:
    """The live processes of this host marked as an incarnation of `subtree`."""
    needle = f"{MARK}={subtree}|".encode()
    found: dict[int, Mark] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # gone, or not ours to read
            continue
        start = environ.find(needle)
        if start < 0 or (start > 0 and environ[start - 1] != 0):
            continue
        end = environ.find(b"\0", start)
        value = environ[start + len(MARK) + 1 : end if end >= 0 else None].decode(errors="replace")
        mark = Mark.parse(value)
        if mark is not None:
            found[int(entry.name)] = mark
    return found


def clear_older(mine: Mark, timeout: float) -> list[int]:
    """Make sure no process of another incarnation of `mine.subtree` runs on this host;
    the pids still there after `timeout` seconds ([] once none is left)."""
    others = {pid: m for pid, m in marked(mine.subtree).items() if m.token != mine.token}
    if not others:
        return []
    deadline = time.monotonic() + timeout
    for host in {m.host for m in others.values()}:
        _kill_host(host, [pid for pid, m in others.items() if m.host == host])
    # Its launcher sweeps once its host is gone; what is still there after SWEEP_WAIT
    # (a launcher killed at once with its guardian, a child in its own session) is
    # killed here.
    left = _wait_gone(others, time.monotonic() + min(SWEEP_WAIT, timeout / 2))
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return _wait_gone(left, deadline)


def _kill_host(host: int, marked_by_it: list[int]) -> None:
    """Kill the remote host process `host`, if it is still the one that started the
    processes marked with its pid (a pid may be reused; a host predates its launcher)."""
    if host == os.getpid():
        return
    try:
        process = psutil.Process(host)
        born = process.create_time()
        cmdline = " ".join(process.cmdline())
        firsts = [psutil.Process(pid).create_time() for pid in marked_by_it]
    except (psutil.Error, OSError):
        return
    if "NannyHost" in cmdline and firsts and born <= min(firsts):
        with contextlib.suppress(OSError):
            os.kill(host, signal.SIGKILL)


def _wait_gone(pids: dict[int, Mark] | list[int], deadline: float) -> list[int]:
    left = list(pids)
    while True:
        left = [pid for pid in left if _alive(pid)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL)


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
