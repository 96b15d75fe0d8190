"""`nannytree status` and `ls`: the running tree, and the running trees."""

from __future__ import annotations

import argparse
import json
import sys

from .._operate._records import Node, at_rest
from .._operate._text import printable
from ._client import ask, error
from ._control import ControlError, call, running_sockets
from ._exit import FAILED, NOT_RUNNING, OK


def _find(root: Node, key: str) -> list[Node]:
    return [
        n
        for _, n in root.walk()
        if n.id == key or n.path == key or n.path.endswith(f"/{key.strip('/')}")
    ]


def cmd_status(args: argparse.Namespace) -> int:
    from ._plain import Painter, detail_lines, status_lines, write

    answer = ask(args, {"op": "status"})
    if answer is None:
        return FAILED
    root = Node.from_dict(answer["tree"])
    if args.id is not None:
        found = _find(root, args.id)
        if not found:
            error(f"no child {args.id!r} in tree {root.id!r}; `nannytree status` lists them")
            return FAILED
        root = Node(**{**root.to_dict(), "children": found})
    else:
        found = []
    detail = None
    if args.id is not None and len(found) == 1 and found[0].type == "worker":
        more = ask(args, {"op": "detail", "id": found[0].path})
        detail = more["detail"] if more is not None else None
    if args.json:
        print(json.dumps({**answer, "tree": root.to_dict(), "detail": detail}, indent=2))
    else:
        paint = Painter(sys.stdout)
        lines = status_lines(paint, answer, root)
        if detail is not None:
            lines += ["", *detail_lines(paint, detail)]
        write(sys.stdout, lines)
    # Down: not running, unless at rest on purpose (strict: every one not running).
    down = [n for _, n in root.walk() if n.state != "running" and (args.strict or not at_rest(n))]
    return NOT_RUNNING if down else OK


def cmd_ls(args: argparse.Namespace) -> int:
    """The running trees: id, pid and socket, one per line."""
    listed = 0
    for sock in running_sockets():
        try:
            hello = call(sock, {"op": "hello"}, timeout=5.0)
        except ControlError:
            continue
        fields = (hello.get("tree", sock.stem), f"pid {hello.get('pid')}", sock)
        print("\t".join(printable(f) for f in fields))
        listed += 1
    if not listed:
        # On stderr: a script reading the list still gets an empty one.
        print(
            "nannytree: no tree is running (start one with `nannytree run FILE`)", file=sys.stderr
        )
        return NOT_RUNNING
    return OK
