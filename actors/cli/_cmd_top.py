"""`nannytree top` (and `attach`): the live view of a tree that runs elsewhere.

The view `run` shows in the foreground, for a tree started in the background,
from another shell, through the control socket: read-only (it asks `status` and
follows `events`, nothing else), until Ctrl-C (which leaves the tree running) or
the tree's end, which it says before it exits 0. Off a terminal it prints the
status once and then one line per event, as `events -f` does.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
from pathlib import Path
from typing import Any

from .._operate._records import EventRecord, Node
from .._operate._text import printable
from ._client import error, socket_of
from ._control import ControlError, NoAnswer, call, stream
from ._exit import FAILED, OK

STATUS_TIMEOUT = 5.0  # a status answer slower than this shows the last one, marked busy


class _Follower(threading.Thread):
    """Follows the tree's events on a connection of its own; `ended` once the tree
    (or the connection) is gone, with `why`."""

    def __init__(self, path: Path, last: int) -> None:
        super().__init__(name="nannytree-top-events", daemon=True)
        self.path, self.last = path, last
        self.records: queue.SimpleQueue[EventRecord] = queue.SimpleQueue()
        self.changed = threading.Event()
        self.ended = threading.Event()
        self.why = "the tree stopped"
        self.failed = False

    def run(self) -> None:
        try:
            while self._follow():  # dropped for falling behind: follow again from now
                self.last = 0
        except (ControlError, OSError, ValueError) as e:
            self.why = f"the connection ended ({e})"
        self.ended.set()
        self.changed.set()

    def _follow(self) -> bool:
        """One events stream to its end; True if it should be followed again."""
        request = {"op": "events", "follow": True, "last": self.last}
        for message in stream(self.path, request):
            if "event" in message:
                self.records.put(EventRecord.from_dict(message["event"]))
            elif "end" in message:
                self.why = str(message["end"])
                if message.get("ok") is False:
                    if self.why.startswith("too slow"):  # a burst outran this terminal
                        return True
                    self.failed = True
                return False
            elif not message.get("ok", True):
                self.why, self.failed = str(message.get("error")), True
                return False
            self.changed.set()
        return False

    def take(self) -> list[EventRecord]:
        taken = []
        while True:
            try:
                taken.append(self.records.get_nowait())
            except queue.Empty:
                return taken


def cmd_top(args: argparse.Namespace) -> int:
    path = socket_of(args)
    hello = call(path, {"op": "hello"}, timeout=STATUS_TIMEOUT)  # no tree: exit 3 in main
    if not hello.get("ok"):  # the socket's permission check: "not your tree"
        error(hello.get("error"))
        return FAILED
    tree = str(hello.get("tree", path.stem))
    follower = _Follower(path, args.last)
    follower.start()
    live = sys.stdout.isatty() if args.live is None else args.live
    try:
        if live:
            _live(args, path, hello, follower)
        else:
            _plain(path, follower)
    except KeyboardInterrupt:
        print(f"nannytree: detached; tree {printable(tree)!r} runs on", file=sys.stderr)
        return OK
    if follower.failed:
        error(f"tree {tree!r}: {follower.why}")
        return FAILED
    print(f"nannytree: tree {printable(tree)!r} has ended ({follower.why})", file=sys.stderr)
    return OK


ENDING_GRACE = 2.0  # s a closed status call waits for the event stream's last word


def _status(path: Path) -> dict[str, Any] | None:
    """The tree's status answer; None when it is busy or refuses; ControlError if gone."""
    try:
        answer = call(path, {"op": "status"}, timeout=STATUS_TIMEOUT)
    except NoAnswer:
        return None
    except OSError as e:  # the run closed the connection as it ended
        raise ControlError(f"its control socket closed ({e.strerror or e})") from e
    return answer if answer.get("ok") else None


def _plain(path: Path, follower: _Follower) -> None:
    from ._plain import Painter, status_lines, write

    try:
        answer = _status(path)
    except ControlError:
        answer = None
    if answer is not None:
        write(sys.stdout, status_lines(Painter(sys.stdout), answer, Node.from_dict(answer["tree"])))
        sys.stdout.flush()
    while not follower.ended.is_set() or not follower.records.empty():
        follower.changed.wait()
        follower.changed.clear()
        for record in follower.take():
            print(record, flush=True)  # escaped by EventRecord


def _live(args: argparse.Namespace, path: Path, hello: dict[str, Any], follower: _Follower) -> None:
    from rich.console import Console

    from ._view import Header, LiveView

    if sys.stdout.isatty():
        console = Console(file=sys.stdout, highlight=False)
    else:
        width = int(os.environ.get("COLUMNS", "160"))
        console = Console(file=sys.stdout, highlight=False, width=width, no_color=True)
    header = Header(
        str(hello.get("tree", path.stem)),
        int(hello.get("pid") or 0),
        str(path),
        hello.get("output"),
        attached=True,
    )
    with LiveView(console, header) as view:
        while True:
            for record in follower.take():
                view.add(record)
            if follower.ended.is_set():
                header.note = f"the tree has ended ({follower.why})"
                break
            try:
                answer = _status(path)
            except ControlError as e:  # the run is gone, its socket with it
                # Its event stream says why, a moment later, if it got to say it.
                if follower.ended.wait(ENDING_GRACE):
                    header.note = f"the tree has ended ({follower.why})"
                else:
                    header.note = f"the tree has ended ({e})"
                    follower.why = "its control socket is gone"
                break
            if answer is not None:
                view.update(Node.from_dict(answer["tree"]))
            else:
                view.update(None, busy=True)
            view.refresh()
            follower.changed.wait(args.refresh)
            follower.changed.clear()
        for record in follower.take():
            view.add(record)
