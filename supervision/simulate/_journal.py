"""A tree's event journal read back: the lines `nannytree run --event-log` writes
(one JSON object a line: `time`, `who`, `what`, `reason`, `detail`, ...), as events.

Its text is data from a file and, through reasons and details, from children: every
line is bounded in bytes, the number of lines read is bounded, names are kept short and
printed escaped, and a line that is not an event is counted and skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

MAX_LINES = 2_000_000
"""Lines read from a journal at most (10 MB files, 6 of them, hold fewer)."""
MAX_LINE_BYTES = 64 * 1024
"""A longer line is skipped: the journal's own lines are a few hundred bytes."""
MAX_TIME = 1e11
"""Seconds (since the epoch, or virtual) a line's time may not exceed: year 5138."""
MAX_NAME = 200
"""Characters of a `who` kept; a longer name is not a child of a tree file."""


@dataclass(frozen=True)
class JournalEvent:
    """One line of a journal, as much of it as the fit reads."""

    time: float
    who: str
    what: str
    reason: str = ""
    detail: str = ""

    @property
    def reason_kind(self) -> str:
        """The reason's first word: "watchdog", "unhealthy", "exit code 1" -> "exit code 1"."""
        return self.reason.split(":", 1)[0].strip()


@dataclass(frozen=True)
class Journal:
    """A journal's events in time order, and what reading it left out."""

    events: tuple[JournalEvent, ...]
    skipped: int = 0  # lines that are not events (bad JSON, too long, missing fields)
    truncated: bool = False  # more than MAX_LINES lines: the rest was not read

    @property
    def span(self) -> float:
        """Seconds from the first event to the last."""
        return self.events[-1].time - self.events[0].time if self.events else 0.0


def read_journal(lines: Iterable[str | bytes], *, max_lines: int = MAX_LINES) -> Journal:
    """The events of a journal's lines (several files' lines may be chained)."""
    events: list[JournalEvent] = []
    skipped = 0
    truncated = False
    for n, line in enumerate(lines):
        if n >= max_lines:
            truncated = True
            break
        if len(line) > MAX_LINE_BYTES:
            skipped += 1
            continue
        event = _event(line)
        if event is None:
            if line.strip():
                skipped += 1
            continue
        events.append(event)
    events.sort(key=lambda e: e.time)  # rotated files may be chained in any order
    return Journal(tuple(events), skipped, truncated)


def _event(line: str | bytes) -> JournalEvent | None:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested deep
        return None
    if not isinstance(data, dict):
        return None
    t, who, what = data.get("time"), data.get("who"), data.get("what")
    if isinstance(t, bool) or not isinstance(t, int | float):
        return None
    try:
        t = float(t)
    except OverflowError:  # an integer of 400 digits
        return None
    if not abs(t) <= MAX_TIME:  # NaN too
        return None
    if not isinstance(who, str) or not isinstance(what, str) or not who or len(who) > MAX_NAME:
        return None
    reason, detail = data.get("reason"), data.get("detail")
    return JournalEvent(
        t,
        who,
        what[:64],
        reason[:200] if isinstance(reason, str) else "",
        detail[:200] if isinstance(detail, str) else "",
    )


def shown(text: str) -> str:
    """A name from a journal made safe to print: control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
