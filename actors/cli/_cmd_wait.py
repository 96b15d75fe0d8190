"""`nannytree wait --ready`: block until a tree (or some of its children) is ready, as
`s6-svwait -U` and `docker compose up --wait` do.

The waiting happens in the server: one request that blocks, bounded by the timeout
(actors/_operate/_ready.py). The server holds the tree's events, so it wakes on the
event that makes the tree ready, and it knows why a tree ended (gave up, failed to
start) while its socket still exists: the run removes the socket as soon as the
tree has stopped, so a client polling `status` would only see it vanish, and each
poll would sample every process. A waiting client costs one connection thread, as
`events --follow` does (at most MAX_CLIENTS). The client polls only for the socket
to appear, so `nannytree run tree.toml & nannytree wait --ready` works.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from .._operate._text import printable
from ._control import BadUsage, ControlError, NoAnswer, NoTree, call, find_socket
from ._exit import FAILED, INTERRUPTED, NOT_RUNNING, TIMED_OUT
from ._exit import OK as READY

POLL = 0.02  # seconds between looks for a socket that is not there yet
MARGIN = 10.0  # seconds the client waits for the server's answer past its timeout


def _error(message: object) -> None:
    print(f"nannytree: {printable(message, lines=True)}", file=sys.stderr)


def cmd_wait(args: argparse.Namespace) -> int:
    try:
        return _wait(args)
    except KeyboardInterrupt:
        return INTERRUPTED


def _wait(args: argparse.Namespace) -> int:
    ids: list[str] = list(args.ids)
    timeout: float | None = args.timeout
    deadline = None if timeout is None else time.monotonic() + timeout
    request: dict[str, Any] = {"op": "wait", "ids": ids}
    if args.strict:
        request["strict"] = True  # (only when asked: an older run host refuses no key)
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            sock = Path(args.socket) if args.socket is not None else find_socket(args.tree)
            answer = call(
                sock, {**request, "timeout": left}, timeout=None if left is None else left + MARGIN
            )
        except NoTree as e:  # not started yet (or a stale socket a new run will replace)
            if left is not None and left <= 0:
                _error(f"{e} (waited {timeout:g}s)")
                return NOT_RUNNING
            time.sleep(POLL if left is None else min(POLL, left))
            continue
        except BadUsage:
            raise
        except NoAnswer as e:
            _error(e)
            return FAILED
        except (ControlError, OSError) as e:  # the run went away mid-answer
            _error(f"the tree's run ended while waiting: {e}")
            return FAILED
        if answer.get("ok") is False:
            if answer.get("kind") == "Busy" and (left is None or left > 0):
                time.sleep(POLL)  # too many clients: try again
                continue
            _error(answer.get("error"))
            return FAILED
        return _report(answer, ids, timeout)


def _report(answer: dict[str, Any], ids: list[str], timeout: float | None) -> int:
    what = ", ".join(ids) if ids else f"tree {answer.get('tree')!r}"
    if answer.get("ready"):
        n = answer.get("children", 0)
        print(printable(f"ready: {what} ({n} {'child' if n == 1 else 'children'})"))
        return READY
    if answer.get("ended"):
        _error(answer["ended"] if not ids else f"{what} will not be ready: {answer['ended']}")
        code = FAILED
    else:
        limit = f" after {timeout:g}s" if timeout is not None else ""
        _error(f"{what} not ready{limit}; still waiting for:")
        code = TIMED_OUT
    for line in waiting_lines(answer.get("waiting") or []):
        print(line, file=sys.stderr)
    return code


def waiting_lines(waiting: list[dict[str, Any]]) -> list[str]:
    """Each child that is not ready: what it is doing and why, escaped (its texts are
    the child's own)."""
    lines = []
    for w in waiting:
        doing = str(w.get("state"))
        if w.get("waiting_for"):
            doing += f", waiting for {w['waiting_for']}"
        if w.get("health"):
            doing += f", {w['health']}"
        parts = [doing]
        if w.get("restarts"):
            parts.append(f"{w['restarts']} restarts")
        if w.get("last_exit"):
            parts.append(f"last exit: {w['last_exit']}")
        lines.append(printable(f"  {w.get('path')}: {'; '.join(parts)}"))
        for text in str(w.get("stderr") or "").splitlines():
            lines.append(printable(f"    | {text}"))
    return lines
