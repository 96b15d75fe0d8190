"""`nannytree reload` and `update`: apply the edited tree file, or reload
children in place."""

from __future__ import annotations

import argparse
from typing import Any

from .._operate._text import printable
from ._args import settle_seconds
from ._client import ask
from ._exit import FAILED, OK


def add_settle_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--settle",
        type=settle_seconds,
        metavar="SECONDS",
        # The default is the host's (supervision.UPDATE_SETTLE), written out: the client
        # does not import supervision (tests/cli/test_commands.py holds the two equal).
        help="a replaced or added child without readiness counts as started once it has "
        "stayed up this long (default 1; 0: once it runs); one that exits "
        "sooner fails its start, charging no restart intensity, and is rolled back to "
        "its previous spec",
    )


def cmd_reload(args: argparse.Namespace) -> int:
    """`reload` alone (or `update`): apply the edited tree file; `reload ID...`: reload
    those children in place, as their spec's `reload` says (systemctl reload)."""
    ids = getattr(args, "ids", None) or []
    if not ids:
        request: dict[str, Any] = {"op": "reload"}
        if args.settle is not None:
            request["settle"] = args.settle
        answer = ask(args, request)
        if answer is None:
            return FAILED
        print(printable(answer["message"], lines=True))
        return OK
    failed = False
    for key in ids:
        answer = ask(args, {"op": "reload_child", "id": key})
        if answer is None:
            failed = True
            continue
        print(printable(answer["message"], lines=True))
    return FAILED if failed else OK
