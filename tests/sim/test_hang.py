"""The simulator's Hang fault (issue 16): a process alive but stuck, which only a
watchdog ends; in virtual time."""

from __future__ import annotations

import pytest

from supervision import ChildSpec, EventKind, ExitKind, SpecError, SupervisorSpec
from supervision.simulate import Hang, simulate


def _tree(**child: object) -> SupervisorSpec:
    spec = ChildSpec(id="web", command=["web"], **child)  # type: ignore[arg-type]
    return SupervisorSpec(id="root", intensity=100, period=1.0, children=[spec])


def test_without_a_watchdog_a_hung_child_stays_hung_and_counts_as_down() -> None:
    result = simulate(_tree(), {"web": Hang(after=10.0)}, duration=100.0)
    exits = [e for e in result.events if e.context is EventKind.CHILD_EXITED]
    assert exits == []  # its supervisor never notices
    assert result.children["web"].availability == pytest.approx(0.10)


def test_a_watchdog_stops_it_after_its_delay_and_its_shutdown() -> None:
    # Hangs 10 s after each start; watchdog 5 s; it ignores SIGTERM for shutdown=2 s.
    result = simulate(_tree(watchdog=5.0, shutdown=2.0), {"web": Hang(after=10.0)}, duration=60.0)
    exits = [e for e in result.events if e.context is EventKind.CHILD_EXITED]
    starts = [e.time for e in result.events if e.context is EventKind.CHILD_STARTED]
    assert exits and all(e.reason is not None and e.reason.kind is ExitKind.WATCHDOG for e in exits)
    assert [round(e.time, 6) for e in exits[:3]] == [17.0, 34.0, 51.0]  # 10 + 5 + 2 per cycle
    assert starts[:4] == [0.0, 17.0, 34.0, 51.0]
    # Up 10 s of every 17: hung for the watchdog's 5 s and the 2 s stop.
    assert result.children["web"].availability == pytest.approx((10 * 3 + 9) / 60.0, abs=1e-6)


def test_a_hung_process_that_answers_sigterm_stops_at_its_stop_duration() -> None:
    model = Hang(after=10.0, answers_sigterm=True, stop_duration=0.5)
    result = simulate(_tree(watchdog=5.0, shutdown=2.0), {"web": model}, duration=20.0)
    exits = [e for e in result.events if e.context is EventKind.CHILD_EXITED]
    assert exits[0].time == pytest.approx(15.5)


def test_random_hangs_are_deterministic_under_a_seed() -> None:
    spec = _tree(watchdog=1.0, shutdown=1.0)
    one = simulate(spec, {"web": Hang(mean=30.0)}, duration=1000.0, seed=7)
    two = simulate(spec, {"web": Hang(mean=30.0)}, duration=1000.0, seed=7)
    assert [(e.time, e.context) for e in one.events] == [(e.time, e.context) for e in two.events]
    assert one.children["web"].restarts > 5


def test_hang_takes_exactly_one_of_after_and_mean() -> None:
    with pytest.raises(SpecError, match="exactly one"):
        Hang()
    with pytest.raises(SpecError, match="exactly one"):
        Hang(after=1.0, mean=2.0)
