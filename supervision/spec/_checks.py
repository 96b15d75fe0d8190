"""One small check per field of a spec, run in order when the spec is built.

Each reads one field of the spec being built (or one rule between two), raises
SpecError naming the child and the field, and stores the normalised value. A check
takes the spec as `Any`: this module sits below _spec.py, whose `ChildSpec` and
`SupervisorSpec` run these checks in `__post_init__`.
"""

from __future__ import annotations

import math
import os
import signal as _signal
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._errors import SpecError
from ._daemonize import asks_to_daemonize
from ._fields import (
    BRUTAL_KILL,
    INFINITY,
    KILL_MODES,
    READY_MODES,
    ReadyFile,
    Reload,
    Restart,
    _check_backoff,
    _check_bool,
    _check_positive,
    _check_shutdown,
    _check_signal,
    _enum,
    _put,
    as_reload,
)
from ._limits import check_limits
from ._probes import (
    PROBES,
    ExecProbe,
    Liveness,
    LogLine,
    check_root_program,
)
from ._restart_limit import as_restart_limit
from ._sockets import as_sockets, check_account, check_socket_probes

# -- one small check per field --------------------------------------------------------
# Each check reads one field (or one rule between two), raises SpecError naming the
# child and the field, and stores the normalised value. They run in this order, so a
# check may rely on the fields checked before it.

_NOT_PERMANENT = "a permanent child cannot be significant; make it transient or temporary"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _refuse_nul(value: Any, cid: str, name: str, what: str) -> None:
    """The OS takes C strings: a NUL byte would end one early (exec refuses it)."""
    text = os.fspath(value)
    if ("\0" if isinstance(text, str) else b"\0") in text:
        raise SpecError(cid, name, value, f"{what} cannot contain NUL bytes ('\\0')")


def _child_target(spec: Any, cid: str) -> None:
    if (spec.target is None) == (spec.command is None):
        raise SpecError(
            cid,
            "target",
            spec.target,
            "give exactly one of target= (a Python callable) or command= (an argv list)",
        )
    if spec.target is not None and not callable(spec.target):
        raise SpecError(cid, "target", spec.target, "expected a callable")


def _child_command(spec: Any, cid: str) -> None:
    if spec.command is None:
        return
    if isinstance(spec.command, str | bytes) or not isinstance(spec.command, Iterable):
        raise SpecError(
            cid,
            "command",
            spec.command,
            "expected a list of arguments, e.g. ['sleep', '10'] "
            "(for a shell line use ['sh', '-c', line])",
        )
    command = tuple(spec.command)
    if not command or not all(isinstance(a, str) for a in command):
        raise SpecError(cid, "command", spec.command, "expected a non-empty list of str")
    for arg in command:
        _refuse_nul(arg, cid, "command", "an argument")
    _put(spec, "command", command)


def _child_args(spec: Any, cid: str) -> None:
    if isinstance(spec.args, str | bytes) or not isinstance(spec.args, Iterable):
        raise SpecError(cid, "args", spec.args, "expected a tuple of arguments")
    _put(spec, "args", tuple(spec.args))


def _child_kwargs(spec: Any, cid: str) -> None:
    if not isinstance(spec.kwargs, Mapping):
        raise SpecError(cid, "kwargs", spec.kwargs, "expected a mapping of keyword arguments")
    for key in spec.kwargs:
        if not isinstance(key, str):
            raise SpecError(
                cid,
                "kwargs",
                key,
                "keyword argument names must be str (the child is called as target(**kwargs)); "
                "pass other keys inside one argument, e.g. kwargs={'table': {...}}",
            )
    _put(spec, "kwargs", dict(spec.kwargs))


def _child_restart(spec: Any, cid: str) -> None:
    _put(spec, "restart", _enum(Restart, spec.restart, cid, "restart"))


def _child_shutdown(spec: Any, cid: str) -> None:
    _put(spec, "shutdown", _check_shutdown(spec.shutdown, cid))


def _child_significant(spec: Any, cid: str) -> None:
    _check_bool(spec.significant, cid, "significant")
    if spec.significant and spec.restart is Restart.PERMANENT:
        raise SpecError(cid, "significant", True, _NOT_PERMANENT)


def _child_required(spec: Any, cid: str) -> None:
    _check_bool(spec.required, cid, "required")


