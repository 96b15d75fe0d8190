"""Timelines of a tree's life, drawn from its events and saved as PNG.

Works on any event list: a simulation's `result.events` or a live tree's
`nanny.events().get()`. Needs matplotlib: `pip install 'nannytree[plot]'`.

    from actors.plot import plot_timeline
    plot_timeline(result.events, "timeline.png")

Each child gets a row: a bar while it is up, a triangle where it was
restarted, a cross where it failed (red: exited abnormally, orange: a failed
start), a black X where its supervisor reached its restart intensity, and a
dashed line where the root supervisor stopped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from supervision import Event, EventKind

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_timeline", "plot_timelines"]

_UP = "#4c9a5a"
_FAILED = "#c0392b"
_START_FAILED = "#e67e22"
_RESTART = "#1f4e79"


@dataclass
class _Row:
    label: str
    segments: list[tuple[float, float]] = field(default_factory=list)
    up_since: float | None = None
    starts: int = 0
    restarts: list[float] = field(default_factory=list)
    failures: list[float] = field(default_factory=list)
    start_failures: list[float] = field(default_factory=list)
    give_ups: list[float] = field(default_factory=list)

    def close(self, t: float) -> None:
        if self.up_since is not None:
            self.segments.append((self.up_since, t - self.up_since))
            self.up_since = None


@dataclass
class _Timeline:
    rows: dict[str, _Row]
    stops: list[float]
    end: float


def _timeline(events: Sequence[Event], end: float | None) -> _Timeline:
    """Rows of up-time segments and markers, times relative to the first event."""
    t0 = events[0].time
    rows: dict[str, _Row] = {}
    stops: list[float] = []
    root = events[0].supervisor.split("/")[0]
    last = 0.0
    for e in events:
        t = e.time - t0
        last = max(last, t)
        if e.context is EventKind.SUPERVISOR_STOPPED and e.supervisor == root:
            stops.append(t)
        if e.offender is None or e.context is EventKind.STALE_EXIT_IGNORED:
            continue
        if e.supervisor != root and e.supervisor not in rows:  # a nested one: its row first
            rows[e.supervisor] = _Row(e.supervisor.removeprefix(root + "/"))
        key = f"{e.supervisor}/{e.offender}"
        row = rows.get(key)
        if row is None:
            row = rows[key] = _Row(key.removeprefix(root + "/"))
        if e.context is EventKind.CHILD_STARTED:
            row.close(t)
            if row.starts:
                row.restarts.append(t)
            row.starts += 1
            row.up_since = t
        elif e.context is EventKind.CHILD_EXITED:
            row.close(t)
            if e.reason is not None and not e.reason.is_normal:
                row.failures.append(t)
        elif e.context is EventKind.CHILD_TERMINATED:
            row.close(t)
        elif e.context is EventKind.START_FAILED:
            row.start_failures.append(t)
        elif e.context is EventKind.MAX_INTENSITY_REACHED:
            row.give_ups.append(t)
    stop = last if end is None else end
    for row in rows.values():
        row.close(stop)
    return _Timeline(rows, stops, stop)


def _unit(span: float) -> tuple[float, str]:
    if span > 3 * 3600:
        return 3600.0, "h"
    if span > 3 * 60:
        return 60.0, "min"
    return 1.0, "s"


def _draw(ax: Axes, timeline: _Timeline, start: float, scale: float, title: str | None) -> None:
    rows = list(timeline.rows.values())
    n = len(rows)
    for i, row in enumerate(rows):
        y = n - 1 - i  # first child on top
        bars = [(s / scale, d / scale) for s, d in row.segments]
        ax.broken_barh(bars, (y - 0.3, 0.6), facecolors=_UP)
        marks: list[tuple[list[float], str, str, float]] = [
            (row.restarts, "^", _RESTART, 30),
            (row.failures, "x", _FAILED, 40),
            (row.start_failures, "x", _START_FAILED, 40),
            (row.give_ups, "X", "black", 90),
        ]
        for times, marker, color, size in marks:
            if times:
                ax.scatter(
                    [t / scale for t in times],
                    [y] * len(times),
                    marker=marker,
                    color=color,
                    s=size,
                    zorder=3,
                )
    for t in timeline.stops:
        ax.axvline(t / scale, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(range(n), [r.label for r in reversed(rows)])
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlim(start / scale, timeline.end / scale)
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10, loc="left")


def _legend(fig: Figure) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(facecolor=_UP, label="up"),
        Line2D([], [], marker="^", color=_RESTART, linestyle="", label="restarted"),
        Line2D([], [], marker="x", color=_FAILED, linestyle="", label="failed"),
        Line2D([], [], marker="x", color=_START_FAILED, linestyle="", label="start failed"),
        Line2D([], [], marker="X", color="black", linestyle="", label="intensity reached"),
        Line2D([], [], color="black", linestyle="--", label="tree stopped"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)


def _figure_class() -> type[Figure]:
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ModuleNotFoundError(
            "plotting needs matplotlib: pip install 'nannytree[plot]'", name="matplotlib"
        ) from e
    return Figure


def plot_timelines(
    runs: Mapping[str, Sequence[Event]],
    path: str | os.PathLike[str],
    *,
    start: float = 0.0,
    end: float | None = None,
    dpi: int = 110,
) -> Path:
    """One timeline panel per named event list, stacked on one time axis; save a PNG.

    Times are seconds since each list's first event (a simulation's virtual
    time). `start`/`end` crop the axis (default: from 0 to the last event).
    Returns the path written.
    """
    if not runs:
        raise ValueError("plot_timelines needs at least one named event list; got none")
    for name, events in runs.items():
        if not events:
            raise ValueError(
                f"cannot plot {name!r}: its event list is empty "
                "(pass result.events from simulate() or nanny.events().get())"
            )
    Figure = _figure_class()
    timelines = {name: _timeline(events, end) for name, events in runs.items()}
    longest = max(t.end for t in timelines.values())
    scale, unit = _unit(longest - start)
    heights = [max(len(t.rows), 1) + 1 for t in timelines.values()]
    height = 0.45 * sum(heights) + 1.4
    legend_space = 0.45 / height  # 0.45 inch kept free for the legend below the axes
    fig = Figure(figsize=(11, height))
    fig.set_layout_engine("constrained", rect=(0, legend_space, 1, 1 - legend_space))
    axes = fig.subplots(len(timelines), 1, sharex=True, squeeze=False, height_ratios=heights)
    for ax, (name, timeline) in zip(axes[:, 0], timelines.items(), strict=True):
        _draw(ax, timeline, start, scale, name)
        ax.set_xlim(start / scale, longest / scale)
    axes[-1, 0].set_xlabel(f"time ({unit})")
    _legend(fig)
    out = Path(path)
    fig.savefig(out, format="png", dpi=dpi)
    return out


def plot_timeline(
    events: Sequence[Event],
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    start: float = 0.0,
    end: float | None = None,
    dpi: int = 110,
) -> Path:
    """Draw one tree's timeline (a row per child) from its events; save it as a PNG.

    `events`: a simulation's `result.events` or a live `nanny.events().get()`.
    Times are seconds since the first event; `start`/`end` crop the axis.
    Raises ValueError for an empty event list. Returns the path written.
    """
    if not events:
        raise ValueError(
            "cannot plot an empty event list "
            "(pass result.events from simulate() or nanny.events().get())"
        )
    name = title if title is not None else f"tree {events[0].supervisor.split('/')[0]!r}"
    return plot_timelines({name: events}, path, start=start, end=end, dpi=dpi)
