"""How a tree looks on a terminal: the live view, `status`, `check`, and plain lines.

Everything here renders data (a Node snapshot, EventRecords, a spec); nothing
talks to the tree, so each piece renders the same in a test's recording console.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .._operate._records import EventRecord, Node
from .._operate._text import printable
from ._plain import _guided, fmt_bytes, fmt_cpu, fmt_duration, node_text, restarts_text, state_text

STATE_STYLES = {
    "running": "green",
    "unreachable": "red",
    "pending": "magenta",
    "paused": "yellow",
    "starting": "cyan",
    "restarting": "cyan",
    "stopping": "yellow",
    "stopped": "bright_black",
    "backoff": "magenta",
    "failed": "red",
}


def _flags(node: Node) -> str:
    return f"{node.strategy}, {restarts_text(node.intensity, node.period)}"


def tree_table(root: Node) -> Table:
    """The tree as a table: one row per supervisor and worker, in start order."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    # Only the tree and last-exit columns give way on a narrow terminal (their
    # cells are cut with an ellipsis); the figures keep their width.
    table.add_column("tree", min_width=10)
    table.add_column("state", no_wrap=True)
    table.add_column("pid", justify="right", no_wrap=True)
    table.add_column("uptime", justify="right", no_wrap=True)
    table.add_column("restarts", justify="right", no_wrap=True)
    table.add_column("cpu", justify="right", no_wrap=True)
    table.add_column("rss", justify="right", no_wrap=True)
    table.add_column("last exit", min_width=9)
    for guide, node in _guided(root):
        name = Text(no_wrap=True, overflow="ellipsis")
        name.append(guide, style="dim")
        if node.type == "supervisor":
            name.append(printable(node.id), style="bold")
            name.append(f" ({node.strategy})", style="dim")
            where = node_text(node)
            if where is not None:  # a subtree on another host
                name.append(f" @{printable(where)}", style="dim")
        else:
            name.append(printable(node.id))
        gave_up = "max_restart_intensity" in (node.last_exit or "")
        exit_style = "" if node.last_exit_normal and not gave_up else "red"
        table.add_row(
            name,
            Text(printable(state_text(node)), style=STATE_STYLES.get(node.state, "")),
            str(node.pid) if node.pid is not None else "-",
            fmt_duration(node.uptime),
            str(node.restarts),
            fmt_cpu(node.cpu),
            fmt_bytes(node.rss),
            Text(
                printable(node.last_exit or "-"),
                style=exit_style,
                no_wrap=True,
                overflow="ellipsis",
            ),
        )
    return table


def event_text(record: EventRecord) -> Text:
    style = "red" if record.abnormal or "intensity" in record.what else ""
    if record.what in ("child_started", "supervisor_started"):
        style = "green"
    line = str(record).split("\n")[0]  # one row per event; the tail's last line follows
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(line[:12], style="dim")  # the clock: HH:MM:SS.mmm
    text.append(line[12:], style=style)
    if record.stderr:
        text.append(" | " + printable(record.stderr.splitlines()[-1]), style="dim")
    return text


@dataclass
class Header:
    """What the live view says above the tree."""

    tree: str
    pid: int
    socket: str
    output: str | None = None
    note: str = ""
    default_socket: bool = False
    attached: bool = False  # `nannytree top`: the view of a tree another process runs

    @property
    def control(self) -> str:
        """The command that reaches this run from another shell."""
        if self.default_socket:
            return "nannytree status"
        return f"nannytree status --socket {self.socket}"


def screen(
    root: Node | None,
    events: Sequence[EventRecord],
    header: Header,
    *,
    height: int = 40,
    busy: bool = False,
) -> RenderableType:
    """One frame of the live view: header, tree table, the latest events."""
    title = Text("nannytree ", style="bold")
    title.append(printable(header.tree), style="bold cyan")
    if root is not None:
        title.append(f"  {_flags(root)}  pid {header.pid}  up {fmt_duration(root.uptime)}")
    keys = "Ctrl-C detaches (the tree runs on)" if header.attached else "Ctrl-C stops the tree"
    if header.output:
        keys += f"  ·  children's output: {header.output}"
    parts: list[RenderableType] = [
        title,
        Text(printable(keys), style="dim"),
    ]
    if not header.attached:
        parts.append(Text(printable(f"from another shell: {header.control}"), style="dim"))
    if header.note:
        parts.append(Text(printable(header.note), style="yellow"))
    if busy:
        parts.append(Text("a supervisor is busy; showing its last answer", style="yellow"))
    rows = 0
    if root is not None:
        parts.append(tree_table(root))
        rows = sum(1 for _ in root.walk())
    room = max(3, height - rows - len(parts) - 8)
    shown = list(events)[-room:]
    body = Table.grid()
    body.add_column(no_wrap=True, overflow="ellipsis")
    for record in shown:
        body.add_row(event_text(record))
    if not shown:
        body.add_row(Text("(none yet)", style="dim"))
    parts.append(Panel(body, title="events", title_align="left", box=box.ROUNDED))
    return Group(*parts)


class LiveView:
    """The live view on a terminal: call update() with each snapshot and event."""

    def __init__(self, console: Console, header: Header, keep: int = 200) -> None:
        self.console = console
        self.header = header
        self.events: deque[EventRecord] = deque(maxlen=keep)
        self.root: Node | None = None
        self.busy = False
        self._live = Live(
            console=console,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
            vertical_overflow="crop",
        )

    def __enter__(self) -> LiveView:
        self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.refresh()
        self._live.stop()
        if not self.console.is_terminal:
            self.console.line()  # rich leaves the last frame unterminated off a terminal

    def add(self, record: EventRecord) -> None:
        self.events.append(record)

    def update(self, root: Node | None, *, busy: bool = False) -> None:
        if root is not None:
            self.root = root
        self.busy = busy

    def refresh(self) -> None:
        frame = screen(
            self.root, self.events, self.header, height=self.console.height, busy=self.busy
        )
        self._live.update(frame, refresh=True)


# -- plain lines ---------------------------------------------------------------------


def plain_line(record: EventRecord) -> str:
    """One event per line, for pipes and CI logs."""
    return str(record)  # escaped by EventRecord
