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
from tests import children
from tests.fake_executor import worker
from tests.support import children_by_id, event_log, wait_event

pytest.importorskip("matplotlib")

from actors.plot import _timeline, plot_timeline, plot_timelines

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
    path = plot_timeline(simulated_events(), tmp_path / "t.png", end=600)
    assert path == tmp_path / "t.png"
    width, height = png_size(path)
    assert width > 500 and height > 200
    assert path.stat().st_size > 10_000


def test_stacked_timelines_share_one_png(tmp_path):
    one = simulate(
        SupervisorSpec("root", children=[worker("a"), worker("b")]),
        {"b": Scripted([5.0, 20.0])},
        duration=30,
    ).events
    path = plot_timelines({"first": one, "second": simulated_events()}, tmp_path / "s.png")
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
    path = plot_timeline(log.snapshot(), tmp_path / "live.png")
    assert png_size(path)[0] > 500
