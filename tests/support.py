"""Helpers for integration tests: wait for what you expect, with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psutil
import pykka

from supervision import ChildInfo, Event, EventKind

TIMEOUT = 10.0


def event_log(ref: pykka.ActorRef[Any]) -> Any:
    return ref.proxy().event_log().get()


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


def wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    """Wait until none of `pids` is alive (zombies count as gone); return the survivors."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        psutil.wait_procs([psutil.Process(p) for p in alive if psutil.pid_exists(p)], timeout=0.05)


def wait_until(condition: Callable[[], bool], timeout: float = TIMEOUT, what: str = "") -> None:
    """Poll an OS-level condition (a file appears) with a deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true within {timeout}s: {what or condition}")
        time.sleep(0.01)
