"""Helpers for integration tests: wait for what you expect, with a deadline."""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pykka
import pytest

from supervision import ChildInfo, Event, EventKind


def import_ray() -> ModuleType:
    """Ray, or a skip that says how to get it. CI sets NANNYTREE_REQUIRE_RAY=1: there a
    missing Ray is an error, never a skip."""
    if os.environ.get("NANNYTREE_REQUIRE_RAY"):
        return importlib.import_module("ray")
    return pytest.importorskip(
        "ray",
        reason="Ray is not installed (pip install '.[ray]'; the test extra brings it on "
        "Linux x86_64 and aarch64); NANNYTREE_REQUIRE_RAY=1 makes this a failure",
    )


# The live soaks' length: 10 s in a developer's run, 600 in CI (NANNYTREE_SOAK_SECONDS).
SOAK_SECONDS = float(os.environ.get("NANNYTREE_SOAK_SECONDS", "10"))
# A race's or a loop's soak: thousands of short rounds, within a minute even in CI.
RACE_SECONDS = min(SOAK_SECONDS, 60.0)

TIMEOUT = 30.0  # a wait for an event: about correctness, however busy the machine


def living_descendants() -> list[psutil.Process]:
    """This process's descendants that still run (zombies waiting to be reaped aside)."""
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


def fail_if_left_behind(who: str, deadline: float = 5.0) -> None:
    """After `who` (a test, a page's examples): every descendant gone within `deadline`
    seconds and no actor running, else kill or stop them and fail, naming them."""
    end = time.monotonic() + deadline
    while (left := living_descendants()) and time.monotonic() < end:
        psutil.wait_procs(left, timeout=0.1)
    if left:
        described = [f"{p.pid} {p.cmdline()}" for p in left]
        for p in left:
            p.kill()
        pytest.fail(f"{who} left processes behind: {described}")
    actors = pykka.ActorRegistry.get_all()
    if actors:
        pykka.ActorRegistry.stop_all()
        pytest.fail(f"{who} left actors running: {actors}")


_logs: dict[str, Any] = {}


def remember_log(ref: pykka.ActorRef[Any], log: Any) -> None:
    """Keep a tree's EventLog: a tree that gives up stops its actor, and its log
    can no longer be asked for."""
    _logs[ref.actor_urn] = log


def forget_log(ref: pykka.ActorRef[Any]) -> None:
    _logs.pop(ref.actor_urn, None)


def event_log(ref: pykka.ActorRef[Any]) -> Any:
    log = _logs.get(ref.actor_urn)
    return log if log is not None else ref.proxy().event_log().get()


def wait_event(
    ref: pykka.ActorRef[Any],
    context: EventKind,
    offender: str | None = None,
    *,
    timeout: float = TIMEOUT,
    start: int = 0,
    where: Callable[[Event], bool] = lambda e: True,
) -> Event:
    """Wait for an event of this kind (about this child), at or after index `start`."""
    log = event_log(ref)
    return log.wait_for(  # type: ignore[no-any-return]
        lambda e: (
            e.context is context and (offender is None or e.offender == offender) and where(e)
        ),
        timeout,
        start=start,
    )


def children_by_id(ref: pykka.ActorRef[Any]) -> dict[str, ChildInfo]:
    return {c.id: c for c in ref.proxy().which_children().get()}


def wait_until(condition: Callable[[], bool], timeout: float = TIMEOUT, what: str = "") -> None:
    """Poll an OS-level condition (a file appears) with a deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true within {timeout}s: {what or condition}")
        time.sleep(0.01)


def run_pytest(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """pytest in a process of its own (a reader's test file, a plugin's behaviour), run
    from `cwd`, with no cache written."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def interrupt_run(p: subprocess.Popen[Any]) -> None:
    """Stop a `nannytree run` as Ctrl-C does; if it does not end, SIGKILL it and every
    descendant it had, so no test leaves one behind."""
    if p.poll() is not None:
        return
    family = psutil.Process(p.pid).children(recursive=True)
    p.send_signal(signal.SIGINT)
    try:
        p.wait(15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    for proc in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()


class LiveRun:
    """`nannytree run` on a terminal (a pty, 120x40), its screen read by a thread."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.p = subprocess.Popen(
            [sys.executable, "-m", "actors.cli", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
        )
        os.close(slave)
        self.master = master
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    return
                if not data:
                    return
                self.chunks.append(data)
            elif self.p.poll() is not None:
                return

    def text(self) -> str:
        raw = b"".join(self.chunks).decode(errors="replace")
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)

    def wait_screen(self, pattern: str, deadline: float = 20.0) -> None:
        wait_until(lambda: re.search(pattern, self.text()) is not None, deadline, pattern)

    def __enter__(self) -> LiveRun:
        return self

    def __exit__(self, *exc: object) -> None:
        interrupt_run(self.p)
        self.reader.join(5)
        os.close(self.master)
