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


def _hung_web_events() -> list[Event]:
    """SIGSTOPped at 1 s: probes fail at 2.0 and 3.0 (timeout 1 s), the second kills it
    (SIGKILL at shutdown=0.5); the new process answers (tests/sim/test_health.py)."""
    from supervision import Liveness, TcpProbe
    from supervision.simulate import Hang

    child = worker("web", liveness=Liveness(TcpProbe(8000, period=0.2), failures=2), shutdown=0.5)
    spec = SupervisorSpec("root", intensity=3, period=10, children=[child])
    return simulate(spec, {"web": Hang(at=[1.0])}, duration=6.0).events


def _collections_coloured(ax, color: str) -> list:
    from matplotlib.colors import to_rgba

    want = to_rgba(color)
    return [c for c in ax.collections if any(tuple(f) == want for f in c.get_facecolors())]


def test_a_hang_and_its_liveness_kill_are_drawn_apart_from_up_and_a_crash():
    from actors.plot import _HUNG, _PROBE, _UP

    events = _hung_web_events()
    row = _timeline(events, 6.0).rows["root/web"]
    assert row.segments == [(0.0, 1.0), (3.5, 2.5)]  # up, before the hang and after
    assert row.hung == [(1.0, 2.0)]  # from the hang to the kill's beginning
    assert row.kills == [3.0] and row.failures == [], "a liveness kill is not a crash"
    assert row.probe_failures == [2.0, 3.0]
    fig = plot_timeline(events)
    ax = fig.axes[0]
    (hung,) = _collections_coloured(ax, _HUNG)[:1]
    assert len(hung.get_paths()) == 1  # one hung bar
    assert [p.get_extents().x0 for p in hung.get_paths()] == [1.0]
    kills = [c for c in _collections_coloured(ax, _HUNG) if c is not hung]
    assert [tuple(o) for o in kills[0].get_offsets()] == [(3.0, 0.0)]
    ticks = _collections_coloured(ax, _PROBE)
    assert [o[0] for o in ticks[0].get_offsets()] == [2.0, 3.0]
    assert _collections_coloured(ax, _UP)
    labels = _legend_labels(fig)
    assert {"hung", "killed by liveness", "probe failed", "up"} <= set(labels)
    assert "crashed" not in labels


def test_a_failing_probe_is_drawn_as_unhealthy_until_it_passes_again():
    from actors.plot import _UNHEALTHY
    from supervision import Liveness, TcpProbe
    from supervision.simulate import Flapping

    # Probes at 0, 1, 2, 3, ...: the second and third fail, the fourth passes.
    child = worker("web", liveness=Liveness(TcpProbe(8000, period=1.0), failures=5))
    spec = SupervisorSpec("root", children=[child])
    flaps = Flapping(pattern=[True, False, False, True])
    events = simulate(spec, {"web": flaps}, duration=6.0).events
    row = _timeline(events, 6.0).rows["root/web"]
    assert row.unhealthy == [(1.0, 2.0)]
    assert row.segments == [(0.0, 1.0), (3.0, 3.0)]
    assert row.probe_failures == [1.0, 2.0] and row.kills == []
    fig = plot_timeline(events)
    assert _collections_coloured(fig.axes[0], _UNHEALTHY)
    assert "probe failing" in _legend_labels(fig)


def test_an_old_journal_without_liveness_killed_still_draws_the_kill():
    from supervision import ExitReason

    reason = ExitReason.unhealthy(3, "tcp 127.0.0.1:80", "refused")
    events = [
        Event(0.0, "root", EventKind.SUPERVISOR_STARTED),
        Event(0.0, "root", EventKind.CHILD_STARTED, "a", pid=10, incarnation=1),
        Event(2.0, "root", EventKind.CHILD_UNHEALTHY, "a", pid=10, incarnation=1),
        Event(4.0, "root", EventKind.CHILD_EXITED, "a", reason, pid=10, incarnation=1),
    ]
    row = _timeline(events, None).rows["root/a"]
    assert row.kills == [4.0] and row.failures == []
    assert row.segments == [(0.0, 2.0)] and row.unhealthy == [(2.0, 2.0)]
