"""The fencing rule (supervision.Fencing), pure, on a fake clock: leases, the far
side's fence, the parent's wait, and when an unreachable node is declared down.
The live side and the simulator agreeing on it: tests/sim/test_nodes.py."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from supervision import ExitKind, ExitReason, Fencing
from supervision.simulate import Cluster

SECONDS = st.floats(min_value=0.01, max_value=1000.0, allow_nan=False, allow_infinity=False)
NODE_DOWN = ExitReason(ExitKind.NODE_DOWN)


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def test_the_parent_waits_out_the_lease_since_its_last_renewal() -> None:
    fencing = Fencing(lease_timeout=3.0)
    assert fencing.fence_delay(now=10.0, last_renewal=9.0) == 2.0
    assert fencing.fence_delay(now=13.5, last_renewal=9.0) == 0.0
    assert fencing.fence_delay(now=10.0, last_renewal=None) == 0.0  # never renewed: no lease
    assert Fencing().fence_delay(now=10.0, last_renewal=9.0) == 0.0  # leases off: at once


def test_the_far_side_fences_at_three_quarters_of_the_lease() -> None:
    fencing = Fencing(lease_timeout=3.0)
    assert not fencing.lease_expired(now=11.2, last_renewal=9.0)
    assert fencing.lease_expired(now=11.25, last_renewal=9.0)
    assert not Fencing().lease_expired(now=1e9, last_renewal=9.0)


def test_two_lost_renewals_do_not_fence_a_third_does() -> None:
    fencing = Fencing(lease_timeout=3.0)
    assert fencing.renew_every == 1.0 and Fencing().renew_every is None
    clock = FakeClock(9.0)
    renewed = clock.now
    clock.advance(2 * fencing.renew_every)  # two renewals lost in a row
    assert not fencing.lease_expired(clock.now, renewed)
    clock.advance(fencing.renew_every)  # the third: the far side has fenced by now
    assert fencing.lease_expired(clock.now, renewed)


def test_only_an_incarnation_that_may_still_run_waits_for_its_fence() -> None:
    fencing = Fencing(lease_timeout=3.0)
    for kind in (ExitKind.NODE_DOWN, ExitKind.REMOTE_UNRESPONSIVE):
        assert fencing.tell_after(ExitReason(kind), now=10.0, last_renewal=9.0) == 2.0
    for reason in (ExitReason(ExitKind.REMOTE_CRASH), ExitReason.shutdown()):
        assert fencing.tell_after(reason, now=10.0, last_renewal=9.0) == 0.0


@given(lease=SECONDS, renewed=SECONDS, late=st.floats(0.0, 10.0), after=st.floats(0.0, 10.0))
def test_the_far_side_has_a_quarter_lease_to_stop_before_the_parent_acts(
    lease: float, renewed: float, late: float, after: float
) -> None:
    """The far side records a renewal no later than the parent does (the call returns
    after it ran), so whenever the parent may act the fence is a quarter lease old."""
    fencing = Fencing(lease_timeout=lease)
    far, parent = renewed, renewed + late
    now = parent + lease + after  # the first moment the parent may act, or later
    rounding = 1e-9 * now  # the sums are floats: equal on paper may be an ulp apart
    assert fencing.tell_after(NODE_DOWN, now + rounding, parent) == 0.0
    assert fencing.lease_expired(now - lease / 4 + rounding, far)


@given(lease=SECONDS, renewed=SECONDS, early=st.floats(0.001, 1.0))
def test_the_parent_never_acts_inside_the_lease(lease: float, renewed: float, early: float) -> None:
    fencing = Fencing(lease_timeout=lease)
    now = renewed + lease * (1 - early)
    assert fencing.tell_after(NODE_DOWN, now, renewed) > 0.0
    assert fencing.tell_after(ExitReason(ExitKind.REMOTE_CRASH), now, renewed) == 0.0


def test_an_unreachable_node_stays_up_until_the_engine_says_otherwise() -> None:
    fencing, clock = Fencing(), FakeClock(100.0)
    since = clock.now
    for _ in range(5):
        assert fencing.verdict(clock.advance(60.0), "b", since, listed=True) is None
    verdict = fencing.verdict(clock.now, "b", since, listed=False)
    assert verdict is not None and verdict.kind is ExitKind.NODE_DOWN
    assert "'b' was declared dead" in verdict.message and not verdict.is_normal


def test_unreachable_timeout_declares_the_node_down_at_its_bound() -> None:
    fencing, clock = Fencing(unreachable_timeout=2.0), FakeClock(100.0)
    since = clock.now
    assert fencing.verdict(clock.advance(1.99), "b", since, listed=True) is None
    verdict = fencing.verdict(clock.advance(0.01), "b", since, listed=True)
    assert verdict is not None and verdict.kind is ExitKind.NODE_DOWN
    assert "unreachable for 2.0s (unreachable_timeout)" in verdict.message


@given(
    engine=SECONDS,
    limit=st.none() | SECONDS,
    health_check=st.floats(0.0, 1000.0, allow_nan=False),
)
def test_the_simulators_declaration_time_is_the_live_verdicts_first(
    engine: float, limit: float | None, health_check: float
) -> None:
    """declared_after (the simulator's) is the first moment at which the live verdict,
    asked with the engine listing the node until `engine` s, says node_down."""
    fencing = Fencing(unreachable_timeout=limit)
    at = fencing.declared_after(engine)
    cut = 0.0  # exact arithmetic: the bound is inclusive

    def verdict(t: float) -> ExitReason | None:
        return fencing.verdict(cut + t, "b", cut, listed=t < engine)

    assert verdict(at) is not None
    assert verdict(at * 0.999) is None
    cluster = Cluster(["a", "b"], health_check=health_check, unreachable_timeout=limit)
    assert cluster.declared_after == fencing.declared_after(health_check)


def test_a_renewal_that_comes_after_the_parent_gave_up_on_it_does_not_count() -> None:
    """A frozen raylet delivers the calls it queued when it thaws: a renewal the
    parent's call timed out on (after renew_every) must not stretch the lease."""
    fencing = Fencing(lease_timeout=30.0)
    every = fencing.renew_every
    assert every == 10.0
    assert fencing.renewal_counts(sent=100.0, received=100.05)
    assert fencing.renewal_counts(sent=100.0, received=100.0 + every)
    assert not fencing.renewal_counts(sent=100.0, received=100.0 + every + 0.01)
    assert fencing.renewal_counts(sent=None, received=500.0)  # a parent that does not say
    assert Fencing(lease_timeout=None).renewal_counts(sent=0.0, received=1e9)  # no lease
