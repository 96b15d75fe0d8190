"""`status` without rich: the same summary, tree table and detail view, rendered with
the standard library alone, so a client command answers fast (rich's import costs
more than the rest of the command).

Colors are ANSI escapes, only on a terminal and never with NO_COLOR set; every
text a tree or a child produced is escaped (`printable`) before it is measured.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from .._operate._records import Node, health_text
from .._operate._text import printable

if TYPE_CHECKING:
    from supervision import AnySpec, SupervisorSpec

STATE_COLORS = {
    "running": "32",
    "unreachable": "31",
    "pending": "35",
    "paused": "33",
    "starting": "36",
    "restarting": "36",
    "stopping": "33",
    "stopped": "90",
    "backoff": "35",
    "failed": "31",
}
RED, BOLD, DIM = "31", "1", "2"
ELLIPSIS = "…"

Cell = tuple[str, str]  # (text, ANSI style or "")


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{size:.1f}T"  # pragma: no cover


def fmt_cpu(percent: float | None) -> str:
    return "-" if percent is None else f"{percent:.1f}%"


def state_text(node: Node) -> str:
    """A node's state as `status` shows it: "unreachable 12s" says for how long."""
    if node.state_for is not None:
        return f"{node.state} {fmt_duration(node.state_for)}"
    return node.state


def node_text(node: Node) -> str | None:
    """Where a remote subtree runs: its node's name (its id where it has none)."""
    return node.node_name or node.node


def restarts_text(intensity: int | None, period: float | None) -> str:
    word = "restart" if intensity == 1 else "restarts"
    return f"max {intensity} {word} in {period:g}s"


class Painter:
    """Wraps text in ANSI styles, or leaves it as it is."""

    def __init__(self, out: TextIO) -> None:
        self.color = out.isatty() and not os.environ.get("NO_COLOR")
        if out.isatty():
            try:
                self.width = os.get_terminal_size(out.fileno()).columns
            except OSError:
                self.width = 80
        else:
            self.width = int(os.environ.get("COLUMNS", "160") or 160)

    def __call__(self, text: str, style: str) -> str:
        if not self.color or not style:
            return text
        return f"\x1b[{style}m{text}\x1b[0m"


def _guided(
    node: Node, prefix: str = "", last: bool = True, top: bool = True
) -> Iterator[tuple[str, Node]]:
    """Rows of a tree with guide lines: ("├─ ", node), ("│  └─ ", child), ..."""
    yield (prefix if top else prefix + ("└─ " if last else "├─ ")), node
    inner = prefix if top else prefix + ("   " if last else "│  ")
    for i, child in enumerate(node.children):
        yield from _guided(child, inner, i == len(node.children) - 1, False)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + ELLIPSIS


