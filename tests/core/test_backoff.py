"""Backoff beyond OTP, in the pure core, with a fake clock."""

from __future__ import annotations

import pytest

from supervision import (
    Backoff,
    ChildRestarting,
    EventKind,
    ScheduleRetry,
    SpecError,
    Strategy,
    SupervisorSpec,
)
from tests.support.fake_executor import FakeClock, running, worker

NO_JITTER = Backoff(initial=1.0, factor=2.0, max=5.0, jitter=0.0, reset_after=60.0)


def _retries(ex) -> list[float]:
    return [a.delay for a in ex.actions if isinstance(a, ScheduleRetry)]


def _sup(backoff: Backoff = NO_JITTER, **flags) -> SupervisorSpec:
    flags.setdefault("intensity", 100)
    flags.setdefault("period", 1000.0)
    return SupervisorSpec(
        id="root",
        children=[worker("a"), worker("b", backoff=backoff), worker("c")],
        **flags,
    )


def test_delays_grow_exponentially_up_to_max():
    ex = running(_sup())
    for _ in range(5):
        ex.exit("b")
        assert ex.sup.which_child("b").state == "backoff"
        ex.clock.advance(_retries(ex)[-1])
        ex.drain()
        assert ex.sup.which_child("b").state == "running"
        ex.clock.advance(1.0)  # up 1 s each time: far below reset_after
    assert _retries(ex) == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_a_long_run_resets_the_count():
    ex = running(_sup())
    for _ in range(3):
        ex.exit("b")
        ex.clock.advance(_retries(ex)[-1])
        ex.drain()
    ex.clock.advance(60.0)  # stayed up reset_after
    ex.exit("b")
    assert _retries(ex) == [1.0, 2.0, 4.0, 1.0]


def test_backoff_is_shown_with_its_next_attempt_and_blocks_api_calls():
    ex = running(_sup(), FakeClock(100.0))
    ex.exit("b")
    info = ex.sup.which_child("b")
    assert info.state == "backoff" and info.next_attempt == 101.0 and info.pid is None
    assert ex.sup.count_children().active == 2
    with pytest.raises(ChildRestarting):
        ex.sup.restart_child("b", ex.clock.now)
    kinds = ex.event_kinds()
    assert kinds[-2:] == [EventKind.CHILD_EXITED, EventKind.RESTART_SCHEDULED]


def test_terminate_child_ends_a_backoff_and_the_retry_is_a_no_op():
    ex = running(_sup())
    ex.exit("b")
    ex.ok("terminate_child", "b")
    assert ex.sup.which_child("b").state == "stopped"
    ex.clock.advance(10)
    mark = len(ex.log)
    ex.drain()
    assert ex.started_ids(mark) == []


def test_siblings_keep_running_during_a_group_backoff_then_restart_together():
    ex = running(_sup(strategy=Strategy.ONE_FOR_ALL))
    ex.exit("b")
    assert ex.live() == ["a", "c"]  # nothing is stopped while b waits
    mark = len(ex.log)
    ex.clock.advance(1.0)
    ex.drain()
    assert ex.terminated_ids(mark) == ["c", "a"]
    assert ex.started_ids(mark) == ["a", "b", "c"]


def test_intensity_is_charged_when_the_restart_is_decided():
    ex = running(_sup(intensity=2, period=1000.0))
    ex.exit("b")
    ex.clock.advance(1.0)
    ex.drain()
    ex.exit("b")
    ex.clock.advance(2.0)
    ex.drain()
    ex.exit("b")  # the third restart in the window: give up at once, no backoff
    assert ex.exits and ex.event_kinds()[-1] is EventKind.SUPERVISOR_STOPPED
    assert EventKind.MAX_INTENSITY_REACHED in ex.event_kinds()


def test_a_failed_start_waits_its_backoff_too():
    ex = running(_sup())
    ex.fail_starts("b", times=2)
    ex.exit("b")
    ex.clock.advance(1.0)
    ex.drain()  # (the fake executor does not wait out the delays it is given)
    assert ex.sup.which_child("b").state == "running"
    assert [what for what, c in ex.log if c == "b"][-3:] == [
        "start_failed",
        "start_failed",
        "start",
    ]
    assert _retries(ex) == [1.0, 2.0, 4.0]  # each failed start waits longer


def test_jitter_spreads_delays_within_its_bounds_and_is_deterministic():
    jittery = Backoff(initial=1.0, factor=1.0, max=1.0, jitter=0.5, reset_after=60.0)
    runs = []
    for _ in range(2):
        ex = running(_sup(jittery))
        for _ in range(50):
            ex.exit("b")
            ex.clock.advance(2.0)
            ex.drain()
        runs.append(_retries(ex))
    assert runs[0] == runs[1]
    assert all(0.5 <= d <= 1.5 for d in runs[0])
    assert len(set(runs[0])) > 10


def test_without_backoff_restarts_are_immediate_as_otp():
    ex = running(SupervisorSpec(id="root", intensity=5, children=[worker("a")]))
    ex.exit("a")
    assert ex.sup.which_child("a").state == "running"
    assert _retries(ex) == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"initial": -1}, "backoff.initial"),
        ({"factor": 0.5}, "backoff.factor"),
        ({"jitter": 1.0}, "backoff.jitter"),
        ({"initial": 5, "max": 1}, "backoff.max"),
    ],
)
def test_bad_backoff_is_refused(fields, field):
    with pytest.raises(SpecError) as err:
        Backoff(**fields)
    assert err.value.field == field
