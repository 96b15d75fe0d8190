"""Decisions that used to live in the shell, now in the pure core (the house issue):
the grant for restarts made ahead, the launcher's own relaunch intensity, and the
exit rules beyond OTP's (a dead launcher, a daemonized program, a pid file)."""

from __future__ import annotations

from supervision import (
    ChildSpec,
    EventKind,
    ExitKind,
    ExitReason,
    Relaunches,
    Supervisor,
    SupervisorSpec,
    classify_exit,
)
from supervision._actions import Report


def _running(intensity: int, period: float = 10.0) -> Supervisor:
    core = Supervisor(
        SupervisorSpec(
            id="r", intensity=intensity, period=period, children=[ChildSpec(id="a", command=["x"])]
        )
    )
    core.start(0.0)
    core.started("a", 100, 1, 0.0)
    return core


# -- the grant ----------------------------------------------------------------------------


def test_the_first_grant_is_the_whole_budget() -> None:
    assert _running(4).grant(1.0, used=0, granted=-1) == 4


def test_a_restart_made_ahead_and_charged_leaves_the_grant_alone() -> None:
    core = _running(4)
    assert core.grant(1.0, used=0, granted=-1) == 4
    core.child_exited("a", 1, ExitReason(ExitKind.KILLED, signal=9), 2.0)
    core.started("a", 101, 2, 2.0)
    # The spawner used 1, the core charged 1: 1 + 3 == 4, nothing to send.
    assert core.grant(2.0, used=1, granted=4) is None


def test_the_grant_grows_only_once_half_of_it_was_used() -> None:
    core = _running(4, period=10.0)
    for t in (1.0, 2.0):
        core.child_exited("a", core.which_child("a").incarnation, ExitReason.normal(), t)
        core.started("a", 100 + int(t), core.which_child("a").incarnation + 1, t)
    # Both restarts left the window by t=12: the budget is 4 again, 2 were used ahead.
    assert core.grant(12.5, used=2, granted=4) == 6  # headroom 2 <= 4 // 2: grow
    assert core.grant(12.5, used=1, granted=4) is None  # headroom 3: not yet


def test_the_grant_drops_at_once_and_to_nothing_when_not_running() -> None:
    core = _running(2, period=100.0)
    core.child_exited("a", 1, ExitReason.normal(), 1.0)
    core.started("a", 101, 2, 1.0)
    assert core.grant(2.0, used=0, granted=2) == 1  # the core charged one it did not see
    core.shutdown(3.0)
    assert core.grant(3.0, used=1, granted=2) == 1  # used, and nothing more


# -- the launcher's relaunches --------------------------------------------------------------


def test_a_launcher_is_replaced_three_times_in_ten_seconds_then_the_tree_ends() -> None:
    relaunches = Relaunches()
    assert [relaunches.relaunch(t, "killed") for t in (0.0, 1.0, 2.0)] == [None] * 3
    ended = relaunches.relaunch(3.0, "killed by signal 9")
    assert ended is not None and ended.kind is ExitKind.LAUNCHER_DIED
    assert "4 times within 10 s" in ended.message and "killed by signal 9" in ended.message


def test_relaunches_older_than_the_period_no_longer_count() -> None:
    relaunches = Relaunches(intensity=3, period=10.0)
    for t in (0.0, 1.0, 2.0):
        assert relaunches.relaunch(t, "x") is None
    assert relaunches.relaunch(10.5, "x") is None  # 0.0 left the window
    assert relaunches.relaunch(11.5, "x") is None  # and 1.0
    assert relaunches.relaunch(11.9, "x") is not None  # 2.0, 10.5, 11.5 and now: 4


# -- the exit rules -------------------------------------------------------------------------


def test_a_child_of_a_dead_launcher_died_with_it_unless_it_was_being_stopped() -> None:
    died = classify_exit(-9, launcher_died=True, stderr_tail="bye")
    assert died.kind is ExitKind.LAUNCHER_DIED and died.signal == 9 and died.stderr_tail == "bye"
    assert classify_exit(-9, launcher_died=True, stop_requested=True).kind is ExitKind.SHUTDOWN


def test_a_first_process_that_left_its_tree_running_daemonized_itself() -> None:
    reason = classify_exit(0, detached=(41, 42), child="nginx")
    assert reason.kind is ExitKind.DAEMONIZED and not reason.is_normal
    assert "child 'nginx'" in reason.message and "pid 41, 42" in reason.message
    assert "pid_file" in reason.message
    assert classify_exit(1, detached=(41,)).kind is ExitKind.EXIT_CODE  # only an exit 0
    assert classify_exit(0, detached=(41,), stop_requested=True).kind is ExitKind.SHUTDOWN


def test_a_pid_file_that_never_came_is_a_failed_start_only_with_a_pid_file() -> None:
    failed = classify_exit(
        1, exc_type="PidFileError", exc_message="no pid in /run/x.pid", pid_file_timeout=5.0
    )
    assert failed.kind is ExitKind.START_FAILURE
    assert failed.message.startswith("no pid in /run/x.pid within start_timeout=5.0s")
    other = classify_exit(1, exc_type="PidFileError", exc_message="boom")
    assert other.kind is ExitKind.EXCEPTION


def test_a_child_that_daemonized_itself_is_left_failed_not_restarted() -> None:
    """Beyond OTP (docs/otp-semantics.md section 14): every restart would fork away
    again, so the child is failed at once, nothing is charged, no sibling is touched."""
    core = Supervisor(
        SupervisorSpec(
            id="r",
            strategy="one_for_all",
            intensity=1,
            children=[ChildSpec(id="a", command=["x"]), ChildSpec(id="b", command=["y"])],
        )
    )
    core.start(0.0)
    core.started("a", 100, 1, 0.0)
    core.started("b", 101, 1, 0.0)
    reason = classify_exit(0, detached=(41,), child="a")
    actions = core.child_exited("a", 1, reason, 1.0)
    assert all(isinstance(a, Report) for a in actions)  # no restart, no stop of b
    assert core.which_child("a").state == "failed"
    assert core.which_child("b").state == "running"
    failed = [a.event for a in actions if a.event.context is EventKind.CHILD_FAILED]
    assert [(e.offender, e.reason) for e in failed] == [("a", reason)]
    assert "set pid_file" in failed[0].detail
    # Twice more would have gone over intensity=1 had it been charged: it was not.
    core.restart_child("a", 2.0)
    core.started("a", 102, 2, 2.0)
    core.child_exited("a", 2, reason, 3.0)
    assert core.mode == "running" and core.which_child("a").state == "failed"
