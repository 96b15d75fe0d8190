"""The commands that act on one child or the tree: start, stop, restart, pause,
resume, signal, reset, add and shutdown, each one request to the run host."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from .._operate._text import printable
from ._client import ask
from ._exit import FAILED, OK


def cmd_on_child(op: str) -> Callable[[argparse.Namespace], int]:
    """The command `op` (start, stop, restart, pause, resume, signal, reset): one
    request about one child or supervisor, its answer printed."""

    def run(args: argparse.Namespace) -> int:
        request: dict[str, Any] = {"op": op, "id": args.id}
        if op == "signal":
            request["signal"] = args.sig
        if op == "stop" and args.with_dependents:
            request["with_dependents"] = True
        answer = ask(args, request)
        if answer is None:
            return FAILED
        print(printable(answer["message"], lines=True))
        return OK

    return run


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def cmd_add(args: argparse.Namespace) -> int:
    extra = [_json_or_text(a) for a in args.args] if args.json else list(args.args)
    answer = ask(args, {"op": "add", "id": args.id, "args": extra})
    if answer is None:
        return FAILED
    print(printable(answer["message"]))
    return OK


def cmd_shutdown(args: argparse.Namespace) -> int:
    answer = ask(args, {"op": "shutdown"})
    if answer is None:
        return FAILED
    print(printable(answer["message"], lines=True))
    return OK
