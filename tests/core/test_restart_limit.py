"""The decision core with a child's own restart limit (docs/otp-semantics.md section
4.1), and reset_restarts: a fake clock, no processes."""

from __future__ import annotations

import pytest

from supervision import (
    AutoShutdown,
    Backoff,
    ChildNotFound,
    ChildSpec,
    EventKind,
    ExitReason,
    NoRestartLimit,
    RestartLimit,
    Strategy,
    SupervisorSpec,
)
from tests.support.fake_executor import FakeExecutor, running, worker

LIMIT = RestartLimit(intensity=2, period=10.0)


def tree(
    strategy: Strategy = Strategy.ONE_FOR_ONE, intensity: int = 1, **fields: object
) -> SupervisorSpec:
    """a, then the flapping web (its own limit: 2 restarts in 10 s), then b."""
    return SupervisorSpec(
        "sup",
        strategy=strategy,
        intensity=intensity,
        period=5.0,
        children=[worker("a"), worker("web", restart_limit=LIMIT, **fields), worker("b")],
    )


def states(ex: FakeExecutor) -> dict[str, str]:
    return {c.id: c.state for c in ex.sup.children()}


def crash_loop(ex: FakeExecutor, child: str, times: int, every: float = 1.0) -> None:
    for _ in range(times):
        ex.clock.advance(every)
        ex.exit(child)
        ex.drain()


@pytest.mark.parametrize(
    "strategy", [Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE]
)
def test_one_restart_too_many_leaves_the_child_failed_and_its_siblings_running(strategy):
    ex = running(tree(strategy))
    pids = {c: ex.pid(c) for c in ("a", "b")}
    mark = len(ex.log)
    crash_loop(ex, "web", 2)
    # Restarted alone each time (its own supervisor's one_for_one), whatever ours is.
    assert ex.log[mark:] == [("start", "web"), ("start", "web")]
    ex.clock.advance(1.0)
    ex.exit("web")
    assert states(ex) == {"a": "running", "web": "failed", "b": "running"}
    assert {c: ex.pid(c) for c in ("a", "b")} == pids
    assert ex.sup.mode == "running" and not ex.exits
    [failed] = [e for e in ex.events if e.context is EventKind.CHILD_FAILED]
    assert failed.offender == "web"
    assert failed.detail == "restart_limit intensity=2 period=10"
    assert failed.reason is not None and not failed.reason.is_normal
    assert ex.sup.restart_times == ()  # the supervisor was charged nothing
    assert ex.sup.which_child("web").last_exit == failed.reason


def test_the_window_slides_as_the_supervisor_intensity_does():
    ex = running(tree())
    crash_loop(ex, "web", 10, every=6.0)  # never 3 in any 10 s
    assert states(ex)["web"] == "running"
    ex.clock.advance(0.5)
    ex.exit("web")  # 3 within 10 s (at t=54, 60, 60.5)
    assert states(ex)["web"] == "failed"


def test_a_sibling_still_charges_the_supervisor():
    ex = running(tree())
    crash_loop(ex, "web", 2)
    ex.clock.advance(1.0)
    ex.exit("a")
    ex.clock.advance(1.0)
    ex.exit("a")  # 2 restarts in 5 s > intensity 1: the supervisor gives up
    assert ex.sup.mode == "stopped"
    assert [e.offender for e in ex.events if e.context is EventKind.MAX_INTENSITY_REACHED] == ["a"]


def test_restart_child_starts_a_failed_child_with_a_fresh_window():
    ex = running(tree())
    crash_loop(ex, "web", 3)
    assert states(ex)["web"] == "failed"
    info = ex.ok("restart_child", "web")
    assert info.state == "running"
    crash_loop(ex, "web", 2)  # counted from zero: two more are allowed
    assert states(ex)["web"] == "running"
    crash_loop(ex, "web", 1)
    assert states(ex)["web"] == "failed"


