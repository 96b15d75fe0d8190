"""Counting a child's lines over a block of a test (Akka TestKit's EventFilter with
occurrences): what it wrote from the block's start, on one stream, across at most one
restart of its process (the kept output holds the current run and the one before)."""

from __future__ import annotations

import re
from dataclasses import dataclass

OVERLAP = 4096  # characters of the output at the block's start used to find where it was


class LinesLost(AssertionError):
    """What the child wrote during the block is no longer all kept."""


@dataclass(frozen=True)
class Start:
    """Where a block began: the child's process and what it had written."""

    pid: int | None
    text: str


def after(start: str, now: str) -> str | None:
    """What `now` (a bounded tail of the same run) holds beyond `start`; None when the
    tail moved past the block's start (more was written than is kept)."""
    if not start:
        return now
    if now.startswith(start):
        return now[len(start) :]
    anchor = start[-OVERLAP:]
    at = now.rfind(anchor)
    if at < 0 or (len(start) < OVERLAP and at != 0):
        return None
    return now[at + len(anchor) :]


def count(pattern: re.Pattern[str], text: str) -> int:
    """The lines of `text` that `pattern` matches (re.search, line by line)."""
    return sum(1 for line in text.splitlines() if pattern.search(line))


def check(found: int, exactly: int | None, at_least: int | None, at_most: int | None) -> str | None:
    """Why `found` breaks the expectation, or None."""
    if exactly is not None and found != exactly:
        return f"exactly {exactly}"
    if at_least is not None and found < at_least:
        return f"at least {at_least}"
    if at_most is not None and found > at_most:
        return f"at most {at_most}"
    return None


def expectation(
    exactly: int | None, at_least: int | None, at_most: int | None
) -> tuple[int | None, int | None, int | None]:
    """The expectation asked for (at least 1 if none is given), or a ValueError."""
    if exactly is not None and (at_least is not None or at_most is not None):
        raise ValueError("give count=, or at_least= and/or at_most=, not both")
    for name, value in (("count", exactly), ("at_least", at_least), ("at_most", at_most)):
        if value is not None and value < 0:
            raise ValueError(f"{name} must be >= 0, not {value!r}")
    if at_least is not None and at_most is not None and at_least > at_most:
        raise ValueError(f"at_least={at_least} is more than at_most={at_most}")
    if exactly is None and at_least is None and at_most is None:
        at_least = 1
    return exactly, at_least, at_most
