"""The event an operator's request leaves in the tree's log: who asked what, and
what came of it (OPERATOR_ACTION, or OPERATOR_REFUSED with the reason)."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervision import Event


def operator_event(root: str, op: str, request: dict[str, Any], reply: dict[str, Any]) -> Event:
    """The event of one operator request: OPERATOR_ACTION if it was carried out,
    OPERATOR_REFUSED (with the reason given to the client) if not. About the child
    it targeted, where it named one that was found; else about the tree's root."""
    import time

    from supervision import Event, EventKind

    asked = _asked(op, request)
    peer = request.get("_peer", {})
    who = f"uid {peer['uid']}" if "uid" in peer else "a client"
    if "pid" in peer:
        who += f" (pid {peer['pid']})"
    if reply.get("ok"):
        kind, outcome = EventKind.OPERATOR_ACTION, str(reply.get("message", "done"))
    else:
        kind, outcome = EventKind.OPERATOR_REFUSED, f"refused: {reply.get('error')}"
    target = request.get("_target")
    supervisor, offender = root, None
    if isinstance(target, str) and "/" in target:
        supervisor, _, offender = target.rpartition("/")
    return Event(
        time=time.monotonic(),
        supervisor=supervisor,
        context=kind,
        offender=offender,
        detail=f"{asked} by {who}: {outcome}"[:4096],
    )


def _asked(op: str, request: dict[str, Any]) -> str:
    """The request as the operator would have typed it, after `nannytree`."""
    key = request.get("id")
    words = [
        {"reload_child": "reload", "reload": "update", "reopen_logs": "logs --reopen"}.get(op, op)
    ]
    if op == "signal" and type(request.get("signal")) is int:
        try:
            words.append(signal.Signals(request["signal"]).name.removeprefix("SIG"))
        except ValueError:
            words.append(str(request["signal"]))
    if isinstance(key, str):
        words.append(key)
    if op == "add" and isinstance(request.get("args"), list):
        words += [str(a) for a in request["args"]]
    if op == "stop" and request.get("with_dependents") is True:
        words.append("--with-dependents")
    return " ".join(words)