def _child_env(spec: Any, cid: str) -> None:
    if spec.env is None:
        return
    if not isinstance(spec.env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in spec.env.items()
    ):
        raise SpecError(cid, "env", spec.env, "expected a mapping of str to str")
    for name, value in spec.env.items():
        if not name or "=" in name or "\0" in name:
            raise SpecError(
                cid,
                "env",
                name,
                "an environment variable name must be non-empty, without '=' or NUL bytes",
            )
        _refuse_nul(value, cid, "env", f"the value of {name}")
    _put(spec, "env", dict(spec.env))


def _child_inherit_env(spec: Any, cid: str) -> None:
    _check_bool(spec.inherit_env, cid, "inherit_env")


def _child_cwd(spec: Any, cid: str) -> None:
    if spec.cwd is not None and not isinstance(spec.cwd, str | os.PathLike):
        raise SpecError(cid, "cwd", spec.cwd, "expected a directory path")
    if spec.cwd is not None:
        _refuse_nul(spec.cwd, cid, "cwd", "a path")


def _child_ready(spec: Any, cid: str) -> None:
    ready = spec.ready
    if _is_number(ready):
        if not math.isfinite(ready) or ready <= 0:
            raise SpecError(cid, "ready", ready, f"expected {READY_MODES}")
        _put(spec, "ready", float(ready))
    elif isinstance(ready, ReadyFile):
        if not isinstance(ready.path, str | os.PathLike) or not os.fspath(ready.path):
            raise SpecError(cid, "ready", ready, "ReadyFile takes a file path")
        _refuse_nul(ready.path, cid, "ready", "a path")
    elif isinstance(ready, (*PROBES, LogLine)):
        pass  # checked when built
    elif ready not in ("started", "notify", "sd_notify", "exited"):
        raise SpecError(cid, "ready", ready, f"expected {READY_MODES}")
    if ready == "exited" and spec.restart is Restart.PERMANENT:
        raise SpecError(
            cid,
            "ready",
            "exited",
            "a one-shot step ends when done, and a permanent child would be started again: "
            'use restart="transient" (restarted if it fails) or "temporary"',
        )
    if ready == "notify" and spec.command is not None:
        raise SpecError(
            cid,
            "ready",
            "notify",
            "only a target= child can call actors.child.ready(); for a command use "
            '"sd_notify", seconds of uptime or ReadyFile(path)',
        )
    if ready == "sd_notify" and spec.command is None:
        raise SpecError(
            cid,
            "ready",
            "sd_notify",
            'a target= child says it is ready with actors.child.ready(): use ready="notify"',
        )


def _child_liveness(spec: Any, cid: str) -> None:
    value = spec.liveness
    if value is None:
        return
    if not isinstance(value, Liveness):
        raise SpecError(cid, "liveness", value, "expected None or Liveness(probe, ...)")
    if spec.ready == "exited":
        raise SpecError(
            cid, "liveness", value, 'a one-shot step (ready="exited") is not probed: drop liveness'
        )


def _child_min_uptime(spec: Any, cid: str) -> None:
    value = spec.min_uptime
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        raise SpecError(cid, "min_uptime", value, "expected seconds >= 0")
    _put(spec, "min_uptime", float(value))


def _child_start_timeout(spec: Any, cid: str) -> None:
    _put(spec, "start_timeout", _check_positive(spec.start_timeout, cid, "start_timeout"))
    if isinstance(spec.ready, float) and spec.ready >= spec.start_timeout:
        raise SpecError(
            cid,
            "ready",
            spec.ready,
            f"seconds of uptime must be below start_timeout={spec.start_timeout}; "
            "raise start_timeout",
        )


def _child_memory_limit(spec: Any, cid: str) -> None:
    value = spec.memory_limit
    if value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or value < 4096
    ):
        raise SpecError(cid, "memory_limit", value, "expected bytes >= 4096 (one page), or None")


def _child_output(spec: Any, cid: str) -> None:
    for name in ("stdout", "stderr"):
        value = getattr(spec, name)
        if value is not None and not isinstance(value, str | os.PathLike):
            raise SpecError(cid, name, value, 'expected None (inherit), a file path, or "capture"')
        if value is not None:
            _refuse_nul(value, cid, name, "a path")


def _child_normal_exit_codes(spec: Any, cid: str) -> None:
    codes = spec.normal_exit_codes
    if isinstance(codes, int) or not isinstance(codes, Iterable):
        raise SpecError(cid, "normal_exit_codes", codes, "expected a set of ints, e.g. {0}")
    codes = tuple(codes)
    if not all(_is_number(c) and isinstance(c, int) and 0 <= c <= 255 for c in codes):
        raise SpecError(
            cid, "normal_exit_codes", spec.normal_exit_codes, "expected exit codes from 0 to 255"
        )
    _put(spec, "normal_exit_codes", frozenset(codes))


