"""add_restart: at most `intensity` restarts in any window of `period` seconds (section 4)."""

from __future__ import annotations

from itertools import accumulate

from hypothesis import given, settings
from hypothesis import strategies as st

from supervision import add_restart

fast = settings(max_examples=200, deadline=None, database=None)

intensities = st.integers(min_value=0, max_value=6)
periods = st.floats(min_value=0.5, max_value=100.0, allow_nan=False)
gaps = st.lists(st.floats(min_value=0.0, max_value=60.0, allow_nan=False), max_size=40)


def charge_all(times: list[float], intensity: int, period: float) -> list[bool]:
    """Feed every time to add_restart; return whether each charge exceeded the limit."""
    window: tuple[float, ...] = ()
    exceeded = []
    for t in times:
        window, over = add_restart(window, t, intensity, period)
        exceeded.append(over)
    return exceeded


@fast
@given(gaps, intensities, periods)
def test_exceeded_exactly_when_the_window_ending_now_holds_more_than_intensity(
    gap_list, intensity, period
):
    times = list(accumulate(gap_list))
    exceeded = charge_all(times, intensity, period)
    for i, now in enumerate(times):
        in_window = sum(1 for t in times[: i + 1] if t >= now - period)
        assert exceeded[i] == (in_window > intensity)


@fast
@given(gaps, intensities, periods)
def test_never_more_than_intensity_accepted_restarts_within_any_period(gap_list, intensity, period):
    times = list(accumulate(gap_list))
    exceeded = charge_all(times, intensity, period)
    accepted = [t for t, over in zip(times, exceeded, strict=True) if not over]
    # The fullest window of `period` seconds ends at an accepted restart.
    for end in accepted:
        assert sum(1 for t in accepted if end - period <= t <= end) <= intensity


@fast
@given(
    st.lists(st.floats(min_value=0.01, max_value=50.0), max_size=40),
    st.integers(min_value=1, max_value=6),
    periods,
)
def test_restarts_spaced_more_than_period_apart_never_exceed(extra_gaps, intensity, period):
    times = list(accumulate(period + extra for extra in extra_gaps))
    assert not any(charge_all(times, intensity, period))


@fast
@given(st.floats(min_value=0.0, max_value=1e6), periods)
def test_intensity_zero_gives_up_on_the_first_restart(now, period):
    window, exceeded = add_restart((), now, 0, period)
    assert exceeded
    assert window == (now,)


@fast
@given(st.floats(min_value=0.0, max_value=1e6), periods)
def test_window_is_inclusive_at_exactly_period(now, period):
    earlier = now - period
    _, exceeded = add_restart((earlier,), now, 1, period)
    assert exceeded, "t >= now - period: a restart exactly `period` ago still counts"
    _, exceeded = add_restart((earlier - 0.001 * period,), now, 1, period)
    assert not exceeded


def test_returned_window_is_newest_first_and_drops_expired_restarts():
    window, exceeded = add_restart((9.0, 6.0, 4.0, 1.0), 10.0, 5, 5.0)
    assert window == (10.0, 9.0, 6.0)
    assert not exceeded


def test_intensity_restarts_are_allowed_and_the_next_one_is_not():
    window: tuple[float, ...] = ()
    results = []
    for t in (0.0, 1.0, 2.0, 3.0):
        window, exceeded = add_restart(window, t, 3, 10.0)
        results.append(exceeded)
    assert results == [False, False, False, True]


@fast
@given(gaps, intensities, periods)
def test_the_restart_window_agrees_with_add_restart(gap_list, intensity, period):
    from supervision import RestartWindow

    times = list(accumulate(gap_list))
    window = RestartWindow(intensity, period)
    reference: tuple[float, ...] = ()
    for t in times:
        reference, over = add_restart(reference, t, intensity, period)
        assert window.add(t) == over
        assert window.times() == reference


def test_the_restart_window_is_trimmed_from_the_old_end_at_high_intensity():
    from supervision import RestartWindow

    window = RestartWindow(10**6, 1.0)
    for i in range(200_000):
        assert not window.add(i * 0.001)  # 1,000 restarts per second
    # Only the last second is kept: trimmed as it goes, never rescanned.
    assert len(window) == 1001
    assert window.budget(199.999) == 10**6 - 1001
    assert window.budget(1000.0) == 10**6
