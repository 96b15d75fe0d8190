"""A restart that no live node can take (docs/multihost.md section 2), in the pure
core with a fake clock: pending, charged nothing, retried on a backoff until its
placement's `wait` is over, then OTP's retry loop."""

from __future__ import annotations

import pytest

from supervision import (
    ChildRestarting,
    EventKind,
    ExitKind,
    ExitReason,
    Placement,
    ScheduleRetry,
    SpecError,
    Strategy,
    Supervisor,
    SupervisorSpec,
    SupervisorStartError,
)
from tests.support.fake_executor import FakeClock, FakeExecutor, running, worker

NODE_DOWN = ExitReason(ExitKind.NODE_DOWN, message="node 'b' is dead")
NO_NODE = Placement.unplaceable("no live node fits placement (live nodes: a)")


def remote(wait: float | None = None, **kw: object) -> SupervisorSpec:
    placement = Placement(node="b", policy="pinned", wait=wait)
    return SupervisorSpec(id="ingest", placement=placement, children=[worker("r")], **kw)  # type: ignore[arg-type]


def root(*children: object, **kw: object) -> SupervisorSpec:
    kw.setdefault("intensity", 1)
    kw.setdefault("period", 60.0)
    return SupervisorSpec(id="root", children=list(children), **kw)  # type: ignore[arg-type]


def delays(ex: FakeExecutor, since: int = 0) -> list[float]:
    return [a.delay for a in ex.actions[since:] if isinstance(a, ScheduleRetry)]


def retry_at(ex: FakeExecutor, when: float) -> None:
    """The queued retry comes back at `when` (the executor queues it at once)."""
    ex.clock.advance(when - ex.clock.now)
    ex.step()


def test_a_restart_no_node_can_take_waits_charged_nothing_and_backs_off() -> None:
    ex = running(root(worker("web"), remote()), FakeClock(100.0))
    web = ex.pid("web")
    ex.fail_starts("ingest", 6, NO_NODE)
    ex.exit("ingest", NODE_DOWN)  # the exit itself is charged, as OTP's
    info = ex.sup.which_child("ingest")
    assert (info.state, info.since, info.next_attempt, info.pid) == ("pending", 100.0, 101.0, None)
    assert ex.sup.count_children().active == 1
    # Attempts at 101, 103, 107, 115, 125 (delays 1, 2, 4, 8, 10): none charged.
    for when in (101.0, 103.0, 107.0, 115.0):
        retry_at(ex, when)
        assert ex.sup.which_child("ingest").state == "pending"
    assert delays(ex) == [1.0, 2.0, 4.0, 8.0, 10.0]
    assert ex.sup.restart_times == (100.0,) and ex.exits == []
    assert ex.sup.which_child("ingest").since == 100.0
    assert ex.sup.which_child("ingest").next_attempt == 125.0
    retry_at(ex, 125.0)  # the fifth attempt fails too; the sixth finds a node
    retry_at(ex, 135.0)
    info = ex.sup.which_child("ingest")
    assert (info.state, info.since, info.next_attempt, info.restarts) == ("running", None, None, 1)
    assert ex.pid("web") == web and ex.sup.restart_times == (100.0,)
    # One failed start for the whole wait; each attempt is a scheduled retry.
    failed = [e for e in ex.events if e.context is EventKind.START_FAILED]
    assert [(e.time, e.reason) for e in failed] == [(100.0, NO_NODE)]
    scheduled = [e for e in ex.events if e.context is EventKind.RESTART_SCHEDULED]
    assert [(e.time, e.detail) for e in scheduled][:2] == [
        (100.0, "pending delay=1.000 attempt=1"),
        (101.0, "pending delay=2.000 attempt=2"),
    ]


def test_the_wait_ends_in_otps_retry_loop_which_gives_up_and_stops_the_siblings() -> None:
    ex = running(root(worker("web"), remote(wait=5.0)), FakeClock(100.0))
    ex.fail_starts("ingest", 10, NO_NODE)
    ex.exit("ingest", NODE_DOWN)
    retry_at(ex, 101.0)
    retry_at(ex, 103.0)  # the next delay, 4, is cut to the wait's end: 105
    assert delays(ex) == [1.0, 2.0, 2.0]
    retry_at(ex, 105.0)  # the wait is over: a failed start as any other
    assert ex.sup.which_child("ingest").state == "restarting"
    assert delays(ex)[-1] == 0.0
    ex.step()  # the retry is charged: intensity 1 is exceeded
    assert ex.sup.restart_times == (105.0, 100.0)
    assert [e.reason.kind for e in ex.exits] == [ExitKind.SHUTDOWN]
    assert ex.terminated_ids() == ["web"]
    gave_up = [e for e in ex.events if e.context is EventKind.MAX_INTENSITY_REACHED]
    assert [e.time for e in gave_up] == [105.0]