def _child_fresh_interpreter(spec: Any, cid: str) -> None:
    if spec.fresh_interpreter and spec.command is not None:
        raise SpecError(
            cid, "fresh_interpreter", spec.fresh_interpreter, "only a target= child can ask for it"
        )
    _check_bool(spec.fresh_interpreter, cid, "fresh_interpreter")


def _child_warm_start(spec: Any, cid: str) -> None:
    _check_bool(spec.warm_start, cid, "warm_start")
    if spec.warm_start and (spec.command is not None or spec.fresh_interpreter):
        raise SpecError(
            cid,
            "warm_start",
            True,
            "only a target= child forked from the launcher keeps a warm standby; "
            "drop command= or fresh_interpreter=True",
        )


def _child_backoff(spec: Any, cid: str) -> None:
    _check_backoff(spec.backoff, cid)


def _child_stop_signal(spec: Any, cid: str) -> None:
    # SIGSTOP never ends a process: the stop would always wait out `shutdown`.
    _put(
        spec, "stop_signal", _check_signal(spec.stop_signal, cid, "stop_signal", (_signal.SIGSTOP,))
    )


def _child_kill_mode(spec: Any, cid: str) -> None:
    if spec.kill_mode not in KILL_MODES:
        raise SpecError(
            cid,
            "kill_mode",
            spec.kill_mode,
            'expected "group" (stop signal to the process group) or "main" (to the main '
            "process only, the group killed when shutdown runs out)",
        )


def _child_brutal_kill(spec: Any, cid: str) -> None:
    # brutal_kill sends SIGKILL to the group at once: a stop signal or mode would never apply.
    if spec.shutdown != BRUTAL_KILL:
        return
    if spec.stop_signal != _signal.SIGTERM:
        raise SpecError(
            cid,
            "stop_signal",
            spec.stop_signal,
            'shutdown="brutal_kill" sends SIGKILL at once, so no stop signal is ever sent; '
            "give shutdown seconds to use it",
        )
    if spec.kill_mode != "group":
        raise SpecError(
            cid,
            "kill_mode",
            spec.kill_mode,
            'shutdown="brutal_kill" kills the whole group at once; give shutdown seconds '
            'to use kill_mode="main"',
        )


def _child_watchdog(spec: Any, cid: str) -> None:
    if spec.watchdog is None:
        return
    _put(spec, "watchdog", _check_positive(spec.watchdog, cid, "watchdog"))
    if spec.shutdown == INFINITY:
        raise SpecError(
            cid,
            "watchdog",
            spec.watchdog,
            'a hung child may never answer its stop signal, and shutdown="infinity" '
            'would wait for it forever: give shutdown seconds or "brutal_kill"',
        )


def _child_pid_file(spec: Any, cid: str) -> None:
    value = spec.pid_file
    if value is None:
        return
    if not isinstance(value, str | os.PathLike) or not os.fspath(value):
        raise SpecError(cid, "pid_file", value, "expected a file path, or None")
    _refuse_nul(value, cid, "pid_file", "a path")
    if spec.command is None:
        raise SpecError(
            cid,
            "pid_file",
            value,
            "only a command= child can fork itself into the background; a target runs "
            "in the foreground",
        )
    if spec.ready != "started":
        raise SpecError(
            cid,
            "pid_file",
            value,
            "with pid_file the child is ready once the pid file names a live process; "
            f"drop ready={spec.ready!r}",
        )
    _put(spec, "pid_file", os.fspath(value))


def _child_reload(spec: Any, cid: str) -> None:
    try:
        reload = as_reload(spec.reload)
    except SpecError as e:
        raise SpecError(cid, e.field, e.value, e.expected) from None
    _put(spec, "reload", reload)


def _child_restart_limit(spec: Any, cid: str) -> None:
    limit = as_restart_limit(spec.restart_limit, cid)
    if limit is not None and spec.restart is Restart.TEMPORARY:
        raise SpecError(
            cid,
            "restart_limit",
            limit,
            "a temporary child is never restarted; drop restart_limit or give restart = "
            '"permanent" or "transient"',
        )
    _put(spec, "restart_limit", limit)