def test_a_group_restart_gives_a_contained_sibling_a_fresh_window():
    """OTP's pattern: one_for_all restarts the child's own supervisor too, new."""
    ex = running(tree(Strategy.ONE_FOR_ALL, intensity=5))
    crash_loop(ex, "web", 2)  # its window is full
    mark = len(ex.log)
    ex.clock.advance(1.0)
    ex.exit("a")
    assert ex.started_ids(mark) == ["a", "web", "b"]
    crash_loop(ex, "web", 2)
    assert states(ex)["web"] == "running"


def test_a_group_restart_starts_a_failed_contained_child_again():
    """A transient child left stopped is started by its supervisor's group restart
    (OTP's one_for_all and rest_for_one do so), with a fresh window."""
    ex = running(tree(Strategy.REST_FOR_ONE, intensity=5))
    crash_loop(ex, "web", 3)
    assert states(ex)["web"] == "failed"
    mark = len(ex.log)
    ex.clock.advance(1.0)
    ex.exit("a")
    assert ex.started_ids(mark) == ["a", "web", "b"]
    assert set(states(ex).values()) == {"running"}


def test_failed_starts_on_restart_are_charged_to_its_own_window():
    ex = running(tree(intensity=1))
    ex.fail_starts("web", times=5)
    ex.clock.advance(1.0)
    ex.exit("web")
    ex.drain()  # the retries of section 5.5 charge its window, not the supervisor's
    assert states(ex) == {"a": "running", "web": "failed", "b": "running"}
    assert ex.sup.mode == "running"
    # The exit charged one, each failed start's retry one more: the third is too many.
    assert [w for w, c in ex.log if c == "web"] == ["start", "start_failed", "start_failed"]


def test_backoff_still_delays_a_contained_child():
    ex = running(tree(backoff=Backoff(initial=2.0, jitter=0.0)))
    ex.clock.advance(1.0)
    ex.exit("web")
    assert states(ex)["web"] == "backoff"
    ex.clock.advance(2.0)
    ex.drain()
    assert states(ex)["web"] == "running"


def test_a_transient_contained_child_that_ends_normally_is_not_failed():
    ex = running(tree(restart="transient"))
    ex.clock.advance(1.0)
    ex.exit("web", ExitReason.normal())
    assert states(ex)["web"] == "stopped"
    assert EventKind.CHILD_FAILED not in ex.event_kinds()


def test_a_significant_child_that_fails_triggers_auto_shutdown():
    spec = SupervisorSpec(
        "sup",
        auto_shutdown=AutoShutdown.ANY_SIGNIFICANT,
        children=[
            worker("a"),
            worker("web", restart="transient", significant=True, restart_limit=(0, 5.0)),
        ],
    )
    ex = running(spec)
    ex.clock.advance(1.0)
    ex.exit("web")
    assert ex.event_kinds()[-4:] == [
        EventKind.CHILD_FAILED,
        EventKind.AUTO_SHUTDOWN,
        EventKind.CHILD_TERMINATED,
        EventKind.SUPERVISOR_STOPPED,
    ]


def test_a_dynamic_child_that_fails_is_removed():
    spec = SupervisorSpec(
        "pool",
        strategy=Strategy.SIMPLE_ONE_FOR_ONE,
        intensity=1,
        children=[worker("w", restart_limit=(1, 10.0))],
    )
    ex = running(spec)
    ex.ok("start_child", ())
    ex.ok("start_child", ())
    crash_loop(ex, "w-1", 2)
    assert ex.removed == ["w-1"]
    assert [c.id for c in ex.sup.children()] == ["w-2"]
    assert ex.sup.mode == "running"


def test_a_contained_child_is_restarted_ahead_only_while_its_window_has_room():
    """Its next exit is then sure to be restarted (the window only gains room until
    that exit); the exit that would be one too many is never acted on ahead."""
    ex = running(tree())  # web: at most 2 restarts in 10 s
    assert ex.sup.exit_plan("a") is not None
    assert ex.sup.exit_plan("web") is not None
    crash_loop(ex, "web", 1)
    assert ex.sup.exit_plan("web") is not None  # one restart of 2 used
    crash_loop(ex, "web", 1)
    assert ex.sup.exit_plan("web") is None  # the next exit fails it
    crash_loop(ex, "a", 1, every=10.0)  # the core's time goes on: web's restarts age out
    assert ex.sup.exit_plan("web") is not None


