"""What the CLI shows, as plain data: a node of the tree and an event record.

Light on purpose (no pykka, psutil or rich): client commands import this to
print what the control socket answered.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ._text import printable

if TYPE_CHECKING:
    from supervision import Event

# -- the snapshot ------------------------------------------------------------------


@dataclass
class Node:
    """One supervisor or worker of a running tree, as `status` and the view show it.

    `path` is "root/pool/w1" (the root's path is its id); `uptime` seconds since
    the current incarnation started; `cpu` percent and `rss` bytes cover the
    process and its descendants (for a supervisor: its whole subtree).
    """

    id: str
    path: str
    type: str
    state: str
    pid: int | None = None
    uptime: float | None = None
    restarts: int = 0
    incarnation: int = 0
    restart: str = "permanent"
    last_exit: str | None = None
    last_exit_normal: bool = True
    cpu: float | None = None
    rss: int | None = None
    strategy: str | None = None
    intensity: int | None = None
    period: float | None = None
    children: list[Node] = field(default_factory=list)

    def walk(self, depth: int = 0) -> Iterator[tuple[int, Node]]:
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Node:
        kids = [cls.from_dict(c) for c in data.get("children", [])]
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "children": kids})


# -- events as records -----------------------------------------------------------------


@dataclass(frozen=True)
class EventRecord:
    """An Event made printable and portable: wall-clock time, JSON-able fields."""

    time: float
    who: str
    what: str
    pid: int | None = None
    reason: str | None = None
    abnormal: bool = False
    detail: str = ""
    stderr: str = ""  # the last lines a crashed child wrote to its captured stderr

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EventRecord:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

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
