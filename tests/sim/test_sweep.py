"""Sweeps: a grid of specs over seeds, with confidence intervals, on one core or many."""

from __future__ import annotations

import math

import pytest

from actors.experiment import process_map
from actors.experiment import sweep as parallel_sweep
from supervision import SpecError, Strategy, SupervisorSpec
from supervision.simulate import Estimate, Exponential, grid, simulate, sweep
from tests.support.fake_executor import worker

FAULTS = {"b": Exponential(mtbf=20.0, start_duration=0.5)}


def build(intensity: int, period: float, strategy: Strategy = Strategy.ONE_FOR_ONE):
    return SupervisorSpec(
        "root",
        strategy=strategy,
        intensity=intensity,
        period=period,
        children=[worker("a"), worker("b"), worker("c")],
    )


def test_estimate_is_a_student_t_interval():
    est = Estimate.of([1.0, 2.0, 3.0])
    assert est is not None and est.mean == 2.0 and est.n == 3
    assert est.half_width == pytest.approx(4.303 / math.sqrt(3))
    assert Estimate.of([]) is None
    one = Estimate.of([5.0])
    assert one is not None and math.isinf(one.half_width)


def test_an_estimate_is_rounded_to_what_its_interval_supports():
    assert Estimate(0.123456, 0.120456, 0.126456, 10).format(100.0) == "12.35 ± 0.30"
    assert Estimate(1234.5, 1134.5, 1334.5, 10).format() == "1234 ± 100"
    assert Estimate(3.0, 3.0, 3.0, 10).format() == "3 ± 0"


def test_grid_is_every_combination_last_axis_fastest():
    assert grid(a=[1, 2], b="xy") == [
        {"a": 1, "b": "x"},
        {"a": 1, "b": "y"},
        {"a": 2, "b": "x"},
        {"a": 2, "b": "y"},
    ]


def test_a_sweep_row_is_the_mean_of_the_same_simulations():
    table = sweep(build, FAULTS, duration=600, seeds=range(4), intensity=[1, 5], period=[5, 30])
    assert [r.params for r in table.rows] == grid(intensity=[1, 5], period=[5, 30])
    row = table.row(intensity=5, period=30)
    runs = [simulate(build(5, 30), FAULTS, duration=600, seed=s) for s in range(4)]
    assert row.availability.mean == pytest.approx(sum(r.tree.availability for r in runs) / 4)
    assert row.restarts.mean == pytest.approx(sum(r.tree.restarts for r in runs) / 4)
    gave_up = [r.tree.time_to_give_up for r in runs if r.tree.time_to_give_up is not None]
    assert row.gave_up_runs == len(gave_up)
    assert row.availability.low <= row.availability.mean <= row.availability.high
    # A laxer intensity gives up less often on the same faults.
    assert row.give_ups.mean <= table.row(intensity=1, period=5).give_ups.mean
    text = str(table)
    assert "95% confidence" in text and "availability %" in text


def test_the_parallel_sweep_gives_the_same_table():
    axes = {"intensity": [1, 3], "strategy": [Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL]}
    kw = {"duration": 300.0, "seeds": range(3)}
    one = sweep(lambda intensity, strategy: build(intensity, 5.0, strategy), FAULTS, **kw, **axes)
    many = parallel_sweep(_build_strategy, FAULTS, workers=2, **kw, **axes)
    assert [r.availability for r in many.rows] == [r.availability for r in one.rows]
    assert [r.params for r in many.rows] == [r.params for r in one.rows]


def _build_strategy(intensity: int, strategy: Strategy) -> SupervisorSpec:
    return build(intensity, 5.0, strategy)


def test_process_map_keeps_the_order():
    assert list(process_map(2)(abs, range(-50, 0))) == list(range(50, 0, -1))


def test_a_sweep_needs_axes_seeds_and_specs():
    with pytest.raises(SpecError, match="axes"):
        sweep(build, duration=1)
    with pytest.raises(SpecError, match="seeds"):
        sweep(build, duration=1, seeds=[], intensity=[1], period=[5])
    with pytest.raises(SpecError, match="build"):
        sweep(lambda intensity: None, duration=1, intensity=[1])
    with pytest.raises(SpecError, match="metric"):
        sweep(build, duration=1, seeds=[0], intensity=[1], period=[5]).rows[0].metric("x")
