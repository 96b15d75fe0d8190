"""The control socket of `nannytree run`, as its client sees it: a Unix socket
(mode 0600, no TCP) in the runtime directory that answers JSON-lines requests;
where a tree's socket is, the errors, and `call`/`stream`. The listening side
is the run host's (actors/host/_server.py); what each request does is its
Controller's (actors/host/_controller.py).

One request per connection: the client sends one JSON object on one line; the
server answers one JSON object on one line ({"ok": true, ...} or {"ok": false,
"error": "...", "kind": "..."}), or, for {"op": "events"}, one {"event": {...}}
line per event and a final {"end": "..."} line.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from actors import UnsafeDirectory, private_dir, runtime_dir

MAX_LINE = 64 * 1024  # one request, in bytes
MAX_PATH = 107  # sun_path holds 108 bytes, NUL included
OP_TIMEOUT = 600.0


class ControlError(Exception):
    """The control socket cannot be set up or reached; the message says what to do."""


class NoTree(ControlError):
    """No running tree answers at the socket."""


class BadUsage(ControlError):
    """The command names no tree it could mean (exit status 2)."""


class Ambiguous(BadUsage):
    """Several trees run and the command did not say which."""


class NoAnswer(ControlError):
    """The tree did not answer within the client's timeout."""


# -- where sockets live ------------------------------------------------------------------


def own_dir(path: Path, *, create: bool) -> Path | None:
    """`path` as a private directory of ours (0700), made if asked; None if absent.
    ControlError if it is not private (see actors/_launcher/_runtime_dir.py)."""
    try:
        return private_dir(path, create=create)
    except UnsafeDirectory as e:
        raise ControlError(str(e)) from None


def _base(*, create: bool) -> Path | None:
    try:
        return runtime_dir(create=create)
    except UnsafeDirectory as e:
        raise ControlError(f"{e}; or pass --socket PATH") from None


def socket_for(tree_id: str) -> Path:
    """The default socket of a tree: <runtime dir>/<tree id>.sock (the dir is created)."""
    base = _base(create=True)
    assert base is not None
    return base / f"{tree_id}.sock"


def find_socket(tree: str | None = None) -> Path:
    """The socket a client should use: the named tree's, or the only one running."""
    base = _base(create=False)
    if tree is not None:
        if not tree or "/" in tree or tree in (".", ".."):
            raise BadUsage(f"--tree {tree!r} is not a tree id; `nannytree ls` lists them")
        if base is None:
            raise NoTree(f"no tree {tree!r} is running (no runtime directory yet)")
        return base / f"{tree}.sock"
    live = running_sockets()
    if len(live) == 1:
        return live[0]
    if not live:
        where = base if base is not None else "the runtime directory"
        raise NoTree(f"no running tree found in {where}; start one with `nannytree run FILE`")
    names = ", ".join(s.stem for s in live)
    raise Ambiguous(f"several trees are running ({names}); pick one with --tree ID")


def running_sockets() -> list[Path]:
    """The sockets in the runtime dir that a live run answers on."""
    base = _base(create=False)
    sockets = sorted(base.glob("*.sock")) if base is not None else []
    return [s for s in sockets if answers(s)]


def answers(path: Path) -> bool:
    """Whether a run listens at `path`: it accepts a connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def check_path(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_PATH:
        raise ControlError(
            f"socket path too long ({len(os.fsencode(path))} bytes, at most {MAX_PATH}): "
            f"{path}; pass a shorter --socket"
        )


# -- the client --------------------------------------------------------------------------------


def _connect(path: Path, timeout: float | None) -> socket.socket:
    check_path(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except FileNotFoundError:
        s.close()
        raise NoTree(f"no tree is running at {path}; start one with `nannytree run FILE`") from None
    except ConnectionRefusedError:
        s.close()
        raise NoTree(
            f"no tree answers at {path}: the run that made it has ended (a stale socket)"
        ) from None
    except OSError as e:
        s.close()
        raise ControlError(f"cannot connect to {path}: {e.strerror or e}") from None
    return s


def stream(
    path: Path, request: dict[str, Any], timeout: float | None = None
) -> Iterator[dict[str, Any]]:
    """Send one request; yield each JSON line of the answer until the server closes.

    Raises NoAnswer when `timeout` seconds pass without a line."""
    with _connect(path, timeout) as s:
        try:
            s.sendall((json.dumps(request) + "\n").encode())
            with s.makefile("rb") as lines:
                for line in lines:
                    yield json.loads(line)
        except TimeoutError:  # a socket's: only the socket is waited on here
            within = f" within {timeout:g}s" if timeout is not None else ""
            raise NoAnswer(
                f"the tree at {path} did not answer{within}; "
                "try again, or `nannytree events` to see what it is doing"
            ) from None


def call(path: Path, request: dict[str, Any], timeout: float | None = OP_TIMEOUT) -> dict[str, Any]:
    """Send one request and return its one answer."""
    for answer in stream(path, request, timeout):
        return answer
    raise ControlError(f"the tree at {path} closed the connection without answering")