def table(
    paint: Painter,
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    right: frozenset[int] = frozenset(),
    shrink: Sequence[int] = (),
) -> list[str]:
    """Columns two spaces apart, a rule under the header; the `shrink` columns give
    way (cut with an ellipsis, last one first) when the table is wider than the
    terminal."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, (text, _) in enumerate(row):
            widths[i] = max(widths[i], len(text))
    over = sum(widths) + 2 * (len(widths) - 1) - paint.width
    for i in reversed(shrink):
        if over <= 0:
            break
        give = min(over, widths[i] - max(len(headers[i]), 9))
        if give > 0:
            widths[i] -= give
            over -= give

    def line(cells: Sequence[Cell]) -> str:
        parts = []
        for i, (text, style) in enumerate(cells):
            text = _cut(text, widths[i])
            pad = " " * (widths[i] - len(text))
            shown = paint(text, style)
            parts.append(pad + shown if i in right else shown + pad)
        return "  ".join(parts).rstrip()

    out = [line([(h, BOLD) for h in headers])]
    out.append(paint("─" * (sum(widths) + 2 * (len(widths) - 1)), DIM))
    out.extend(line(row) for row in rows)
    return out


HEALTH_COLORS = {"healthy": "32", "ready": "32", "failing": RED}


def tree_rows(root: Node, notes: bool = False, health: bool = False) -> list[list[Cell]]:
    """One row per node; with `health`, a column of each child's liveness probe
    verdict after its state; with `notes`, a last column of each child's sd_notify
    STATUS= text (child-produced: escaped)."""
    rows = []
    for guide, node in _guided(root):
        if node.type == "supervisor":
            name = f"{guide}{printable(node.id)} ({node.strategy})"
        else:
            name = guide + printable(node.id)
        where = node_text(node)
        if where is not None and node.type == "supervisor":
            name += f" @{printable(where)[:24]}"  # a subtree on another host
        gave_up = "max_restart_intensity" in (node.last_exit or "")
        exit_style = "" if node.last_exit_normal and not gave_up else RED
        rows.append(
            [
                (name, BOLD if node.type == "supervisor" else ""),
                (printable(state_text(node)), STATE_COLORS.get(node.state, "")),
                (str(node.pid) if node.pid is not None else "-", ""),
                (fmt_duration(node.uptime), ""),
                (str(node.restarts), ""),
                (fmt_cpu(node.cpu), ""),
                (fmt_bytes(node.rss), ""),
                (printable(node.last_exit or "-"), exit_style if node.last_exit else ""),
            ]
        )
        if health:
            verdict = health_text(node.health) if node.state == "running" else ""
            style = HEALTH_COLORS.get(verdict.split(" ")[0], "")
            rows[-1].insert(2, (printable(verdict or "-"), style if verdict else ""))
        if notes:
            rows[-1].append((printable(node.status or ""), DIM))
    return rows


HEADERS = ("tree", "state", "pid", "uptime", "restarts", "cpu", "rss", "last exit")


def status_lines(paint: Painter, status: dict[str, Any], root: Node) -> list[str]:
    """`nannytree status`: a systemctl-like summary line, then the tree."""
    head = paint("● ", STATE_COLORS.get(root.state, "")) + paint(printable(root.id), BOLD)
    head += printable(f" - {root.state}, pid {status.get('pid')}, up {fmt_duration(root.uptime)}")
    lines = [head, paint(f"  {root.strategy}, {restarts_text(root.intensity, root.period)}", DIM)]
    lines.append(paint(printable(f"  socket {status.get('socket')}"), DIM))
    if status.get("output"):
        lines.append(paint(printable(f"  children's output: {status['output']}"), DIM))
    lines.append("")
    # The STATUS= column only when a child has sent one (most trees: none), the
    # health column only when a child has a liveness probe.
    notes = any(n.status for _, n in root.walk())
    health = any(n.health for _, n in root.walk())
    headers = list(HEADERS)
    if health:
        headers.insert(2, "health")
    if notes:
        headers.append("status")
    shift = 1 if health else 0
    last_exit = 7 + shift
    lines.extend(
        table(
            paint,
            headers,
            tree_rows(root, notes, health),
            right=frozenset(i + shift for i in (2, 3, 4, 5, 6)),
            shrink=(0, *((2,) if health else ()), last_exit, *((last_exit + 1,) if notes else ())),
        )
    )
    return lines


def _limit_text(limit: dict[str, Any] | None) -> str | None:
    """A restart_limit as `status ID` shows it; None without one."""
    if not limit:
        return None
    return f"{restarts_text(limit['intensity'], limit['period'])}, then failed (restart_limit)"


def detail_lines(paint: Painter, detail: dict[str, Any]) -> list[str]:
    """`nannytree status ID` of one worker, as `systemctl status UNIT`: what it runs,
    its process, its sd_notify status, and its last exits with their stderr tails."""
    state = str(detail.get("state"))
    head = paint("● ", STATE_COLORS.get(state, "")) + paint(printable(detail["path"]), BOLD)
    lines = [head + printable(f" - {state}")]
    if detail.get("note"):
        lines.append(paint(printable(f"  ({detail['note']})"), DIM))
    rows = [
        ("runs", detail.get("runs")),
        ("restart", detail.get("restart")),
        ("limit", _limit_text(detail.get("restart_limit"))),
        ("node", detail.get("node_name") or detail.get("node")),
        ("pid", detail.get("pid")),
        ("uptime", fmt_duration(detail.get("uptime"))),
        ("restarts", detail.get("restarts")),
        ("health", health_text(detail.get("health"))),
        ("status", detail.get("status")),
        ("output", detail.get("output")),
    ]
    for name, value in rows:
        if value not in (None, ""):
            lines.append(printable(f"  {name:>9}: {value}"))
    exits = detail.get("exits") or []
    lines.append(paint(f"  last exits ({len(exits)}):" if exits else "  no exit yet", DIM))
    for e in exits:
        clock = time.strftime("%H:%M:%S", time.localtime(e["time"]))
        style = RED if e.get("abnormal") else ""
        lines.append(paint(printable(f"    {clock} pid {e.get('pid')}: {e['reason']}"), style))
        for text in str(e.get("stderr", "")).splitlines():
            lines.append(paint(printable(f"      | {text}"), DIM))
    return lines


def _spec_runs(spec: AnySpec) -> tuple[str, str]:
    """(type, what it runs) of one spec, as `check` lists it."""
    from supervision import ChildSpec, SupervisorSpec

    if isinstance(spec, SupervisorSpec):
        what = restarts_text(spec.intensity, spec.period)
        if spec.auto_shutdown.value != "never":
            what += f", auto_shutdown {spec.auto_shutdown.value}"
        return spec.strategy.value, what
    assert isinstance(spec, ChildSpec)
    if spec.command is not None:
        return "worker", shlex.join(spec.command)
    ref = getattr(spec.target, "ref", None)
    name = ref or getattr(spec.target, "__qualname__", repr(spec.target))
    module = getattr(spec.target, "__module__", "")
    what = ref or f"{module}:{name}"
    if spec.args or spec.kwargs:
        params = [repr(a) for a in spec.args]
        params += [f"{k}={v!r}" for k, v in spec.kwargs.items()]
        what += f"({', '.join(params)})"
    return "worker", what


def _spec_guided(
    spec: AnySpec, prefix: str = "", last: bool = True, top: bool = True
) -> Iterator[tuple[str, AnySpec, bool]]:
    yield (prefix if top else prefix + ("└─ " if last else "├─ ")), spec, top
    inner = prefix if top else prefix + ("   " if last else "│  ")
    children = getattr(spec, "children", ())
    for i, child in enumerate(children):
        yield from _spec_guided(child, inner, i == len(children) - 1, False)


def spec_lines(paint: Painter, spec: SupervisorSpec) -> list[str]:
    """`nannytree check`: the tree a file would start. A file's ids and commands are
    escaped; what it runs is never cut (the operator checks exactly that)."""
    rows: list[list[Cell]] = []
    for guide, s, top in _spec_guided(spec):
        kind, what = _spec_runs(s)
        restart = "-" if top else s.restart.value
        shutdown = "-" if top else str(s.shutdown)
        name_style = BOLD if kind != "worker" else ""
        rows.append(
            [
                (printable(guide + s.id), name_style),
                (printable(kind), ""),
                (printable(restart), ""),
                (printable(shutdown), ""),
                (printable(what), ""),
            ]
        )
    return table(paint, ("tree", "type", "restart", "shutdown", "runs"), rows)


def write(out: TextIO, lines: Sequence[str]) -> None:
    out.write("\n".join(lines) + "\n")
    out.flush()
