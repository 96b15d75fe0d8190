"""One schedule, run live and replayed; the totals of many (tests/chaos/__init__.py)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field

from ._live import LiveRun, run_live
from ._replay import Comparison, Injected, compare, replay
from ._schedule import Schedule, generate

# Seconds. Over 298 schedules on a shared, loaded 2-core VM a live exit was handled
# 3 ms (median), 15 to 112 ms (p99 of two runs), 246 ms (max) after its fault.
MARGIN = 0.3


@dataclass(frozen=True)
class Outcome:
    """One schedule run live and replayed."""

    schedule: Schedule
    live: LiveRun
    comparison: Comparison

    @property
    def agrees(self) -> bool:
        return self.live.stalled is None and self.comparison.agrees

    @property
    def timing(self) -> bool:
        """They differ where a window's edge fell between two exits in one run and not
        in the other: a difference of timing (the lag beat the margin), not of decision."""
        return not self.agrees and self.live.stalled is None and self.comparison.crossings > 0

    @property
    def gave_up(self) -> bool:
        return self.live.stopped_at is None

    def explain(self) -> str:
        lines = [self.schedule.describe()]
        lines += [f"  injected at {i.at:.3f}: {i.fault} {_result(i)}" for i in self.live.injected]
        if self.live.stalled:
            lines.append(f"  stalled: {self.live.stalled}")
        lines.append(self.comparison.explain())
        return "\n".join(lines)


def _result(i: Injected) -> str:
    if i.fault.kind != "call":
        return "" if i.landed else "(no process)"
    return f"-> {i.outcome or 'ok'}" + (f" {i.value}" if i.value else "")


def run_schedule(seed: int, margin: float = MARGIN) -> Outcome:
    """Generate schedule `seed`, run it live, replay it, and compare."""
    with tempfile.TemporaryDirectory(prefix="chaos-") as directory:
        schedule = generate(seed, directory)
        live = run_live(schedule, margin)
    result = replay(schedule.spec, live.injected, live.stopped_at)
    calls = [(i.outcome, i.value) for i in live.injected if i.fault.kind == "call"]
    comparison = compare(live.events, live.origin, result, calls, live.initial)
    return Outcome(schedule, live, comparison)


@dataclass
class Totals:
    """What a number of schedules came to: the figure in docs/explanation/design.md."""

    schedules: int = 0
    decisions: int = 0  # compared, the trees' starts left out
    faults: int = 0  # injected
    give_ups: int = 0  # supervisors that reached their intensity, in the live runs
    moved: int = 0  # faults moved off an intensity window's edge
    crossings: int = 0  # pairs of exits on either side of an edge, live and replayed
    lags: list[float] = field(default_factory=list)  # each live exit behind its replay (s)
    differences: list[Outcome] = field(default_factory=list)
    timing: list[Outcome] = field(default_factory=list)  # differences of timing

    def add(self, outcome: Outcome) -> None:
        c = outcome.comparison
        self.schedules += 1
        self.decisions += c.compared
        self.faults += len(outcome.live.injected)
        self.give_ups += sum(1 for d in c.live if d[1] == "reached_max_restart_intensity")
        self.moved += outcome.live.moved
        self.crossings += c.crossings
        self.lags += c.lags
        if outcome.timing:
            self.timing.append(outcome)
        elif not outcome.agrees:
            self.differences.append(outcome)

    def lag(self, quantile: float) -> float:
        ordered = sorted(self.lags)
        return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] if ordered else 0.0

    def summary(self, margin: float = MARGIN) -> str:
        return (
            f"{self.schedules} random schedules, {self.faults} faults, {self.give_ups} "
            f"give-ups: {self.decisions} decisions compared, {len(self.differences)} "
            f"differences. Margin {margin:g} s ({self.moved} faults moved off a window's "
            f"edge); lag of a live exit behind its replay: median "
            f"{self.lag(0.5) * 1000:.1f} ms, p99 {self.lag(0.99) * 1000:.1f} ms, max "
            f"{self.lag(1.0) * 1000:.1f} ms; {self.crossings} pairs of exits on either side "
            f"of an edge, {len(self.timing)} differences of timing"
        )


__all__ = ["MARGIN", "Outcome", "Totals", "run_schedule"]
