"""`nannytree logs`: what a child wrote lately, and following it (`-f`) in its
log file, as `tail -F`, or in its capture buffer."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from .._operate._text import printable
from ._client import ask, error, socket_of
from ._control import ControlError, NoAnswer, NoTree, call
from ._exit import FAILED, OK, USAGE


def _last_lines(text: str, n: int | None) -> str:
    if n is None or not text:
        return text
    return "\n".join(text.split("\n")[-n:]) if n > 0 else ""


def cmd_logs(args: argparse.Namespace) -> int:
    sock = socket_of(args)
    if args.reopen:
        answer = ask(args, {"op": "reopen_logs"})
        if answer is None:
            return FAILED
        print(printable(answer["message"], lines=True))
        return OK
    if args.id is None:
        error("give a child's ID (or --reopen)")
        return USAGE
    if args.follow:
        # Imported before the tail is read, not between it and the follow's open.
        from . import _logfile  # noqa: F401
    request = {
        "op": "logs",
        "id": args.id,
        "stream": "stdout" if args.stdout else "stderr",
        "previous": args.previous,
    }
    answer = ask(args, request)
    if answer is None:
        return FAILED
    text = _last_lines(answer["message"], args.lines)
    if text:
        print(printable(text, lines=True), flush=True)
    if answer.get("gone"):
        error(
            f"{answer['path']} is gone (moved away or deleted); `nannytree logs --reopen` "
            "has the tree start a new one"
        )
        if not args.follow:
            return FAILED
    if not args.follow:
        return OK
    try:
        if answer.get("path"):
            return _follow_file(sock, str(answer["path"]))
        return _follow_capture(sock, request, answer["message"])
    except KeyboardInterrupt:
        return OK


def _tree_alive(sock: Path) -> bool:
    try:
        return bool(call(sock, {"op": "hello"}, timeout=5.0).get("ok"))
    except ControlError:
        return False


def _follow_file(sock: Path, path: str, poll: float = 0.2) -> int:
    """As `tail -F`: print what is appended; start over when the file is replaced."""
    from ._logfile import open_log

    fd: int | None = None
    position = 0
    first = True  # the tail is printed already: start at the end, once
    checked = time.monotonic()
    try:
        while True:
            if fd is None:
                with contextlib.suppress(FileNotFoundError):
                    fd = open_log(path)
                    position = os.fstat(fd).st_size if first else 0
                first = False
            if fd is not None:
                size = os.fstat(fd).st_size
                if size < position:  # truncated
                    position = 0
                while chunk := os.pread(fd, 65536, position):
                    position += len(chunk)
                    sys.stdout.write(printable(chunk.decode(errors="replace"), lines=True))
                sys.stdout.flush()
                try:
                    replaced = os.stat(path).st_ino != os.fstat(fd).st_ino
                except FileNotFoundError:
                    replaced = True
                if replaced:
                    os.close(fd)
                    fd, position = None, 0
            if time.monotonic() - checked > 1.0:
                if not _tree_alive(sock):
                    return OK
                checked = time.monotonic()
            time.sleep(poll)
    finally:
        if fd is not None:
            os.close(fd)


def _new_part(old: str, new: str) -> str:
    """What a capture buffer (the last 64 KiB) gained since `old`."""
    if new.startswith(old):
        return new[len(old) :]
    for cut in range(1, len(old)):  # the buffer dropped its oldest bytes
        if new.startswith(old[cut:]):
            return new[len(old) - cut :]
    return new


def _follow_capture(sock: Path, request: dict[str, Any], seen: str, poll: float = 0.3) -> int:
    while True:
        time.sleep(poll)
        try:
            answer = call(sock, request, timeout=10.0)
        except NoTree:
            return OK
        except NoAnswer:  # busy (a remote restart): the next poll may answer
            continue
        if not answer.get("ok"):
            return OK if answer.get("kind") == "Stopping" else FAILED
        text = answer["message"]
        fresh = _new_part(seen, text)
        if fresh:
            sys.stdout.write(printable(fresh.lstrip("\n"), lines=True) + "\n")
            sys.stdout.flush()
        seen = text
