"""Timelines of a tree's life and heatmaps of a sweep, as matplotlib Figures.

Works on any event list: a simulation's `result.events` or a live tree's
`nanny.events().get()`. Needs matplotlib: `pip install 'nannytree[plot]'`.

    from actors.plot import plot_timeline
    fig = plot_timeline(result.events, "timeline.svg")  # .png, .svg, .pdf: by extension

Every function returns the `Figure`, saves it when given a path (the format
follows the extension), and draws into a given `ax` (a notebook's) instead of
a new figure. Each child gets a row: a bar while it is up (amber while its
liveness probe fails, purple while it is hung: alive and not answering, which
only a simulation sees), a hatched grey bar while a backoff delays its
restart, a triangle where it was restarted, a red cross where it crashed
(exited abnormally), a purple diamond where its liveness probe had it killed
(not a crash), a small tick for each failed liveness probe, an orange cross
where a start failed, a grey bar end where its supervisor stopped it, a
black X where its supervisor reached its restart intensity, and a dashed
line where the root supervisor stopped. The legend shows only what appears.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervision import Event, EventKind, ExitKind

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from supervision.simulate import Estimate, SweepTable

__all__ = ["plot_heatmap", "plot_sweep", "plot_timeline", "plot_timelines"]

_UP = "#4c9a5a"
_FAILED = "#c0392b"
_START_FAILED = "#e67e22"
_RESTART = "#1f4e79"
_BACKOFF = "#b0b0b0"
_STOPPED = "#555555"
_UNHEALTHY = "#e0a526"  # up, its liveness probe failing
_HUNG = "#7d3c98"  # alive, not answering; and the liveness kill that ends it
_PROBE = "#a04000"  # a failed liveness probe


@dataclass
class _Row:
    label: str
    segments: list[tuple[float, float]] = field(default_factory=list)  # up
    unhealthy: list[tuple[float, float]] = field(default_factory=list)  # up, probe failing
    hung: list[tuple[float, float]] = field(default_factory=list)  # alive, not answering
    waits: list[tuple[float, float]] = field(default_factory=list)  # backoff delays
    up_since: float | None = None  # running since (in the state `running`)
    running: str = "segments"  # which of segments, unhealthy, hung
    wait_since: float | None = None
    starts: int = 0
    restarts: list[float] = field(default_factory=list)
    failures: list[float] = field(default_factory=list)
    kills: list[float] = field(default_factory=list)  # by its liveness probe
    probe_failures: list[float] = field(default_factory=list)
    start_failures: list[float] = field(default_factory=list)
    stops: list[float] = field(default_factory=list)  # stopped by its supervisor
    give_ups: list[float] = field(default_factory=list)
    killing: bool = False  # its liveness kill began; its exit is the kill's

    def close(self, t: float) -> None:
        if self.up_since is not None:
            getattr(self, self.running).append((self.up_since, t - self.up_since))
            self.up_since = None
        self.running = "segments"

    def become(self, state: str, t: float) -> None:
        """A running process goes on in `state` from `t` (nothing if none runs)."""
        if self.up_since is not None and state != self.running:
            getattr(self, self.running).append((self.up_since, t - self.up_since))
            self.running, self.up_since = state, t

    def end_wait(self, t: float) -> None:
        if self.wait_since is not None:
            self.waits.append((self.wait_since, t - self.wait_since))
            self.wait_since = None


@dataclass
class _Timeline:
    rows: dict[str, _Row]
    stops: list[float]
    end: float

    def kinds(self) -> set[str]:
        """The legend entries this timeline needs."""
        found = set()
        for row in self.rows.values():
            for name in (
                "segments",
                "unhealthy",
                "hung",
                "waits",
                "restarts",
                "failures",
                "kills",
                "probe_failures",
                "start_failures",
            ):
                if getattr(row, name):
                    found.add(name)
            if row.stops:
                found.add("stops")
            if row.give_ups:
                found.add("give_ups")
        if self.stops:
            found.add("tree_stops")
        return found


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
            row.end_wait(t)
            if row.starts:
                row.restarts.append(t)
            row.starts += 1
            row.up_since, row.killing = t, False
        elif e.context is EventKind.CHILD_HUNG:
            row.become("hung", t)
        elif e.context is EventKind.CHILD_UNHEALTHY and row.running == "segments":
            row.become("unhealthy", t)
        elif e.context is EventKind.CHILD_HEALTHY and row.running == "unhealthy":
            row.become("segments", t)
        elif e.context is EventKind.PROBE_FAILED:
            row.probe_failures.append(t)
        elif e.context is EventKind.LIVENESS_KILLED:
            row.close(t)  # down from the stop's beginning, as the reports count
            row.kills.append(t)
            row.killing = True
        elif e.context is EventKind.CHILD_EXITED:
            row.close(t)
            reason = e.reason
            if reason is not None and reason.kind is ExitKind.UNHEALTHY:
                if not row.killing:  # a journal from before liveness_killed
                    row.kills.append(t)
            elif reason is not None and not reason.is_normal:
                row.failures.append(t)
            row.killing = False
        elif e.context is EventKind.CHILD_TERMINATED:
            if row.up_since is not None:
                row.stops.append(t)
            row.close(t)
        elif e.context is EventKind.START_FAILED:
            row.start_failures.append(t)
        elif e.context is EventKind.RESTART_SCHEDULED and e.detail.startswith("backoff"):
            row.wait_since = t
        elif e.context is EventKind.MAX_INTENSITY_REACHED:
            row.give_ups.append(t)
    stop = last if end is None else end
    for row in rows.values():
        row.close(stop)
        row.end_wait(stop)
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
        for spans, color, hatch in ((row.unhealthy, _UNHEALTHY, None), (row.hung, _HUNG, "xx")):
            if spans:
                ax.broken_barh(
                    [(s / scale, d / scale) for s, d in spans],
                    (y - 0.3, 0.6),
                    facecolors=color,
                    edgecolors="white" if hatch else "none",
                    hatch=hatch,
                )
        if row.waits:
            waits = [(s / scale, d / scale) for s, d in row.waits]
            ax.broken_barh(
                waits, (y - 0.15, 0.3), facecolors="none", edgecolors=_BACKOFF, hatch="///"
            )
        marks: list[tuple[list[float], str, str, float]] = [
            (row.restarts, "^", _RESTART, 30),
            (row.failures, "x", _FAILED, 40),
            (row.kills, "D", _HUNG, 30),
            (row.start_failures, "x", _START_FAILED, 40),
            (row.stops, "|", _STOPPED, 120),
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
        if row.probe_failures:  # small ticks along the bar's top edge
            ax.scatter(
                [t / scale for t in row.probe_failures],
                [y + 0.38] * len(row.probe_failures),
                marker="|",
                color=_PROBE,
                s=18,
                linewidths=0.8,
                zorder=3,
            )
    for t in timeline.stops:
        ax.axvline(t / scale, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(range(n), [r.label for r in reversed(rows)])
    ax.set_ylim(-0.7, n - 0.3)
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10, loc="left")


def _handles(kinds: set[str]) -> list[Any]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    every = [
        ("segments", Patch(facecolor=_UP, label="up")),
        ("unhealthy", Patch(facecolor=_UNHEALTHY, label="probe failing")),
        ("hung", Patch(facecolor=_HUNG, edgecolor="white", hatch="xx", label="hung")),
        ("waits", Patch(facecolor="none", edgecolor=_BACKOFF, hatch="///", label="backoff wait")),
        ("restarts", Line2D([], [], marker="^", color=_RESTART, linestyle="", label="restarted")),
        ("failures", Line2D([], [], marker="x", color=_FAILED, linestyle="", label="crashed")),
        (
            "kills",
            Line2D([], [], marker="D", color=_HUNG, linestyle="", label="killed by liveness"),
        ),
        (
            "probe_failures",
            Line2D([], [], marker="|", color=_PROBE, linestyle="", label="probe failed"),
        ),
        (
            "start_failures",
            Line2D([], [], marker="x", color=_START_FAILED, linestyle="", label="start failed"),
        ),
        (
            "stops",
            Line2D([], [], marker="|", color=_STOPPED, linestyle="", label="stopped by supervisor"),
        ),
        (
            "give_ups",
            Line2D([], [], marker="X", color="black", linestyle="", label="intensity reached"),
        ),
        ("tree_stops", Line2D([], [], color="black", linestyle="--", label="tree stopped")),
    ]
    return [handle for kind, handle in every if kind in kinds]


def _figure_class() -> type[Figure]:
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ModuleNotFoundError(
            "plotting needs matplotlib: pip install 'nannytree[plot]'", name="matplotlib"
        ) from e
    return Figure


def _save(fig: Figure, path: str | os.PathLike[str] | None, dpi: int) -> None:
    """Save in the format the extension names (.png, .svg, .pdf, ...); PNG without one."""
    if path is None:
        return
    out = Path(path)
    fig.savefig(out, format=out.suffix.lstrip(".").lower() or "png", dpi=dpi)


def _check(runs: Mapping[str, Sequence[Event]]) -> None:
    if not runs:
        raise ValueError("plot_timelines needs at least one named event list; got none")
    for name, events in runs.items():
        if not events:
            raise ValueError(
                f"cannot plot {name!r}: its event list is empty "
                "(pass result.events from simulate() or nanny.events().get())"
            )


def plot_timelines(
    runs: Mapping[str, Sequence[Event]],
    path: str | os.PathLike[str] | None = None,
    *,
    start: float = 0.0,
    end: float | None = None,
    dpi: int = 110,
    axes: Sequence[Axes] | None = None,
) -> Figure:
    """One timeline panel per named event list, stacked on one time axis.

    Times are seconds since each list's first event (a simulation's virtual
    time). `start`/`end` crop the axis (default: from 0 to the last event).
    Saved to `path` if given, in the format of its extension; drawn into
    `axes` (one per run) if given. Returns the Figure.
    """
    _check(runs)
    Figure = _figure_class()
    timelines = {name: _timeline(events, end) for name, events in runs.items()}
    longest = max(max(t.end for t in timelines.values()), start + 1.0)  # never an empty axis
    scale, unit = _unit(longest - start)
    if axes is None:
        heights = [max(len(t.rows), 1) + 1 for t in timelines.values()]
        height = 0.45 * sum(heights) + 1.4
        legend_space = 0.45 / height  # 0.45 inch kept free for the legend below the axes
        fig = Figure(figsize=(11, height))
        fig.set_layout_engine("constrained", rect=(0, legend_space, 1, 1 - legend_space))
        axes = list(
            fig.subplots(len(timelines), 1, sharex=True, squeeze=False, height_ratios=heights)[:, 0]
        )
    elif len(axes) != len(timelines):
        raise ValueError(f"got {len(axes)} axes for {len(timelines)} runs; pass one per run")
    else:
        fig = axes[0].get_figure()  # type: ignore[assignment]
    for ax, (name, timeline) in zip(axes, timelines.items(), strict=True):
        _draw(ax, timeline, start, scale, name)
        ax.set_xlim(start / scale, longest / scale)
    axes[-1].set_xlabel(f"time ({unit})")
    kinds: set[str] = set().union(*(t.kinds() for t in timelines.values()))
    handles = _handles(kinds)
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
    _save(fig, path, dpi)
    return fig


def plot_timeline(
    events: Sequence[Event],
    path: str | os.PathLike[str] | None = None,
    *,
    title: str | None = None,
    start: float = 0.0,
    end: float | None = None,
    dpi: int = 110,
    ax: Axes | None = None,
) -> Figure:
    """Draw one tree's timeline (a row per child) from its events.

    `events`: a simulation's `result.events` or a live `nanny.events().get()`.
    Times are seconds since the first event; `start`/`end` crop the axis.
    Saved to `path` if given (format by extension), drawn into `ax` if given.
    Raises ValueError for an empty event list. Returns the Figure.
    """
    if not events:
        raise ValueError(
            "cannot plot an empty event list "
            "(pass result.events from simulate() or nanny.events().get())"
        )
    name = title if title is not None else f"tree {events[0].supervisor.split('/')[0]!r}"
    return plot_timelines(
        {name: events},
        path,
        start=start,
        end=end,
        dpi=dpi,
        axes=None if ax is None else [ax],
    )


def _fixed(
    table: SweepTable, free: Sequence[str], where: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The values of the axes not drawn: from `where`, or an axis's only value."""
    for name in free:
        if name not in table.axes:
            raise ValueError(f"{name!r} is not an axis of this sweep; its axes: {list(table.axes)}")
    fixed = dict(where or {})
    for name, values in table.axes.items():
        if name in free or name in fixed:
            continue
        if len(values) != 1:
            raise ValueError(
                f"axis {name!r} has {len(values)} values; fix one with where={{{name!r}: ...}}"
            )
        fixed[name] = values[0]
    return fixed


