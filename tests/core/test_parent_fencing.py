"""The parent's part of "no remote child runs twice" (docs/multihost.md section 5),
pure, on a fake clock: when an exit whose incarnation may still run is told, what
confirms it gone, and the liveness bound on a remote that does not answer at all."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from supervision import ExitKind, ExitReason, Fencing

UNRESPONSIVE = ExitReason(ExitKind.REMOTE_UNRESPONSIVE)
NODE_DOWN = ExitReason(ExitKind.NODE_DOWN)
CRASH = ExitReason(ExitKind.REMOTE_CRASH)
SECONDS = st.floats(min_value=0.01, max_value=1000.0, allow_nan=False, allow_infinity=False)


def test_without_a_lease_a_killed_unresponsive_remote_waits_for_its_confirmation() -> None:
    fencing = Fencing()
    assert fencing.tell_after(UNRESPONSIVE, now=10.0, last_renewal=None) is None
    assert fencing.tell_after(NODE_DOWN, now=10.0, last_renewal=None) == 0.0  # the verdict
    assert fencing.tell_after(CRASH, now=10.0, last_renewal=None) == 0.0


def test_with_a_lease_it_waits_at_most_until_the_lease_has_run_out() -> None:
    fencing = Fencing(lease_timeout=3.0)
    for reason in (UNRESPONSIVE, NODE_DOWN):
        assert fencing.tell_after(reason, now=10.0, last_renewal=9.0) == 2.0
        assert fencing.tell_after(reason, now=12.5, last_renewal=9.0) == 0.0


def test_what_confirms_a_killed_incarnation_gone() -> None:
    # Its process's death report always; its node's only without a lease (with one,
    # a node declared dead may be cut off and still running until its fence).
    assert Fencing().confirms(CRASH) and Fencing(lease_timeout=3.0).confirms(CRASH)
    assert Fencing().confirms(NODE_DOWN)
    assert not Fencing(lease_timeout=3.0).confirms(NODE_DOWN)
    assert not Fencing().confirms(ExitReason.shutdown())


def test_a_remote_silent_for_the_liveness_timeout_is_unresponsive() -> None:
    fencing = Fencing(liveness_timeout=2.0)
    assert fencing.verdict(11.99, "b", 10.0, listed=True) is None
    verdict = fencing.verdict(12.0, "b", 10.0, listed=True)
    assert verdict is not None and verdict.kind is ExitKind.REMOTE_UNRESPONSIVE
    assert "liveness_timeout" in verdict.message and not verdict.is_normal
    # The engine's verdict and unreachable_timeout come first: the node is gone.
    both = Fencing(unreachable_timeout=2.0, liveness_timeout=2.0)
    assert both.verdict(12.0, "b", 10.0, listed=True).kind is ExitKind.NODE_DOWN  # type: ignore[union-attr]
    assert fencing.verdict(12.0, "b", 10.0, listed=False).kind is ExitKind.NODE_DOWN  # type: ignore[union-attr]
    assert Fencing().verdict(1e9, "b", 10.0, listed=True) is None  # off by default


@given(lease=SECONDS, renewed=SECONDS, late=st.floats(0.0, 10.0), now=SECONDS)
def test_no_exit_that_may_still_run_is_told_inside_its_lease_unconfirmed(
    lease: float, renewed: float, late: float, now: float
) -> None:
    """Whatever the times: told at once only once the lease is over (or never without
    one, for a killed unresponsive remote); a crash always at once."""
    fencing = Fencing(lease_timeout=lease)
    parent = renewed + late
    for reason in (UNRESPONSIVE, NODE_DOWN):
        wait = fencing.tell_after(reason, now, parent)
        assert wait is not None
        assert (wait == 0.0) == (now >= parent + lease)
    assert fencing.tell_after(CRASH, now, parent) == 0.0
