"""What every command that talks to a running tree shares: where its socket is,
one request and its answer, and one line on stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .._operate._text import printable
from ._control import call, find_socket


def error(message: object) -> None:
    """One line on stderr; the message may quote a child's text or a file's ids."""
    print(f"nannytree: {printable(message, lines=True)}", file=sys.stderr)


def socket_of(args: argparse.Namespace) -> Path:
    if args.socket is not None:
        return Path(args.socket)
    return find_socket(args.tree)


def ask(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any] | None:
    answer = call(socket_of(args), request)
    if not answer.get("ok"):
        error(answer.get("error"))
        return None
    return answer
