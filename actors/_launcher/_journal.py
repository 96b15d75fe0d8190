"""A child's stdout or stderr connected to journald, as systemd connects a service's
(`StandardOutput=journal`) and `systemd-cat` does: a stream socket to journald, a
header naming the identifier and priority, then the child's own bytes, one journal
entry a line (docs/logs.md, "The journal").

The launcher connects (it may be root; journald takes any local writer) and gives
the connected socket to the child as its fd 1 or 2: the child writes straight to
journald, no copy on the way. A destination is written `journal:<identifier>` in a
child's stdout/stderr (a file path is absolute by then, so it cannot be mistaken
for one).
"""

from __future__ import annotations

import contextlib
import os
import socket

PREFIX = "journal:"
SOCKET_ENV = "NANNYTREE_JOURNAL_SOCKET"  # another journal's stream socket (tests)
DEFAULT_SOCKET = "/run/systemd/journal/stdout"
MAX_IDENTIFIER = 64  # bytes: a SYSLOG_IDENTIFIER is a name, not a message
STDOUT_PRIORITY = 6  # LOG_INFO, as systemd gives a service's stdout
STDERR_PRIORITY = 3  # LOG_ERR
_SNDBUF = 8 << 20  # as systemd asks: a burst is kept rather than blocking the child


class JournalAbsent(OSError):
    """journald's stream socket cannot be reached; the message says so and what to do."""


def destination(identifier: str) -> str:
    """The stdout/stderr value that connects a stream to the journal as `identifier`."""
    return PREFIX + identifier


def identifier_of(target: str | os.PathLike[str] | None) -> str | None:
    """The identifier of a `journal:` destination (None: not one)."""
    if isinstance(target, str) and target.startswith(PREFIX):
        return target[len(PREFIX) :]
    return None


def sanitised(identifier: str) -> str:
    """An identifier fit for the stream header: one line (a newline would end the
    header's field and make the rest the next field), printable, bounded."""
    clean = "".join(c if c.isprintable() and not c.isspace() else "_" for c in identifier)
    data = clean.encode("utf-8", "replace")[:MAX_IDENTIFIER]
    return data.decode("utf-8", "ignore") or "nannytree"


def socket_path() -> str:
    return os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET


def header(identifier: str, priority: int) -> bytes:
    """journald's stream header (systemd's journald-stream.c): identifier, unit id
    (empty: journald finds the unit from the peer's cgroup), priority, level_prefix
    (a line may start with `<N>` to set its own), forward to syslog, kmsg, console."""
    return f"{sanitised(identifier)}\n\n{priority}\n1\n0\n0\n0\n".encode()


def connect(identifier: str, priority: int, path: str | None = None) -> int:
    """A stream socket connected to journald with its header sent: the fd to give a
    child as its stdout or stderr (close-on-exec; dup2 onto 1/2 clears it). Raises
    JournalAbsent when journald cannot be reached."""
    sock = _connected(path or socket_path())
    try:
        sock.shutdown(socket.SHUT_RD)  # journald never writes back
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SNDBUF)
        sock.sendall(header(identifier, priority))
        sock.setblocking(True)  # the child's writes block as on a slow terminal
        return sock.detach()
    finally:
        sock.close()


def journal_problem(path: str | None = None) -> str | None:
    """Why the children's output cannot go to the journal here (None: it can): a
    connection tried and closed (no header: journald logs nothing for it), as
    `check` and `run` ask before any child starts."""
    try:
        _connected(path or socket_path()).close()
    except JournalAbsent as exc:
        return exc.strerror
    return None


def _connected(where: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    sock.settimeout(5.0)  # journald answers a connect at once, or is stuck
    try:
        sock.connect(where)
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        raise JournalAbsent(
            exc.errno,
            f"journald's stream socket {where} cannot be reached ({why}): is "
            "systemd-journald running here? use --child-output auto (a log file per "
            "child) where there is no journal",
        ) from None
    return sock
