"""One deadline over several steps of a test: `within(seconds)` (Akka TestKit's
`within`) and `eventually(fn)` (its `awaitAssert`; ScalaTest's `eventually`).

Inside `with within(5):` every harness wait and every `eventually` that is not given a
timeout of its own takes what is left of the 5 s, and the block fails if it took
longer. `eventually(fn)` calls `fn` until it passes (returns something other than
False, raising no AssertionError), and at the deadline fails with the last failure.
Polling is for what no event announces (a file, a port, a count); a tree's own
changes are events: wait for them with `wait_for`.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 10.0
# Seconds a test's tree gets to stop at teardown before what is left is killed.
TEARDOWN_SHUTDOWN = 1.0
EVERY = 0.02  # s between two tries of `eventually`, at first
EVERY_MAX = 0.25  # ... growing to this

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "nannytree_within", default=None
)


class Deadline:
    """The deadline of a `within` block."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.at = self.started + seconds

    def left(self) -> float:
        """Seconds left (0 once passed)."""
        return max(0.0, self.at - time.monotonic())


@contextmanager
def within(seconds: float) -> Iterator[Deadline]:
    """Run the block within `seconds`: the waits inside share that deadline (an inner
    `within` may only shorten it), and the block fails with AssertionError if it took
    longer. Yields the Deadline (`.left()`)."""
    if seconds <= 0:
        raise ValueError(f"within() takes a positive number of seconds, not {seconds!r}")
    deadline = Deadline(seconds)
    outer = _deadline.get()
    token = _deadline.set(deadline.at if outer is None else min(outer, deadline.at))
    try:
        yield deadline
    finally:
        _deadline.reset(token)
    took = time.monotonic() - deadline.started
    if took > seconds:
        raise AssertionError(f"the block took {took:.2f} s, more than within({seconds:g})")


def timeout_or_left(timeout: float | None, default: float = DEFAULT_TIMEOUT) -> float:
    """A wait's timeout: the one given; else what is left of the innermost `within`;
    else `default`."""
    if timeout is not None:
        return timeout
    at = _deadline.get()
    return default if at is None else max(0.0, at - time.monotonic())


def eventually(
    fn: Callable[[], T],
    timeout: float | None = None,
    *,
    what: str | None = None,
) -> T:
    """Call `fn` until it passes (neither raises AssertionError nor returns False);
    what it returned. At the deadline (`timeout`, else what is left of the innermost
    `within`, else 10 s) raise AssertionError naming `what` and the last failure.
    Other exceptions are not retried: they are a test's error, not a "not yet"."""
    limit = timeout_or_left(timeout)
    end = time.monotonic() + limit
    every = EVERY
    tries = 0
    while True:
        tries += 1
        failure: str
        last: AssertionError | None
        try:
            value = fn()
        except AssertionError as e:
            failure, last = f"{type(e).__name__}: {e}" if str(e) else "AssertionError", e
        else:
            if value is not False:
                return value
            failure, last = "it returned False", None
        now = time.monotonic()
        if now >= end:
            name = what or getattr(fn, "__name__", "the condition")
            raise AssertionError(
                f"{name} did not pass within {limit:g} s ({tries} tries); the last: {failure}"
            ) from last
        time.sleep(min(every, end - now))  # polling: what it watches announces nothing
        every = min(every * 1.5, EVERY_MAX)