def test_wait_zero_is_otps_retry_loop_at_once() -> None:
    ex = running(root(worker("web"), remote(wait=0.0)), FakeClock(100.0))
    ex.fail_starts("ingest", 10, NO_NODE)
    ex.exit("ingest", NODE_DOWN)
    assert ex.sup.which_child("ingest").state == "restarting"
    ex.drain()
    assert ex.exits and ex.sup.restart_times == (100.0, 100.0)


def test_another_failure_while_pending_is_charged_as_otps() -> None:
    ex = running(root(worker("web"), remote(), intensity=5), FakeClock(100.0))
    ex.fail_starts("ingest", 1, NO_NODE)
    ex.fail_starts("ingest", 1)  # then the subtree itself fails to start
    ex.exit("ingest", NODE_DOWN)
    retry_at(ex, 101.0)
    assert ex.sup.which_child("ingest").state == "restarting"
    ex.step()
    assert ex.sup.restart_times == (101.0, 100.0)
    assert ex.sup.which_child("ingest").state == "running"


def test_a_first_start_no_node_can_take_still_fails_the_supervisor() -> None:
    ex = FakeExecutor(Supervisor(root(worker("web"), remote())))
    ex.fail_starts("ingest", 1, NO_NODE)
    ex.start()
    assert isinstance(ex.exits[0].error, SupervisorStartError)


def test_api_calls_see_a_pending_child_as_restarting_and_terminate_ends_the_wait() -> None:
    ex = running(root(worker("web"), remote()), FakeClock(100.0))
    ex.fail_starts("ingest", 1, NO_NODE)
    ex.exit("ingest", NODE_DOWN)
    with pytest.raises(ChildRestarting):
        ex.ok("restart_child", "ingest")
    ex.ok("terminate_child", "ingest")
    info = ex.sup.which_child("ingest")
    assert (info.state, info.since, info.next_attempt) == ("stopped", None, None)
    mark = len(ex.log)
    retry_at(ex, 101.0)  # the retry it had scheduled is a no-op
    assert ex.started_ids(mark) == []
    ex.ok("restart_child", "ingest")
    assert ex.sup.which_child("ingest").state == "running"


@pytest.mark.parametrize("strategy", [Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE])
def test_a_group_restart_waits_at_the_pending_child_and_resumes_from_it(
    strategy: Strategy,
) -> None:
    ex = running(
        root(worker("web"), remote(), worker("after"), strategy=strategy), FakeClock(100.0)
    )
    ex.fail_starts("ingest", 2, NO_NODE)
    ex.exit("ingest", NODE_DOWN)
    web = ex.pid("web")
    assert ex.live() == ["web"]
    assert ex.sup.which_child("after").state == "stopped"  # it waits with it
    retry_at(ex, 101.0)
    mark = len(ex.log)
    retry_at(ex, 103.0)  # placed: it and the children after it start; web is untouched
    assert ex.started_ids(mark) == ["ingest", "after"]
    assert ex.pid("web") == web and ex.terminated_ids(mark) == []
    assert ex.sup.restart_times == (100.0,)


def test_a_pending_significant_child_keeps_all_significant_from_shutting_down() -> None:
    from supervision import AutoShutdown, Restart

    spec = root(
        worker("job", restart=Restart.TRANSIENT, significant=True),
        remote(restart=Restart.TRANSIENT, significant=True),
        auto_shutdown=AutoShutdown.ALL_SIGNIFICANT,
    )
    ex = running(spec, FakeClock(100.0))
    ex.fail_starts("ingest", 2, NO_NODE)
    ex.exit("ingest", NODE_DOWN)
    ex.exit("job", ExitReason.normal())  # after the queued retry, which fails again
    assert ex.exits == [] and ex.sup.which_child("ingest").state == "pending"


@pytest.mark.parametrize("wait", [-1.0, True, float("inf"), "5"])
def test_a_bad_wait_is_refused(wait: object) -> None:
    with pytest.raises(SpecError, match=r"placement\.wait"):
        Placement(node="b", wait=wait)  # type: ignore[arg-type]


def test_only_the_marked_start_failure_is_unplaceable() -> None:
    assert Placement.is_unplaceable(NO_NODE) and not NO_NODE.is_normal
    assert not Placement.is_unplaceable(ExitReason.start_failure("no live node fits"))
    assert str(NO_NODE).startswith("start_failure: no live node fits")
