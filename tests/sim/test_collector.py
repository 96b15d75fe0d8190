"""simulate() pauses Python's cyclic garbage collector for a run: it must give it back
as it found it, and a run must make no cyclic garbage as it goes (what a paused
collector would leave until the run ends), however long it runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from supervision import ExitReason, SupervisorSpec
from supervision.simulate import Exponential, FaultModel, Flapping, Hang, simulate
from supervision.simulate._faults import Rng
from tests.support.trial_tree import trial_tree


def flapping_tree() -> SupervisorSpec:
    """A db a probe watches (it hangs) beside a web supervisor that gives up and is
    restarted by the root again and again: nested nodes die all the time."""
    return trial_tree()


FAULTS: dict[str, FaultModel | list[FaultModel]] = {
    "db": [Hang(mean=3600.0), Flapping(probability=0.05)],
    **{f"web/w{i}": Exponential(mtbf=60.0) for i in range(3)},
}


@pytest.fixture
def collector() -> Iterator[None]:
    """Leave the collector on, whatever a test did."""
    yield
    gc.enable()


def test_the_collector_is_on_again_after_a_run(collector: None) -> None:
    assert gc.isenabled()
    simulate(flapping_tree(), FAULTS, duration=3600.0, root_restart_delay=30.0)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collector: None) -> None:
    gc.disable()
    simulate(flapping_tree(), FAULTS, duration=3600.0, root_restart_delay=30.0)
    assert not gc.isenabled()


@dataclass(frozen=True, kw_only=True)
class Broken(FaultModel):
    """A model that fails the run itself, at a start's draw."""

    def lifetime(self, rng: Rng, incarnation: int) -> tuple[float, ExitReason] | None:
        raise RuntimeError("a broken model")


def test_the_collector_is_on_again_after_a_run_that_fails(collector: None) -> None:
    with pytest.raises(RuntimeError, match="a broken model"):
        simulate(flapping_tree(), {"db": Broken()}, duration=3600.0)
    assert gc.isenabled()


def garbage_of_a_run(days: float) -> tuple[int, int]:
    """Objects in cycles nothing reaches once a run of `days` is over (its result kept),
    and the run's event count."""
    gc.collect()
    gc.disable()
    try:
        result = simulate(
            flapping_tree(), FAULTS, duration=days * 86400.0, seed=3, root_restart_delay=30.0
        )
        found = gc.collect()
    finally:
        gc.enable()
    return found, len(result.events)


def test_a_runs_cyclic_garbage_does_not_grow_with_its_length(collector: None) -> None:
    short, short_events = garbage_of_a_run(0.5)
    long, long_events = garbage_of_a_run(4.0)
    assert long_events > 6 * short_events  # eight times the run: the web tier gave up often
    # The run itself (its nodes and the engine) is one cycle, freed as a whole; nothing
    # per event: a restarted subtree's old node, a process, a message are freed at once.
    assert long < short + 200, (short, long)
