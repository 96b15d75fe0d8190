"""actors.plot: timelines from a simulation's or a live tree's events, saved as PNG."""

from __future__ import annotations

import os
import signal
import struct
import sys
from pathlib import Path

import pytest

from supervision import ChildSpec, Event, EventKind, SupervisorSpec
from supervision.simulate import Exponential, Scripted, simulate
from tests.support import children_by_id, event_log, wait_event
from tests.support.fake_executor import worker
from tests.targets import children

pytest.importorskip("matplotlib")

from actors.plot import _timeline, plot_heatmap, plot_timeline, plot_timelines

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def simulated_events() -> list[Event]:
    spec = SupervisorSpec(
        "root",
        intensity=2,
        period=10.0,
        children=[
            worker("a"),
            SupervisorSpec("pool", children=[worker("w1"), worker("w2")]),
            worker("c"),
        ],
    )
    faults = {
        "pool/w1": Exponential(20.0, start_duration=0.5),
        "c": Exponential(60.0, start_duration=1.0, start_failure_probability=0.2),
    }
    return simulate(spec, faults, duration=600, seed=3, root_restart_delay=20.0).events


def test_a_simulation_timeline_is_a_png(tmp_path):
    fig = plot_timeline(simulated_events(), tmp_path / "t.png", end=600)
    assert fig.axes, "returns the Figure"
    path = tmp_path / "t.png"
    width, height = png_size(path)
    assert width > 500 and height > 200
    assert path.stat().st_size > 10_000


def test_stacked_timelines_share_one_png(tmp_path):
    one = simulate(
        SupervisorSpec("root", children=[worker("a"), worker("b")]),
        {"b": Scripted([5.0, 20.0])},
        duration=30,
    ).events
    path = tmp_path / "s.png"
    plot_timelines({"first": one, "second": simulated_events()}, path)
    width, height = png_size(path)
    assert width > 500 and height > 300


def test_an_empty_event_list_is_refused(tmp_path):
    with pytest.raises(ValueError, match="empty event list"):
        plot_timeline([], tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"'b'.*empty"):
        plot_timelines({"a": simulated_events(), "b": []}, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_rows_have_up_segments_relative_to_the_first_event():
    t0 = 5000.0  # a live tree's monotonic clock
    events = [
        Event(t0, "root", EventKind.SUPERVISOR_STARTED),
        Event(t0 + 1, "root", EventKind.CHILD_STARTED, "a", pid=10, incarnation=1),
        Event(t0 + 4, "root", EventKind.CHILD_EXITED, "a", incarnation=1),
        Event(t0 + 5, "root", EventKind.CHILD_STARTED, "a", pid=11, incarnation=2),
        Event(t0 + 9, "root", EventKind.CHILD_TERMINATED, "a"),
        Event(t0 + 9, "root", EventKind.SUPERVISOR_STOPPED),
    ]
    timeline = _timeline(events, None)
    row = timeline.rows["root/a"]
    assert row.label == "a"
    assert row.segments == [(1.0, 3.0), (5.0, 4.0)]
    assert row.restarts == [5.0]
    assert timeline.stops == [9.0]
    assert timeline.end == 9.0


def test_a_nested_supervisor_gets_its_row_before_its_children():
    events = simulate(
        SupervisorSpec("root", children=[SupervisorSpec("pool", children=[worker("w")])]),
        duration=1,
    ).events
    assert [r.label for r in _timeline(events, None).rows.values()] == ["pool", "pool/w"]


def test_without_matplotlib_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'nannytree\[plot\]'"):
        plot_timeline(simulated_events(), tmp_path / "x.png")


def test_a_live_trees_events_plot_too(tree, tmp_path):
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=3,
            children=[
                ChildSpec(id="py", target=children.sleep_forever),
                ChildSpec(id="cmd", command=["sleep", "60"]),
            ],
        )
    )
    os.kill(children_by_id(ref)["py"].pid, signal.SIGKILL)
    wait_event(ref, EventKind.CHILD_STARTED, "py", where=lambda e: e.incarnation == 2)
    log = event_log(ref)
    ref.stop()
    path = tmp_path / "live.png"
    plot_timeline(log.snapshot(), path)
    assert png_size(path)[0] > 500


def test_the_extension_picks_the_format(tmp_path):
    events = simulated_events()
    plot_timeline(events, tmp_path / "t.svg")
    plot_timeline(events, tmp_path / "t.pdf")
    assert b"<svg" in (tmp_path / "t.svg").read_bytes()[:1000]
    assert (tmp_path / "t.pdf").read_bytes().startswith(b"%PDF")


def test_a_notebook_passes_its_own_axes_and_nothing_is_saved(tmp_path):
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    got = plot_timeline(simulated_events(), ax=ax)
    assert got is fig
    assert ax.get_yticklabels(), "drawn into the given axes"
    assert not list(tmp_path.iterdir())


def _legend_labels(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_backoff_waits_and_supervisor_stops_differ_from_crashes():
    from supervision import Backoff

    spec = SupervisorSpec(
        "root",
        strategy="one_for_all",
        intensity=10,
        period=60,
        children=[worker("a", backoff=Backoff(initial=2.0, jitter=0.0)), worker("b")],
    )
    events = simulate(spec, {"a": Scripted([5.0])}, duration=20).events
    timeline = _timeline(events, None)
    a, b = timeline.rows["root/a"], timeline.rows["root/b"]
    assert a.failures == [5.0] and a.waits == [(5.0, 2.0)], "the wait is not downtime by crash"
    assert b.stops == [7.0] and b.failures == [], "b was stopped by its supervisor"
    labels = _legend_labels(plot_timeline(events))
    assert {"backoff wait", "crashed", "stopped by supervisor"} <= set(labels)


def test_the_legend_shows_only_what_appears():
    events = simulate(SupervisorSpec("root", children=[worker("a")]), duration=5).events
    assert _legend_labels(plot_timeline(events)) == ["up"]


def test_a_heatmap_of_a_sweep(tmp_path):
    from supervision.simulate import sweep

    def build(intensity, period, strategy="one_for_one"):
        return SupervisorSpec(
            "root",
            strategy=strategy,
            intensity=intensity,
            period=period,
            children=[worker("a"), worker("b")],
        )

    table = sweep(
        build,
        {"a": Exponential(10.0)},
        duration=300,
        seeds=range(3),
        intensity=[1, 3, 10],
        period=[5, 60],
        strategy=["one_for_one", "one_for_all"],
    )
    with pytest.raises(ValueError, match="strategy"):
        plot_heatmap(table, "availability", "intensity", "period")
    fig = plot_heatmap(
        table,
        "availability",
        "intensity",
        "period",
        tmp_path / "h.png",
        where={"strategy": "one_for_one"},
    )
    image = fig.axes[0].images[0].get_array()
    expected = table.row(intensity=3, period=60, strategy="one_for_one").availability.mean
    assert image[1][1] == pytest.approx(expected * 100)
    assert png_size(tmp_path / "h.png")[0] > 200
    with pytest.raises(ValueError, match="metric"):
        plot_heatmap(table, "speed", "intensity", "period")