def _child_logs(spec: Any, cid: str) -> None:
    size = spec.log_max_bytes
    if size is not None and (type(size) is not int or (size != 0 and size < 1024)):
        raise SpecError(
            cid, "log_max_bytes", size, "expected bytes >= 1024, 0 (never rotate), or None"
        )
    backups = spec.log_backups
    if backups is not None and (type(backups) is not int or not 0 <= backups <= 1000):
        raise SpecError(cid, "log_backups", backups, "expected a count of older files, 0 to 1000")
    stamps = spec.log_timestamps
    if stamps is not None and type(stamps) is not bool:
        raise SpecError(cid, "log_timestamps", stamps, "expected true or false")


def _child_sockets(spec: Any, cid: str) -> None:
    sockets = as_sockets(spec.sockets, cid)
    check_socket_probes(sockets, spec.ready, spec.liveness, cid)
    _put(spec, "sockets", sockets)


def _child_account(spec: Any, cid: str) -> None:
    _put(spec, "user", check_account(spec.user, cid, "user"))
    _put(spec, "group", check_account(spec.group, cid, "group"))


def _child_confinement(spec: Any, cid: str) -> None:
    _check_bool(spec.no_new_privileges, cid, "no_new_privileges")
    _put(spec, "limits", check_limits(spec.limits, cid))


def _child_daemonize(spec: Any, cid: str) -> None:
    if spec.command is None or spec.pid_file is not None:
        return
    found = asks_to_daemonize(spec.command)
    if found is not None:
        what, fix = found
        raise SpecError(
            cid,
            "command",
            list(spec.command),
            f"{what} forks it into the background, and without pid_file its first "
            "process exits at once (reported as daemonized, restarted, again and again): "
            f"run it in the foreground ({fix}), or set pid_file to the file it writes",
        )


def _child_start_check(spec: Any, cid: str) -> None:
    check = spec.start_check
    if check is not None:
        if isinstance(check, str | bytes) or not isinstance(check, Iterable):
            raise SpecError(
                cid, "start_check", check, "expected an argv list, e.g. ['nginx', '-t']"
            )
        argv = tuple(check)
        if not argv or not all(isinstance(a, str) and "\0" not in a for a in argv):
            raise SpecError(
                cid, "start_check", check, "expected a non-empty list of str without NUL"
            )
        _put(spec, "start_check", argv)
    _put(
        spec,
        "start_check_timeout",
        _check_positive(spec.start_check_timeout, cid, "start_check_timeout"),
    )


def _child_as_root(spec: Any, cid: str) -> None:
    """A program's root opt-in: only where the child runs as someone else, and only
    with a program to run."""
    as_root = spec.start_check_as_root
    if type(as_root) is not bool:
        raise SpecError(cid, "start_check_as_root", as_root, "expected true or false")
    if as_root and spec.start_check is None:
        raise SpecError(
            cid,
            "start_check_as_root",
            True,
            "there is no start_check to run; drop start_check_as_root or give start_check",
        )
    if as_root and spec.start_check is not None:
        try:
            check_root_program(spec.start_check, True, "start_check", "start_check_as_root")
        except SpecError as e:
            raise SpecError(cid, e.field, e.value, e.expected) from None
    reload = spec.reload
    flags = {
        "start_check_as_root": as_root,
        "ready.as_root": isinstance(spec.ready, ExecProbe) and spec.ready.as_root,
        "liveness.as_root": spec.liveness is not None
        and isinstance(spec.liveness.probe, ExecProbe)
        and spec.liveness.probe.as_root,
        "reload.check_as_root": isinstance(reload, Reload) and reload.check_as_root,
    }
    if spec.user is None and spec.group is None:
        for name, on in flags.items():
            if on:
                raise SpecError(
                    cid,
                    name,
                    True,
                    "the child has no user or group, so its programs already run as "
                    "nannytree; drop it, or give the child a user",
                )


_CHILD_CHECKS: tuple[Callable[[Any, str], None], ...] = (
    _child_target,
    _child_command,
    _child_args,
    _child_kwargs,
    _child_restart,
    _child_shutdown,
    _child_significant,
    _child_required,
    _child_env,
    _child_inherit_env,
    _child_cwd,
    _child_ready,
    _child_liveness,
    _child_min_uptime,
    _child_start_timeout,
    _child_memory_limit,
    _child_output,
    _child_normal_exit_codes,
    _child_fresh_interpreter,
    _child_warm_start,
    _child_backoff,
    _child_stop_signal,
    _child_kill_mode,
    _child_brutal_kill,
    _child_watchdog,
    _child_pid_file,
    _child_reload,
    _child_restart_limit,
    _child_logs,
    _child_sockets,
    _child_account,
    _child_daemonize,
    _child_start_check,
    _child_as_root,
    _child_confinement,
)
