"""A sweep's plots: a metric along one axis with error bars, and heatmap cells that show
their interval with the decimals that tell them apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervision import SpecError, SupervisorSpec
from supervision.simulate import Estimate, Exponential, SweepRow, SweepTable, sweep
from tests.support.fake_executor import worker

pytest.importorskip("matplotlib")

from actors.plot import plot_heatmap, plot_sweep


def build(intensity: int, period: float) -> SupervisorSpec:
    web = SupervisorSpec(
        "web", intensity=intensity, period=period, children=[worker("a"), worker("b")]
    )
    return SupervisorSpec("root", intensity=100, period=1, children=[worker("db"), web])


FAULTS = {"web/a": Exponential(20.0, start_duration=0.5)}


@pytest.fixture(scope="module")
def table() -> SweepTable:
    return sweep(
        build,
        FAULTS,
        duration=1800.0,
        seeds=range(4),
        metrics={"either": "any_of(web/a, web/b)"},
        intensity=[1, 3, 10],
        period=[5, 60],
    )


def test_a_sweeps_metric_along_an_axis_with_a_line_per_value_of_another(
    table: SweepTable, tmp_path: Path
) -> None:
    fig = plot_sweep(table, "intensity", "either", tmp_path / "s.png", by="period")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["period=5", "period=60"]
    means = [line for line in ax.get_lines() if line.get_marker() == "o"]  # not the caps
    assert len(means) == 2
    expected = [table.row(intensity=n, period=60).estimate("either") for n in (1, 3, 10)]
    assert list(means[1].get_ydata()) == pytest.approx([e.mean * 100 for e in expected if e])
    assert list(means[1].get_xdata()) == [1.0, 3.0, 10.0]  # an axis of numbers, to scale
    assert "either (%)" in ax.get_ylabel()
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"
    # Error bars: one vertical segment per point, from its low to its high.
    bars = [c for c in ax.collections if c.get_segments()]
    segments = [seg for c in bars for seg in c.get_segments()]
    assert len(segments) == 6
    lows = sorted(round(float(seg[0][1]), 6) for seg in segments)
    wanted = sorted(
        round(r.estimates["either"].low * 100, 6)  # type: ignore[union-attr]
        for r in table.rows
    )
    assert lows == wanted


def test_a_plot_of_a_nested_supervisors_give_ups_and_a_bad_name(table: SweepTable) -> None:
    fig = plot_sweep(table, "intensity", "give_ups(web)", where={"period": 5})
    assert fig.axes[0].get_ylabel() == "give_ups(web) per run"
    with pytest.raises(SpecError, match="metric"):
        plot_sweep(table, "intensity", "nope", by="period")
    with pytest.raises(ValueError, match="fix one with where"):
        plot_sweep(table, "intensity", "either")


def _row(intensity: int, mean: float) -> SweepRow:
    est = Estimate(mean, mean - 0.0002, mean + 0.0002, 10)
    return SweepRow(
        {"intensity": intensity, "period": 30},
        10,
        est,
        est,
        est,
        None,
        0,
        estimates={"availability": est},
    )


def test_heatmap_cells_show_their_interval_and_tell_the_best_apart(tmp_path: Path) -> None:
    # The trial's two best settings both read 97.0 with one decimal.
    table = SweepTable(
        {"intensity": (5, 20), "period": (30,)},
        [_row(5, 0.97012), _row(20, 0.97046)],
        3600.0,
        tuple(range(10)),
        kinds={"availability": "fraction"},
    )
    fig = plot_heatmap(table, "availability", "intensity", "period", tmp_path / "h.png")
    texts = sorted(t.get_text() for t in fig.axes[0].texts)
    assert texts == ["97.01\n[96.99, 97.03]", "97.05\n[97.03, 97.07]"]


def test_a_heatmap_of_a_metric_of_ones_own(table: SweepTable) -> None:
    fig = plot_heatmap(table, "either", "intensity", "period")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) == 6 and all("\n[" in t for t in texts)
    assert (
        fig.axes[0]
        .get_title(loc="left")
        .startswith("either (%), mean and 95% interval over 4 seeds")
    )