def _scale(table: SweepTable, metric: str) -> tuple[float, str]:
    """A share in %, a time in s, anything else as it is."""
    kind = table.kinds.get(metric, "count" if metric.startswith("give_ups(") else "value")
    if kind == "fraction":
        return 100.0, " (%)"
    return 1.0, " (s)" if kind == "time" else " per run" if kind == "count" else ""


def _estimates(
    table: SweepTable, metric: str, fixed: Mapping[str, Any]
) -> list[tuple[Mapping[str, Any], Estimate | None]]:
    """The rows that match `fixed`, each with the metric's estimate (checks the name)."""
    out = []
    for row in table.rows:
        if all(row.params.get(k) == v for k, v in fixed.items()):
            out.append((row.params, row.estimate(metric)))
    return out


def _decimals(means: Sequence[float], halves: Sequence[float]) -> int:
    """Enough decimals to tell the cells apart, and to show their intervals; at most 4."""
    digits = 1
    distinct = sorted(set(means))
    gaps = [b - a for a, b in itertools.pairwise(distinct) if b - a > 0]
    for step in [*gaps, *(h for h in halves if math.isfinite(h) and h > 0)]:
        digits = max(digits, -math.floor(math.log10(step)))
    return min(max(digits, 0), 4)


def plot_heatmap(
    table: SweepTable,
    metric: str,
    x: str,
    y: str,
    path: str | os.PathLike[str] | None = None,
    *,
    where: Mapping[str, Any] | None = None,
    ax: Axes | None = None,
    dpi: int = 110,
    cmap: str | None = None,
) -> Figure:
    """One metric of a sweep over two of its axes, as an annotated heatmap.

    `metric`: any metric of the table by name: "availability", "restarts",
    "give_ups", "time_to_give_up", "unhealthy", one of `sweep(metrics=...)`, or
    a nested supervisor's "give_ups(PATH)". Each cell shows the mean over the
    seeds and below it its 95% interval, with the decimals that tell the cells
    apart. `x`, `y`: two axes of the sweep; every other axis must be fixed with
    `where={"axis": value}` (or have one value). A cell with no figure (no run
    gave up) is left blank. Saved to `path` if given (format by extension),
    drawn into `ax` if given. Returns the Figure.
    """
    _estimates(table, metric, {})  # the metric's name first
    fixed = _fixed(table, (x, y), where)
    cells = _estimates(table, metric, fixed)
    xs, ys = table.axes[x], table.axes[y]
    scale, unit = _scale(table, metric)
    grid = [[math.nan] * len(xs) for _ in ys]
    spans: dict[tuple[int, int], Estimate] = {}
    for params, est in cells:
        if est is not None:
            j, i = ys.index(params[y]), xs.index(params[x])
            grid[j][i] = est.mean * scale
            spans[j, i] = est
    Figure = _figure_class()
    if ax is None:
        fig = Figure(figsize=(1.5 * len(xs) + 2.5, 0.75 * len(ys) + 1.8), layout="constrained")
        ax = fig.subplots()
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    good = metric == "availability" or table.kinds.get(metric) == "fraction"
    image = ax.imshow(
        grid, origin="lower", aspect="auto", cmap=cmap or ("viridis" if good else "magma_r")
    )
    known = [v for line in grid for v in line if not math.isnan(v)]
    lo, hi = (min(known), max(known)) if known else (0.0, 1.0)
    decimals = _decimals(known, [e.half_width * scale for e in spans.values()])
    for (j, i), est in spans.items():
        value = grid[j][i]
        r, g, b, _ = image.cmap((value - lo) / (hi - lo) if hi > lo else 0.5)
        ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"
        low, high = est.low * scale, est.high * scale
        span = f"[{low:.{decimals}f}, {high:.{decimals}f}]" if math.isfinite(high - low) else "n=1"
        text = f"{value:.{decimals}f}\n{span}"
        ax.text(i, j, text, ha="center", va="center", fontsize=7, color=ink)
    ax.set_xticks(range(len(xs)), [_label(v) for v in xs])
    ax.set_yticks(range(len(ys)), [_label(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    title = f"{metric}{unit}, mean and 95% interval over {len(table.seeds)} seeds"
    if fixed:
        title += "; " + ", ".join(f"{k}={_label(v)}" for k, v in fixed.items())
    ax.set_title(title, fontsize=10, loc="left")
    fig.colorbar(image, ax=ax)
    _save(fig, path, dpi)
    return fig


def plot_sweep(
    table: SweepTable,
    x: str,
    metric: str = "availability",
    path: str | os.PathLike[str] | None = None,
    *,
    by: str | None = None,
    where: Mapping[str, Any] | None = None,
    ax: Axes | None = None,
    dpi: int = 110,
) -> Figure:
    """One metric of a sweep along one axis: a line per value of `by` (another axis),
    each point the mean over the seeds with its 95% interval as an error bar.

    `metric`: any metric of the table by name (as `plot_heatmap`'s). Every axis
    other than `x` and `by` must be fixed with `where={"axis": value}` (or have one
    value). An axis of numbers is drawn to scale, any other as evenly spaced labels.
    A point with no figure is left out. Saved to `path` if given, drawn into `ax` if
    given. Returns the Figure.
    """
    _estimates(table, metric, {})  # the metric's name first
    fixed = _fixed(table, (x,) if by is None else (x, by), where)
    points = _estimates(table, metric, fixed)
    xs = table.axes[x]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in xs)
    scale, unit = _scale(table, metric)
    Figure = _figure_class()
    if ax is None:
        fig = Figure(figsize=(6.4, 4.0), layout="constrained")
        ax = fig.subplots()
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    groups = table.axes[by] if by is not None else (None,)
    for group in groups:
        line = [
            (params[x], est)
            for params, est in points
            if est is not None and (by is None or params[by] == group)
        ]
        line.sort(key=lambda p: xs.index(p[0]))
        at = [float(v) if numeric else float(xs.index(v)) for v, _ in line]
        means = [e.mean * scale for _, e in line]
        below = [_bar(e.mean - e.low) * scale for _, e in line]
        above = [_bar(e.high - e.mean) * scale for _, e in line]
        label = None if by is None else f"{by}={_label(group)}"
        ax.errorbar(at, means, yerr=[below, above], marker="o", capsize=3, label=label)
    if not numeric:
        ax.set_xticks(range(len(xs)), [_label(v) for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel(f"{metric}{unit}")
    title = f"{metric}{unit}: mean and 95% interval over {len(table.seeds)} seeds"
    if fixed:
        title += "; " + ", ".join(f"{k}={_label(v)}" for k, v in fixed.items())
    ax.set_title(title, fontsize=10, loc="left")
    if by is not None:
        ax.legend(fontsize=8)
    _save(fig, path, dpi)
    return fig


def _bar(length: float) -> float:
    """An error bar's length; 0 for an unbounded interval (one run)."""
    return length if math.isfinite(length) else 0.0


def _label(value: Any) -> str:
    return str(getattr(value, "value", value))
