"""EventLog.wake ends the waits in `since` (a reader that closes, such as the event
log's writer at a run's exit, does not wait out its poll)."""

from __future__ import annotations

import threading

from actors import EventLog


def test_wake_ends_a_wait_for_events_with_what_it_has() -> None:
    log = EventLog()
    answers: list[tuple[list[object], int]] = []
    waiting = threading.Thread(target=lambda: answers.append(log.since(0, 600.0)))
    waiting.start()
    # Woken until it answers: a wake that comes before its wait began is not its own.
    while waiting.is_alive() and not answers:
        log.wake()
        waiting.join(0.05)
    waiting.join(10)
    assert not waiting.is_alive(), "the wait went on after wake()"
    assert answers == [([], 0)]
