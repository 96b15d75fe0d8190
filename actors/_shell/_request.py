"""What a worker asks the launcher to start: its spec turned into a `SpawnRequest`.

Children built alike share one request (by the spec's shape and the host's state),
so the launcher defines it once for all of them (docs/scale.md).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from supervision import ChildSpec, ExitReason, ListenSocket, LogLine

from .._process._port import SpawnRequest
from . import _account
from ._sd_notify import NotifyEndpoint

# An sd_notify child's first process that exited 0 leaving a process behind: how long
# its MAINPID= is waited for (it crosses the host's threads on its way to the launcher,
# which a loaded machine delays: 1 s, then 5 s beside four CPU hogs, were outrun). Only
# a daemon that never says MAINPID= waits it out, before its error.
MAINPID_GRACE = 15.0


class StartProblem(Exception):
    """A start that cannot happen, and why (the reason its supervisor is told)."""

    def __init__(self, reason: ExitReason) -> None:
        super().__init__(reason.message)
        self.reason = reason


def pickled_target(spec: ChildSpec) -> bytes:
    """A Python child's target, args and kwargs, pickled once; a field that cannot be
    pickled is named."""
    import cloudpickle  # here: a tree of commands never loads it (3 MB of the host)

    try:
        return bytes(cloudpickle.dumps((spec.target, spec.args, spec.kwargs)))
    except Exception:
        for name, value in (("target", spec.target), ("args", spec.args), ("kwargs", spec.kwargs)):
            try:
                cloudpickle.dumps(value)
            except Exception as e:
                raise StartProblem(
                    ExitReason.start_failure(
                        f"field {name!r}: cannot be pickled ({type(e).__name__}: {e}); "
                        "pass plain values, and create locks, sockets and files "
                        "inside the target"
                    )
                ) from None
        raise


def request_shape(spec: ChildSpec, payload: bytes | None) -> tuple[Any, ...] | None:
    """What of the spec goes into the request (all but the id); None when the request
    is the child's alone (a NOTIFY_SOCKET of its own in its env)."""
    if spec.notify_socket:
        return None
    what = tuple(spec.command) if spec.command is not None else payload
    return (
        what,
        spec.inherit_env,
        tuple(sorted((spec.env or {}).items())),
        spec.cwd,
        spec.stdout,
        spec.stderr,
        spec.pid_file,
        spec.start_timeout if spec.pid_file is not None else None,
        spec.fresh_interpreter,
        _tee(spec),
        tuple(_log_fields(spec).items()),
        spec.sockets,
        spec.user,
        spec.group,
        _limits(spec),
        spec.no_new_privileges,
    )


def _log_fields(spec: ChildSpec) -> dict[str, Any]:
    """How the launcher keeps the child's files (docs/logs.md); unset is off."""
    return {
        "log_max_bytes": spec.log_max_bytes or 0,
        "log_backups": spec.log_backups or 0,
        "log_timestamps": bool(spec.log_timestamps),
    }


def _limits(spec: ChildSpec) -> tuple[tuple[str, int, int], ...]:
    """The spec's limits as setrlimit takes them (-1: infinity)."""
    return tuple(
        (name, -1 if soft is None else soft, -1 if hard is None else hard)
        for name, (soft, hard) in sorted((spec.limits or {}).items())
    )


def _tee(spec: ChildSpec) -> tuple[int, ...]:
    """The streams the launcher tees: stderr always (its tail explains an exit), and
    stdout too when a readiness reads it (docs/health.md), or when the launcher keeps
    its file (rotated or stamped: docs/logs.md)."""
    if spec.log_max_bytes or spec.log_timestamps:
        return (1, 2)
    if isinstance(spec.ready, LogLine):
        return tuple(sorted({2, *spec.ready.streams}))
    return (2,)


def build_request(
    spec: ChildSpec, payload: bytes | None, notify: NotifyEndpoint | None
) -> SpawnRequest:
    """The request, in the host's state now (its environment, cwd, sys.path, argv)."""
    try:
        account = _account.resolve(spec)
    except _account.AccountError as e:
        raise StartProblem(ExitReason.start_failure(str(e))) from None
    env = _account.child_env(spec, account)
    if notify is not None:
        env.update(notify.env())
    if spec.pid_file is not None:
        extra: dict[str, Any] = {
            "pid_file": os.fspath(spec.pid_file),
            "pid_timeout": spec.start_timeout,
        }
    elif spec.notify_socket:
        extra = {"follow_grace": MAINPID_GRACE}
        if spec.watchdog is not None:
            extra["pid_env"] = "WATCHDOG_PID"  # as systemd sets it, with WATCHDOG_USEC
    else:
        extra = {}
    common: dict[str, Any] = {
        "env": env,
        "cwd": os.fspath(spec.cwd) if spec.cwd is not None else os.getcwd(),
        "stdout": os.fspath(spec.stdout) if spec.stdout is not None else None,
        "stderr": os.fspath(spec.stderr) if spec.stderr is not None else None,
        "name": spec.id,
        "tee": _tee(spec),
        **_log_fields(spec),
        "sockets": tuple(
            (s.name or spec.id, s.listen, s.backlog)
            for s in spec.sockets
            if isinstance(s, ListenSocket)  # all of them, once the spec is checked
        ),
        # Not root: resolve() allowed only our own ids, which need no change (and
        # setgroups would be refused).
        "account": None if account is None or os.geteuid() != 0 else account[0],
        "limits": _limits(spec),
        "no_new_privs": spec.no_new_privileges,
    }
    if spec.command is not None:
        return SpawnRequest(command=list(spec.command), **common, **extra)
    assert payload is not None
    return SpawnRequest(
        payload=payload,
        sys_path=list(sys.path),
        argv=list(sys.argv),
        fresh_interpreter=spec.fresh_interpreter,
        **common,
    )
