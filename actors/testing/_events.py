"""What a tree's events tell a test: why a wait cannot succeed any more, which exits
the test did not cause (strict mode), and what a failed test's report shows.

No I/O: functions of events, and the strict judge that reads them in order; the
harness (`actors.testing`) and the pytest plugin call them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field

from supervision import Event, EventKind, ExitKind, ExitReason

LAST_EVENTS = 10  # in an error message
REPORT_EVENTS = 50  # in a failed test's report section
_EXITS = (EventKind.CHILD_EXITED, EventKind.START_FAILED)
# What follows a child's exit when its supervisor restarts it (or gives up trying).
_RESTARTS = (
    EventKind.CHILD_STARTED,
    EventKind.RESTART_SCHEDULED,
    EventKind.MAX_INTENSITY_REACHED,
    EventKind.START_FAILED,
    EventKind.CHILD_FAILED,
)


class WaitFailed(AssertionError):
    """A harness wait that cannot succeed any more: the tree, or a supervisor above
    the awaited child, has ended (and is not restarted), or the child failed to
    start (`wait_ready`). The message names the last exit reason and the stderr
    tail; `reason` is that exit's reason (None if the child never exited)."""

    def __init__(self, message: str, reason: ExitReason | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class UnexpectedExit(AssertionError):
    """Strict mode: exits, failed starts or restarts that the test did not cause
    through the harness nor declare with `expect_exit` (`events`, in order)."""

    def __init__(self, message: str, events: Sequence[Event]) -> None:
        super().__init__(message)
        self.events = list(events)


def _indent(text: str, prefix: str = "    ") -> str:
    return textwrap.indent(text.rstrip("\n"), prefix)


def last_exit(events: Sequence[Event], child: str) -> Event | None:
    """The child's last exit or failed start with a reason; an abnormal one first."""
    found: Event | None = None
    for event in reversed(events):
        if event.offender != child or event.reason is None or event.context not in _EXITS:
            continue
        if not event.reason.is_normal:
            return event
        found = found or event
    return found


def stderr_tail(events: Sequence[Event], child: str) -> str:
    """The latest stderr tail the child's exits carried ("" if none did)."""
    for event in reversed(events):
        if event.offender == child and event.reason is not None and event.reason.stderr_tail:
            return event.reason.stderr_tail
    return ""


def culprit(events: Sequence[Event]) -> str | None:
    """The child to name when a tree ended: the one its supervisor gave up on, else
    the last child that exited abnormally."""
    for event in reversed(events):
        if event.context is EventKind.MAX_INTENSITY_REACHED and event.offender:
            return event.offender
    for event in reversed(events):
        if event.context in _EXITS and event.reason is not None and not event.reason.is_normal:
            return event.offender
    return None


def tail_title(child: str, merged: Container[str]) -> str:
    """What a child's kept output is, truthfully: its stderr, or both its streams when
    they share one pipe (harness._streams)."""
    what = "stdout and stderr" if child in merged else "stderr"
    return f"{what} of {child!r} (last lines)"


def describe_exit(events: Sequence[Event], child: str, merged: Container[str] = ()) -> str:
    """The lines naming the child's last exit and its stderr tail (or that it has none)."""
    exited = last_exit(events, child)
    if exited is None:
        return f"child {child!r} has not exited"
    lines = [f"last exit of {child!r} ({_who(exited)}): {exited.reason}"]
    tail = stderr_tail(events, child)
    if tail:
        lines.append(f"{tail_title(child, merged)}:\n{_indent(tail)}")
    return "\n".join(lines)


def _who(event: Event) -> str:
    parts = [f"{event.supervisor}/{event.offender}"]
    if event.pid is not None:
        parts.append(f"pid {event.pid}")
    if event.incarnation is not None:
        parts.append(f"incarnation {event.incarnation}")
    return ", ".join(parts)


def last_events(events: Sequence[Event], n: int = LAST_EVENTS) -> str:
    shown = events[-n:]
    return "\n".join(str(e) for e in shown) if shown else "(none)"


def ended_message(
    what: str,
    where: str,
    reason: ExitReason | None,
    events: Sequence[Event],
    child: str | None,
    merged: Container[str] = (),
) -> str:
    """Why `what` cannot happen: `where` ended (with `reason`), with the awaited
    child's (or the culprit's) last exit and stderr tail, and the last events."""
    because = f" ({reason})" if reason is not None else ""
    lines = [f"{what}: {where} has ended{because}"]
    named = child or culprit(events)
    if named is not None:
        lines.append(describe_exit(events, named, merged))
    lines.append(f"last events:\n{_indent(last_events(events))}")
    return "\n".join(lines)


def start_failed_message(
    what: str, failed: Event, events: Sequence[Event], merged: Container[str] = ()
) -> str:
    """Why `what` cannot happen: the child's start failed (`failed`), with its stderr."""
    child = failed.offender or "?"
    lines = [f"{what}: its start failed ({_who(failed)}): {failed.reason}"]
    tail = failed.reason.stderr_tail if failed.reason is not None else ""
    tail = tail or stderr_tail(events, child)
    if tail:
        lines.append(f"{tail_title(child, merged)}:\n{_indent(tail)}")
    lines.append(f"last events:\n{_indent(last_events(events))}")
    return "\n".join(lines)


# -- strict mode -------------------------------------------------------------------------


@dataclass
class StrictJudge:
    """Reads a tree's events in order and keeps those the test did not cause.

    Unexpected: a child's exit (CHILD_EXITED) or failed start that no fault of the
    harness caused and no `expect` declared; a normal exit only when a restart
    follows it (a permanent child), and then the restart too. A nested supervisor
    giving up (reason shutdown) is not judged itself: the exits inside it are.
    Stops by a supervisor (CHILD_TERMINATED) never are: they follow a decision.
    """

    caused: set[int] = field(default_factory=set)  # pids whose next exit the test caused
    expected: dict[str, int | None] = field(default_factory=dict)  # id -> how many (None: any)
    judged: int = 0  # the log's index judged up to
    found: list[Event] = field(default_factory=list)
    reported: int = 0  # how many of `found` an error has shown already
    _pending: dict[tuple[str, str], Event] = field(default_factory=dict)

    def cause(self, pid: int) -> None:
        self.caused.add(pid)

    def expect(self, child: str, times: int | None) -> None:
        left = self.expected.get(child, 0)
        self.expected[child] = None if times is None or left is None else left + times

    def judge(self, events: Iterable[Event]) -> None:
        """Judge the next events of the log (each once, in order)."""
        for event in events:
            self.judged += 1
            child = event.offender
            if child is None:
                continue
            key = (event.supervisor, child)
            if event.context is EventKind.CHILD_EXITED:
                reason = event.reason
                if event.pid is not None and event.pid in self.caused:
                    self.caused.discard(event.pid)
                elif reason is None or reason.kind is ExitKind.SHUTDOWN:
                    pass  # a nested supervisor gave up: the exits that made it are judged
                elif reason.is_normal:
                    self._pending[key] = event  # unexpected only if it is restarted
                else:
                    self._flag(child, event)
            elif event.context in _RESTARTS and key in self._pending:
                self._flag(child, self._pending.pop(key), event)
            elif event.context is EventKind.START_FAILED:
                self._flag(child, event)
            elif event.context is EventKind.CHILD_DELETED:
                self._pending.pop(key, None)

    def _flag(self, child: str, *events: Event) -> None:
        left = self.expected.get(child, 0)
        if left is None:
            return
        if left > 0:
            self.expected[child] = left - 1
            return
        self.found.extend(events)

    def news(self) -> list[Event]:
        """The unexpected events no error has shown yet; they count as shown now."""
        new, self.reported = self.found[self.reported :], len(self.found)
        return new


def unexpected_message(
    tree: str, new: Sequence[Event], events: Sequence[Event], merged: Container[str] = ()
) -> str:
    lines = [
        f"strict mode: tree {tree!r} had {len(new)} exit(s), failed start(s) or restart(s) "
        "the test did not cause:",
        _indent("\n".join(str(e) for e in new)),
    ]
    for child in dict.fromkeys(e.offender for e in new if e.offender):
        tail = stderr_tail(events, child)
        if tail:
            lines.append(f"{tail_title(child, merged)}:\n{_indent(tail)}")
    lines.append(
        "cause faults through the harness (kill, crash, signal, pause, terminate, "
        "restart), or declare them: tree.expect_exit(child_id) before they happen"
    )
    return "\n".join(lines)


# -- a failed test's report ----------------------------------------------------------------


def report_sections(
    tree: str,
    events: Sequence[Event],
    total: int,
    n: int = REPORT_EVENTS,
    merged: Container[str] = (),
    shown: str = "",
) -> list[tuple[str, str]]:
    """The sections a failed test's report shows for one tree: its last `n` events
    (of `total`), and the stderr tail of each child that exited abnormally, unless
    the failure (`shown`) quotes it already."""
    last = events[-n:]
    title = f"nannytree events: tree {tree!r} (last {len(last)} of {total})"
    sections = [(title, last_events(last, n) + "\n")]
    tails: dict[str, tuple[Event, str]] = {}
    for event in events:
        reason = event.reason
        if (
            event.context in _EXITS
            and reason is not None
            and reason.stderr_tail
            and not reason.is_normal
            and reason.stderr_tail.strip().splitlines()[-1].strip() not in shown
        ):
            tails[f"{event.supervisor}/{event.offender}"] = (event, reason.stderr_tail)
    if tails:
        text = "\n".join(
            f"{_who(event)}: {event.reason}\n{_indent(tail)}" for event, tail in tails.values()
        )
        both = any(e.offender in merged for e, _ in tails.values())
        what = "stderr (stdout too, where both share one pipe)" if both else "stderr"
        sections.append((f"nannytree {what} of crashed children: tree {tree!r}", text + "\n"))
    return sections
