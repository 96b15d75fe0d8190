"""Waiting on a tree's events for a test, with a deadline and never a sleep: the
engine under every wait of `TreeHarness` (and `EventProbe`).

A wait ends with what it waited for; at once with WaitFailed when it cannot
succeed any more (the tree has ended, or a supervisor above the awaited child
ended and is not restarted), naming the last exit and its stderr tail; or with
TimeoutError at its deadline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from supervision import Event, EventKind, ExitReason, SupervisorSpec
from supervision.simulate import event_sequence

from .._operate._ready import Ending
from .._shell._event_log import EventLog
from ._deadlines import timeout_or_left
from ._events import WaitFailed, culprit, ended_message, last_events, last_exit

if TYPE_CHECKING:
    from .._tree import Tree

T = TypeVar("T")


class Waited(Protocol):
    """What a wait needs of the harness."""

    spec: SupervisorSpec
    log: EventLog
    tree: Tree | None
    strict: bool

    def check_strict(self) -> None: ...
    def check_id(self, child_id: str | None) -> None: ...
    def merged(self) -> frozenset[str]: ...
    def hints(self) -> list[str]: ...


_EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(Event))
# How long a wait may miss the end of a tree that ended without a last event (its
# root nanny failed): every other end is an event, which wakes the wait at once.
BACKSTOP = 0.25
OUTPUT_EVERY = 0.05  # s between reads of a child's output (no event says it grew)


def event_kind(context: EventKind | str | None) -> EventKind | None:
    """An EventKind, or its name as the events show it ("child_started")."""
    if context is None or isinstance(context, EventKind):
        return context
    if isinstance(context, str):
        with contextlib.suppress(ValueError):
            return EventKind(context)
        with contextlib.suppress(KeyError):
            return EventKind[context.upper()]
        names = [k.value for k in EventKind]
        close = difflib.get_close_matches(context, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"no event kind {context!r}{hint} The kinds: {', '.join(names)}")
    raise TypeError(f"an event kind is an EventKind or its name, not {context!r}")


def wanted(
    context: EventKind | str | None,
    child: str | None,
    where: Callable[[Event], bool] | None,
    **fields: Any,
) -> Callable[[Event], bool]:
    context = event_kind(context)
    unknown = sorted(set(fields) - set(_EVENT_FIELDS))
    if unknown:
        # Caught here, not as an AttributeError inside the wait's predicate.
        raise TypeError(
            f"unknown event field {unknown[0]!r}; an Event has: {', '.join(_EVENT_FIELDS)}"
        )

    def match(e: Event) -> bool:
        return (
            (context is None or e.context is context)
            and (child is None or e.offender == child)
            and all(getattr(e, k) == v for k, v in fields.items())
            and (where is None or where(e))
        )

    return match


def what_of(context: EventKind | str | None, child: str | None) -> str:
    kind = context.value if isinstance(context, EventKind) else context or "an event"
    return kind + (f" of {child!r}" if child else "")


def event_if(match: Callable[[Event], bool]) -> Callable[[Event], Event | None]:
    return lambda e: e if match(e) else None


class EventProbe:
    """Records a tree's events from the moment it is made, for assertions in order."""

    def __init__(self, log: EventLog, harness: Waited | None = None) -> None:
        self._log = log
        self._harness = harness
        self._start = len(log)

    @property
    def events(self) -> list[Event]:
        return self._log.snapshot()[max(self._start - self._log.dropped, 0) :]

    def contexts(self, child: str | None = None) -> list[EventKind]:
        return [e.context for e in self.events if child is None or e.offender == child]

    def sequence(self) -> list[tuple[str, str, str | None]]:
        """(supervisor, context, offender) of each event: what an order assertion compares."""
        return event_sequence(self.events)

    def wait_for(
        self,
        context: EventKind | str | None = None,
        child: str | None = None,
        *,
        timeout: float | None = None,
        where: Callable[[Event], bool] | None = None,
        **fields: Any,
    ) -> Event:
        """The first event since the probe began that matches; waits up to `timeout` s
        (and fails at once, as the harness's waits do, when the tree has ended)."""
        __tracebackhide__ = True
        match = wanted(context, child, where, **fields)
        timeout = timeout_or_left(timeout)
        if self._harness is not None:
            self._harness.check_id(child)
            return wait_on(
                self._harness,
                f"waiting for {what_of(context, child)}",
                event_if(match),
                timeout=timeout,
                start=self._start,
                child=child,
            )
        return self._log.wait_for(match, timeout, start=self._start)


def wait_on(
    harness: Waited,
    what: str,
    check: Callable[[Event], T | None],
    *,
    timeout: float,
    start: int,
    child: str | None,
    again: Callable[[], T | None] | None = None,
    again_on: Callable[[Event], bool] | None = None,
    every: float = BACKSTOP,
) -> T:
    """Wait on the log from index `start` until `check(event)` or `again()`
    returns something, and return it. `again` is asked first, then after events
    that `again_on` accepts (without `again_on`: at least every `every` s).
    WaitFailed at once when the tree, or a supervisor above `child`, has ended;
    TimeoutError after `timeout` s."""
    __tracebackhide__ = True
    deadline = time.monotonic() + timeout
    # Whether the wait can still succeed (the one judge's reading of the events).
    owner = _owner_path(harness.log.snapshot(), child) if child is not None else None
    ending = Ending(harness.spec.id, owner)
    index, first = start, True
    while True:
        pause = 0.0 if first else max(0.0, min(every, deadline - time.monotonic()))
        events, index = harness.log.since(index, pause)
        asked = first or again_on is None
        first = False
        for event in events:
            found = check(event)
            if found is not None:
                return found
            ending.see((event,))
            asked = asked or (again_on is not None and again_on(event))
        if again is not None and asked:
            result = again()
            if result is not None:
                return result
        if harness.strict:
            harness.check_strict()
        ended = ending.ended(harness.tree)
        if ended is not None:
            where, reason = ended
            raise WaitFailed(
                ended_message(what, where, reason, harness.log.snapshot(), child, harness.merged()),
                _last_reason(harness.log.snapshot(), child),
            )
        if time.monotonic() >= deadline:
            hints = "".join(f"\n{hint}" for hint in harness.hints())
            raise TimeoutError(
                f"{what}: no matching event within {timeout}s; last events:\n"
                f"{textwrap.indent(last_events(harness.log.snapshot()), '  ')}{hints}"
            )


def _owner_path(events: Sequence[Event], child: str) -> str | None:
    """The path of the supervisor that last reported on `child`."""
    for event in reversed(events):
        if event.offender == child:
            return event.supervisor
    return None


def _last_reason(events: Sequence[Event], child: str | None) -> ExitReason | None:
    named = child or culprit(events)
    exited = last_exit(events, named) if named is not None else None
    return exited.reason if exited is not None else None