# -- reset_restarts ------------------------------------------------------------------


def test_reset_of_a_child_empties_its_window():
    ex = running(tree())
    crash_loop(ex, "web", 2)
    assert ex.ok("reset_restarts", "web") == 2
    event = ex.events[-1]
    assert (event.context, event.offender) == (EventKind.RESTARTS_RESET, "web")
    assert event.detail == "restart_limit intensity=2 period=10 forgotten=2"
    crash_loop(ex, "web", 2)  # would have failed at the first without the reset
    assert states(ex)["web"] == "running"
    crash_loop(ex, "web", 1)
    assert states(ex)["web"] == "failed"


def test_terminate_child_of_a_failed_child_leaves_it_failed():
    ex = running(tree())
    crash_loop(ex, "web", 3)
    assert ex.ok("terminate_child", "web") is None
    assert states(ex)["web"] == "failed"


def test_reset_of_a_failed_child_leaves_it_stopped_until_started():
    ex = running(tree())
    crash_loop(ex, "web", 3)
    assert ex.ok("reset_restarts", "web") == 3
    assert states(ex)["web"] == "stopped"
    assert "web" not in ex.live()
    ex.ok("restart_child", "web")
    assert states(ex)["web"] == "running"


def test_reset_of_the_supervisor_empties_its_window():
    ex = running(tree(intensity=2))
    crash_loop(ex, "a", 2)
    assert ex.sup.restart_budget(ex.clock.now) == 0
    assert ex.ok("reset_restarts", None) == 2
    assert ex.sup.restart_times == ()
    event = ex.events[-1]
    assert (event.context, event.offender, event.supervisor) == (
        EventKind.RESTARTS_RESET,
        None,
        "sup",
    )
    assert event.detail == "intensity=2 period=5 forgotten=2"
    crash_loop(ex, "a", 2)  # two more fit: the third would have stopped it unreset
    assert ex.sup.mode == "running"
    crash_loop(ex, "a", 1)
    assert ex.sup.mode == "stopped"


def test_reset_counts_only_the_restarts_still_in_the_window():
    ex = running(tree(intensity=3))
    crash_loop(ex, "a", 2)
    ex.clock.advance(6.0)
    assert ex.ok("reset_restarts", None) == 0


def test_reset_of_a_child_without_a_limit_names_its_supervisor():
    ex = running(tree())
    reply = ex.call("reset_restarts", "a")
    assert isinstance(reply.error, NoRestartLimit)
    assert "reset the supervisor 'sup' instead" in str(reply.error)


def test_reset_of_an_unknown_child_is_child_not_found():
    ex = running(tree())
    assert isinstance(ex.call("reset_restarts", "nope").error, ChildNotFound)


def test_restart_limit_is_only_for_workers():
    assert ChildSpec("x", command=["true"], restart_limit=(3, 1)).restart_limit == RestartLimit(
        3, 1.0
    )
    with pytest.raises(TypeError):
        SupervisorSpec("s", restart_limit=(3, 1))  # type: ignore[call-arg]


def test_a_failed_start_in_a_group_restart_is_the_groups_failed_restart():
    """OTP's pattern: the group starts the child's own supervisor, whose init fails
    with the child; that is the group's failed restart (section 5.5): charged to
    the supervisor and retried by its strategy, not by the child's own limit."""
    ex = running(tree(Strategy.ONE_FOR_ALL, intensity=5))
    ex.fail_starts("web", times=1)
    ex.clock.advance(1.0)
    mark = len(ex.log)
    ex.exit("a")
    ex.drain()
    assert ex.log[mark:] == [
        ("terminate", "b"),
        ("terminate", "web"),
        ("start", "a"),
        ("start_failed", "web"),
        ("terminate", "a"),  # the retry restarts the whole group again
        ("start", "a"),
        ("start", "web"),
        ("start", "b"),
    ]
    assert len(ex.sup.restart_times) == 2  # a's exit and the failed restart
    assert set(states(ex).values()) == {"running"}
