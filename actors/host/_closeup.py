"""One child up close, for `nannytree status ID` and `nannytree logs ID`: what it runs,
its process, its last exits, its output. A child of a remote subtree is shown as a
local one is, plus its node; while its subtree cannot be reached, or its
supervisor is busy (a remote start), from the tree's events."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors._launcher._journal import identifier_of
from actors._operate._find import TIMEOUTS
from actors.cli._logfile import tail_file

if TYPE_CHECKING:
    from .. import EventLog
    from .._operate._find import Target
    from .._operate._snapshot import TreeInspector


def worker_only(t: Target, what: str) -> None:
    if t.info.type == "supervisor":
        raise ValueError(f"{t.path} is a supervisor; {what} its workers one by one")


class CloseUp:
    """`status ID` and `logs ID` of one worker; `call(target, method, *args,
    timeout=None)` asks its supervisor (the Controller's; None: its own bound)."""

    def __init__(self, inspector: TreeInspector, log: EventLog, call: Callable[..., Any]) -> None:
        self.inspector = inspector
        self.log = log
        self.call = call

    def logs(self, t: Target, request: dict[str, Any]) -> dict[str, Any]:
        """The tail of a child's output: its capture buffer, or the file it writes to."""
        worker_only(t, "read the output of")
        stream = request.get("stream", "stderr")
        if stream not in ("stdout", "stderr"):
            raise ValueError("stream must be stdout or stderr")
        previous = request.get("previous") is True
        where = getattr(self._spec_of(t), stream, None)
        if t.remote is not None:
            return self._remote_logs(t, stream, where, previous)
        if where == "capture":
            text = self.call(t, "read_output", t.child_id, stream, previous)
            return {"message": str(text).rstrip("\n"), "capture": True}
        identifier = identifier_of(where)
        if identifier is not None:
            raise ValueError(
                f"{t.path} writes its {stream} to the journal: read it with "
                f"`journalctl -t {identifier}` (add -f to follow)"
            )
        if previous:
            raise ValueError(
                f"{t.path} writes to {where or 'the terminal'}: every run appends there, "
                "so --previous is for captured output; read the file"
            )
        if isinstance(where, str):
            text = tail_file(where).rstrip("\n")
            if not text and not os.path.lexists(where):
                # Moved away or deleted: say so, rather than show nothing (docs/logs.md).
                return {"message": "", "path": where, "gone": True}
            return {"message": text, "path": where}
        raise ValueError(
            f"{t.path} writes its {stream} to the terminal of `nannytree run "
            f'--child-output inherit`; set {stream} = "capture" or a file in its table'
        )

    def _remote_logs(
        self, t: Target, stream: str, where: str | None, previous: bool
    ) -> dict[str, Any]:
        """A remote child's output, through its subtree's read_output: its capture
        buffer (and, for stderr, the tail its launcher keeps of it). A file it writes
        to is on its node, out of reach from here."""
        node = self._node_name(t.info.node) or "its node"
        args: tuple[Any, ...] = (t.child_id, stream, True) if previous else (t.child_id, stream)
        try:
            text = str(self.call(t, "read_output", *args, timeout=self._remote_wait(t)))
        except TypeError:  # an older far side: read_output(key, stream) only
            raise ValueError(
                f"{t.path} runs on {node}, whose subtree does not forward --previous; "
                "read its current output without it"
            ) from None
        if text or where == "capture" or stream == "stderr":
            return {"message": text.rstrip("\n"), "capture": True}
        raise ValueError(
            f"{t.path} writes its {stream} to {where or 'its terminal'} on {node}: read it "
            f'there, or set {stream} = "capture" in its table to read it with `nannytree logs`'
        )

    def _spec_of(self, t: Target) -> Any:
        """The child's spec: its supervisor's answer, or (a remote subtree that cannot
        answer now) the spec the tree was started with."""
        from supervision import NannyError

        try:
            return self.call(t, "get_childspec", t.child_id, timeout=self._remote_wait(t))
        except (NannyError, ValueError):
            if t.remote is None:
                raise
        except TIMEOUTS:
            if t.remote is None:
                raise
        spec = self.inspector.spec_at(t.path)
        if spec is None:
            raise ValueError(f"{t.path}: its remote subtree does not answer; try again")
        return spec

    def _remote_wait(self, t: Target) -> float | None:
        """How long to wait for a read through a remote subtree: as long as for the
        tree's own answers (a frozen node holds a call for its whole timeout)."""
        return self.inspector.timeout if t.remote is not None else None

    def _node_name(self, node: str | None) -> str | None:
        nodes = self.inspector.nodes
        return nodes.name(node) if nodes is not None else node

    def detail(self, key: str) -> dict[str, Any]:
        """The detail of a child: from its supervisor, or, while that is busy (a remote
        start) or cannot reach it (an unreachable subtree), from the tree's events."""
        from supervision import ChildNotFound

        try:
            return self._detail(self.inspector.find(key))
        except ChildNotFound:
            why = "its subtree cannot be reached now"
            fallback = self._detail_from_events(key, why)
            if fallback is None:
                raise
        except TIMEOUTS:
            fallback = self._detail_from_events(key, "its supervisor is busy now")
            if fallback is None:
                raise
        return fallback

    def _exits(self, path: str) -> list[dict[str, Any]]:
        """The child's last 5 exits, from the tree's events (a remote subtree's join them);
        a start that failed is one (a child whose first start failed has no other)."""
        from supervision import EventKind

        ended = (EventKind.CHILD_EXITED, EventKind.CHILD_TERMINATED, EventKind.START_FAILED)
        supervisor, _, child = path.rpartition("/")
        return [
            self.inspector.record(e).to_dict()
            for e in self.log.snapshot()
            if e.offender == child and e.supervisor == supervisor and e.context in ended
        ][-5:]

    def _detail(self, t: Target) -> dict[str, Any]:
        """One child up close: its spec, its process, its last exits and their stderr."""
        from .._operate._snapshot import health_dict

        worker_only(t, "show the detail of")
        spec = self._spec_of(t)
        running = t.info.state in ("running", "paused")
        uptime = self.inspector.starts.uptime(t.path, time.monotonic()) if running else None
        outputs = {getattr(spec, s, None) for s in ("stdout", "stderr")} - {None}
        # A remote subtree's supervisor does not forward child_status: which_tree's.
        status = self.call(t, "child_status", t.child_id) if t.remote is None else t.status
        return {
            "path": t.path,
            "state": t.info.state,
            "pid": t.info.pid,
            "restarts": t.info.restarts,
            "restart": t.info.restart.value,
            "restart_limit": _limit(spec),
            "uptime": uptime,
            "runs": _runs(spec),
            "output": ", ".join(sorted(str(o) for o in outputs)),
            "status": status,
            "health": health_dict(t.info.health),
            "node": t.info.node,
            "node_name": self._node_name(t.info.node),
            "exits": self._exits(t.path),
        }

    def _detail_from_events(self, key: str, why: str) -> dict[str, Any] | None:
        """A worker's detail as the last snapshot and the events show it; a child of a
        remote subtree that is not running now (a restart, a lost node) as its spec
        says, in state "unknown". None: no such worker."""
        from .._operate._records import Node

        root = self.inspector.snapshot(stats=False)
        wanted = key.strip("/")
        paths = (wanted, f"{root.id}/{wanted}")
        found = [
            n for _, n in root.walk() if n.type == "worker" and (n.id == wanted or n.path in paths)
        ]
        if not found:
            rows = {n.path: n for _, n in root.walk()}
            for path, subtree in _placed_workers(self.inspector.spec, root.id):
                if path.rpartition("/")[2] == wanted or path in paths:
                    top = rows.get(subtree)
                    state = top.state if top is not None else "unknown"
                    why = f"its remote subtree {subtree} is {state}"
                    found.append(
                        Node(
                            id=path.rpartition("/")[2],
                            path=path,
                            type="worker",
                            state="unknown",
                            node=top.node if top else None,
                            node_name=top.node_name if top else None,
                        )
                    )
        if len(found) != 1:
            return None
        node = found[0]
        spec = self.inspector.spec_at(node.path)
        return {
            "path": node.path,
            "state": node.state,
            "pid": node.pid,
            "restarts": node.restarts,
            "restart": node.restart if spec is None else spec.restart.value,
            "uptime": node.uptime,
            "runs": _runs(spec) if spec is not None else "",
            "output": "",
            "status": node.status,
            "health": node.health,
            "node": node.node,
            "node_name": node.node_name,
            "exits": self._exits(node.path),
            "note": f"{why}: shown from the tree's events",
        }


def _placed_workers(spec: Any, path: str, placed: str | None = None) -> Any:
    """(path, the path of its placed subtree) of every worker inside one."""
    for child in getattr(spec, "children", ()):
        where = f"{path}/{child.id}"
        if hasattr(child, "children"):
            inner = placed or (where if getattr(child, "placement", None) else None)
            yield from _placed_workers(child, where, inner)
        elif placed is not None:
            yield where, placed


def _runs(spec: Any) -> str:
    """What a child runs, in one line."""
    if getattr(spec, "command", None) is not None:
        return shlex.join(spec.command)
    target = getattr(spec, "target", None)
    ref = getattr(target, "ref", None)
    return str(
        ref or f"{getattr(target, '__module__', '')}:{getattr(target, '__qualname__', target)}"
    )


def _limit(spec: Any) -> dict[str, Any] | None:
    """A worker's restart_limit, for its detail (docs/otp-semantics.md section 4.1)."""
    limit = getattr(spec, "restart_limit", None)
    if limit is None:
        return None
    return {"intensity": limit.intensity, "period": limit.period}
