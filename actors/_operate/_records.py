"""What the CLI shows, as plain data: a node of the tree and an event record.

Light on purpose (no pykka, psutil or rich): client commands import this to
print what the control socket answered.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ._text import printable

if TYPE_CHECKING:
    from supervision import Event

# -- the snapshot ------------------------------------------------------------------
# Plain classes, not dataclasses: `dataclasses` imports `inspect`, which is a sixth
# of a client command's time.


class _Record:
    FIELDS: tuple[tuple[str, Any], ...] = ()  # (name, default); _REQUIRED: no default

    def _fill(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        names = [name for name, _ in self.FIELDS]
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} fields")
        values = dict(zip(names, args, strict=False))
        for name, value in kwargs.items():
            if name not in names or name in values:
                raise TypeError(f"{type(self).__name__}: bad or repeated field {name!r}")
            values[name] = value
        for name, default in self.FIELDS:
            if name not in values:
                if default is _REQUIRED:
                    raise TypeError(f"{type(self).__name__}: field {name!r} is required")
                values[name] = [] if default is _LIST else default
            object.__setattr__(self, name, values[name])

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for name, _ in self.FIELDS:
            value = getattr(self, name)
            if isinstance(value, list):
                value = [v.to_dict() if isinstance(v, _Record) else v for v in value]
            out[name] = value
        return out

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Record)
            and type(other) is type(self)
            and self.to_dict() == other.to_dict()
        )

    def __hash__(self) -> int:
        return hash(tuple(repr(getattr(self, n)) for n, _ in self.FIELDS))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n, _ in self.FIELDS)
        return f"{type(self).__name__}({shown})"

    @classmethod
    def _known(cls, data: dict[str, Any]) -> dict[str, Any]:
        names = {n for n, _ in cls.FIELDS}
        return {k: v for k, v in data.items() if k in names}


_REQUIRED = object()
_LIST = object()


class Node(_Record):
    """One supervisor or worker of a running tree, as `status` and the view show it.

    `path` is "root/pool/w1" (the root's path is its id); `uptime` seconds since
    the current incarnation started; `cpu` percent and `rss` bytes cover the
    process and its descendants (for a supervisor: its whole subtree); `node` is
    the host of a remote subtree's child (None: this host); `status` a command's
    last sd_notify STATUS= text; `last_exit_kind` the ExitKind value of `last_exit`
    ("normal": it exited by itself with a normal code; "shutdown": it was stopped);
    `health` what its liveness probe says ({"status", "failures", "threshold",
    "error"}, as supervision.Health), None without a probe; `node_name` the name
    the engine gives `node` (its id where it gives none); `state_for` the seconds
    a remote subtree has been "unreachable" (its node cut off) or "pending" (no node
    can take it), where known.
    """

    FIELDS = (
        ("id", _REQUIRED),
        ("path", _REQUIRED),
        ("type", _REQUIRED),
        ("state", _REQUIRED),
        ("pid", None),
        ("uptime", None),
        ("restarts", 0),
        ("incarnation", 0),
        ("restart", "permanent"),
        ("last_exit", None),
        ("last_exit_normal", True),
        ("cpu", None),
        ("rss", None),
        ("strategy", None),
        ("intensity", None),
        ("period", None),
        ("node", None),
        ("status", ""),
        ("last_exit_kind", None),
        ("health", None),
        ("node_name", None),
        ("state_for", None),
        ("children", _LIST),
    )
    id: str
    path: str
    type: str
    state: str
    pid: int | None
    uptime: float | None
    restarts: int
    incarnation: int
    restart: str
    last_exit: str | None
    last_exit_normal: bool
    cpu: float | None
    rss: int | None
    strategy: str | None
    intensity: int | None
    period: float | None
    node: str | None
    status: str  # a command's last sd_notify STATUS= text ("" if none)
    last_exit_kind: str | None
    health: dict[str, Any] | None
    node_name: str | None
    state_for: float | None
    children: list[Node]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._fill(args, kwargs)

    def walk(self, depth: int = 0) -> Iterator[tuple[int, Node]]:
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        kids = [cls.from_dict(c) for c in data.get("children", [])]
        return cls(**{**cls._known(data), "children": kids})


# -- at rest on purpose: what `status` and `wait --ready` count as fine --------------------

GAVE_UP = "reached_max_restart_intensity"


def done(node: Node) -> bool:
    """A one-shot step that did its work: ended by itself with a normal code, and its
    restart (transient or temporary) does not start it again."""
    return (
        node.type == "worker"
        and node.state == "stopped"
        and node.restart in ("transient", "temporary")
        and node.last_exit_kind == "normal"
    )


def stopped_on_purpose(node: Node) -> bool:
    """Stopped by an operator (`nannytree stop`, terminate_child) and left so: its
    last exit a stop, not a supervisor's give-up (whose exit is a stop too)."""
    return (
        node.state == "stopped"
        and node.last_exit_kind == "shutdown"
        and GAVE_UP not in (node.last_exit or "")
    )


def at_rest(node: Node, *, strict: bool = False) -> bool:
    """Not running, and fine so: a finished one-shot step, or (unless `strict`) a child
    stopped on purpose. `status` counts every other one that does not run as down."""
    return done(node) or (not strict and stopped_on_purpose(node))


def health_text(health: dict[str, Any] | None) -> str:
    """A liveness probe's verdict in a few words: "ready" (not probed yet),
    "healthy", or "failing 2/3: <the last probe's error>"; "" without a probe."""
    if not health:
        return ""
    status = health.get("status")
    if status == "failing":
        failures, threshold = health.get("failures"), health.get("threshold")
        return f"failing {failures}/{threshold}: {health.get('error', '')}"
    return "healthy" if status == "healthy" else "ready"


# -- events as records -----------------------------------------------------------------


class EventRecord(_Record):
    """An Event made printable and portable: wall-clock time, JSON-able fields."""

    FIELDS = (
        ("time", _REQUIRED),
        ("who", _REQUIRED),
        ("what", _REQUIRED),
        ("pid", None),
        ("reason", None),
        ("abnormal", False),
        ("detail", ""),
        ("stderr", ""),  # the last lines a crashed child wrote to its captured stderr
    )
    time: float
    who: str
    what: str
    pid: int | None
    reason: str | None
    abnormal: bool
    detail: str
    stderr: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._fill(args, kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"EventRecord is read-only: cannot set {name!r}")

    @classmethod
    def from_event(cls, event: Event) -> EventRecord:
        wall = time.time() - (time.monotonic() - event.time)
        who = f"{event.supervisor}/{event.offender}" if event.offender else event.supervisor
        return cls(
            time=wall,
            who=who,
            what=event.context.value,
            pid=event.pid,
            reason=str(event.reason) if event.reason is not None else None,
            abnormal=event.reason is not None and not event.reason.is_normal,
            detail=event.detail,
            stderr=stderr_lines(event.reason.stderr_tail if event.reason is not None else ""),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EventRecord:
        return cls(**cls._known(data))

    def __str__(self) -> str:
        clock = time.strftime("%H:%M:%S", time.localtime(self.time))
        parts = [f"{clock}.{int(self.time * 1000) % 1000:03d}", self.who, self.what]
        if self.pid is not None:
            parts.append(f"pid={self.pid}")
        if self.reason is not None:
            parts.append(f"reason={self.reason}")
        if self.detail:
            parts.append(self.detail)
        # Reasons carry a child's exception message and stderr tail: never raw.
        line = printable(" ".join(parts))
        for text in self.stderr.splitlines():
            line += "\n    | " + printable(text)
        return line


TAIL_LINES = 5
TAIL_BYTES = 1024


def stderr_lines(tail: str, lines: int = TAIL_LINES) -> str:
    """The last few lines of a stderr tail, at most TAIL_BYTES: what explains a crash."""
    kept = "\n".join(tail.rstrip("\n").splitlines()[-lines:])
    return kept[-TAIL_BYTES:]
