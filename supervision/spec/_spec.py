"""Child and supervisor specs: frozen, validated once, when built. One concept: the
specs and every check of their fields (a bad field names the child, the field and
the fix), which is most of its length.

Every default, in one sentence each:
- `restart` defaults to `Restart.PERMANENT`: the child is restarted whatever ends it.
- `shutdown` defaults to 5.0 seconds for a worker and "infinity" for a supervisor.
- `significant` defaults to False.
- `strategy` defaults to `Strategy.ONE_FOR_ONE`.
- `intensity` defaults to 1 and `period` to 5.0 seconds (OTP's defaults).
- `auto_shutdown` defaults to `AutoShutdown.NEVER`.
- `start_timeout` defaults to 30.0 seconds.
- `ready` defaults to "started": a child counts as started once its process runs.
- `min_uptime` defaults to 0.0 seconds: no exit counts as a failed start.
- `stdout` and `stderr` default to None: the child writes to the parent's.
- `normal_exit_codes` defaults to {0}.
- `backoff` defaults to None: a child is restarted at once, as in OTP.
- `warm_start` defaults to False.
- `stop_signal` defaults to SIGTERM, `kill_mode` to "group" (the stop signal goes
  to the child's whole process group).
- `watchdog` defaults to None: no heartbeat deadline.
- `liveness` defaults to None: no liveness probe.
- `pid_file` defaults to None: the first process is the main process.
- `reload` defaults to None: the child has no reload action.
- `sockets` defaults to (): the child inherits no listening socket.
- `user` and `group` default to None: the child runs as nannytree does.
- `placement` defaults to None: a subtree runs in its parent's process.
- `restart_limit` defaults to None: a child's restarts count only against its
  supervisor's intensity.
"""

from __future__ import annotations

import functools
import math
import os
import signal as _signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeAlias

from .._errors import SpecError
from ._daemonize import asks_to_daemonize
from ._limits import check_limits
from ._placement import Placement
from ._probes import (
    PROBES,
    ExecProbe,
    HttpProbe,
    Liveness,
    LogLine,
    TcpProbe,
    check_root_program,
)
from ._restart_limit import RestartLimit, as_restart_limit
from ._sockets import ListenSocket, as_sockets, check_account, check_socket_probes


class Restart(StrEnum):
    PERMANENT = "permanent"  # restarted on any exit
    TRANSIENT = "transient"  # restarted only after an abnormal exit
    TEMPORARY = "temporary"  # never restarted; forgotten when it ends


class Strategy(StrEnum):
    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"
    SIMPLE_ONE_FOR_ONE = "simple_one_for_one"


class AutoShutdown(StrEnum):
    NEVER = "never"
    ANY_SIGNIFICANT = "any_significant"
    ALL_SIGNIFICANT = "all_significant"


BRUTAL_KILL = "brutal_kill"
INFINITY = "infinity"
Shutdown: TypeAlias = float | Literal["brutal_kill", "infinity"]
CAPTURE = "capture"


@dataclass(frozen=True)
class ReadyFile:
    """Readiness by file: the child is ready once `path` exists (removed before each start)."""

    path: str | os.PathLike[str]


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff between restarts, beyond OTP (off unless a spec sets it).

    The n-th consecutive failed run of a child waits
    min(max, initial * factor ** (n - 1)) seconds, +/- `jitter` (a fraction),
    before it is restarted; a run that lasted `reset_after` seconds or more
    starts the count again. Every default: initial 0.1 s, factor 2.0, max 30.0 s,
    jitter 0.1, reset_after 60.0 s. Restarts still count against the
    supervisor's intensity, when decided.
    """

    initial: float = 0.1
    factor: float = 2.0
    max: float = 30.0
    jitter: float = 0.1
    reset_after: float = 60.0

    def __post_init__(self) -> None:
        for name, low in (("initial", 0.0), ("max", 0.0), ("reset_after", 0.0)):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and value >= low)
            ):
                raise SpecError(None, f"backoff.{name}", value, "expected seconds >= 0")
            object.__setattr__(self, name, float(value))
        if (
            isinstance(self.factor, bool)
            or not isinstance(self.factor, int | float)
            or not (math.isfinite(self.factor) and self.factor >= 1)
        ):
            raise SpecError(None, "backoff.factor", self.factor, "expected a number >= 1")
        if (
            isinstance(self.jitter, bool)
            or not isinstance(self.jitter, int | float)
            or not (0 <= self.jitter < 1)
        ):
            raise SpecError(None, "backoff.jitter", self.jitter, "expected a fraction in [0, 1)")
        if self.max < self.initial:
            raise SpecError(None, "backoff.max", self.max, f"expected >= initial={self.initial}")

    def delay(self, failures: int, unit: float = 0.5) -> float:
        """Seconds before the restart that follows `failures` consecutive failures.

        `unit` in [0, 1) picks the jitter (0.5: none).
        """
        base = min(self.max, self.initial * self.factor ** max(failures - 1, 0))
        return max(0.0, base * (1 + self.jitter * (2 * unit - 1)))


def _check_backoff(value: Any, child: str) -> Backoff | None:
    if value is not None and not isinstance(value, Backoff):
        raise SpecError(child, "backoff", value, "expected None or Backoff(...)")
    return value


Ready: TypeAlias = (
    Literal["started", "notify", "sd_notify", "exited"]
    | float
    | ReadyFile
    | TcpProbe
    | HttpProbe
    | ExecProbe
    | LogLine
)
READY_MODES = (
    '"started", "notify" (targets), "sd_notify" (commands), "exited" (one-shot steps), '
    "seconds of uptime > 0, ReadyFile(path), TcpProbe(port), HttpProbe(url), "
    "ExecProbe(argv) or LogLine(regex)"
)
KillMode: TypeAlias = Literal["group", "main"]
KILL_MODES = ("group", "main")
SignalLike: TypeAlias = int | str


@functools.cache
def _valid_signals() -> frozenset[int]:
    # signal.valid_signals() builds a set of enums on every call (about 0.2 ms): once.
    return frozenset(int(s) for s in _signal.valid_signals())


def parse_signal(value: Any) -> int:
    """A signal number from a number or a name ("QUIT", "SIGQUIT", "sigquit").

    Raises ValueError when `value` names no signal of this platform.
    """
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        if value in _valid_signals():
            return int(value)
        raise ValueError(value)
    if isinstance(value, str) and value.isascii():
        name = value.strip().upper()
        name = name if name.startswith("SIG") else "SIG" + name
        member = _signal.Signals.__members__.get(name)
        if member is not None and not name.startswith("SIG_"):
            return int(member)
    raise ValueError(value)


def _check_signal(value: Any, child: str | None, name: str, refused: tuple[int, ...]) -> int:
    try:
        number = parse_signal(value)
    except ValueError:
        raise SpecError(
            child, name, value, 'expected a signal name such as "TERM", "SIGQUIT", or its number'
        ) from None
    if number in refused:
        names = ", ".join(_signal.Signals(n).name for n in refused)
        raise SpecError(child, name, value, f"expected a signal other than {names}")
    return number


@dataclass(frozen=True)
class Reload:
    """How to reload a child in place (`reload_child(id)`), as systemd's ExecReload=.

    `signal` (a name such as "HUP" or a number) is sent to the child's main process;
    when `check` (an argv, e.g. ["nginx", "-t"]) is given it runs first, as the child
    (its user's ids, its environment and working directory), and a non-zero exit or a
    run longer than `check_timeout` seconds refuses the reload. `check_as_root=True`
    (only for a child with `user` or `group`, as systemd's `+` prefix) runs the check
    as nannytree instead, with nannytree's environment, in `/`. Every default:
    `signal` SIGHUP, `check` None (no check), `check_timeout` 30.0 s, `check_as_root`
    False. Stored with `signal` as an int and `check` as a tuple.
    """

    signal: SignalLike = _signal.SIGHUP
    check: Sequence[str] | None = None
    check_timeout: float = 30.0
    check_as_root: bool = False

    def __post_init__(self) -> None:
        number = _check_signal(
            self.signal, None, "reload.signal", (_signal.SIGKILL, _signal.SIGSTOP)
        )
        object.__setattr__(self, "signal", number)
        if self.check is not None:
            check = self.check
            if isinstance(check, str | bytes) or not isinstance(check, Iterable):
                raise SpecError(
                    None, "reload.check", check, "expected an argv list, e.g. ['nginx', '-t']"
                )
            argv = tuple(check)
            if not argv or not all(isinstance(a, str) and "\0" not in a for a in argv):
                raise SpecError(
                    None, "reload.check", check, "expected a non-empty list of str without NUL"
                )
            object.__setattr__(self, "check", argv)
            check_root_program(argv, self.check_as_root, "reload.check", "reload.check_as_root")
        elif self.check_as_root is not False:
            raise SpecError(
                None,
                "reload.check_as_root",
                self.check_as_root,
                "there is no check to run; drop check_as_root or give check",
            )
        timeout = self.check_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise SpecError(None, "reload.check_timeout", timeout, "expected seconds > 0")
        if not (math.isfinite(timeout) and timeout > 0):
            raise SpecError(None, "reload.check_timeout", timeout, "expected seconds > 0")
        object.__setattr__(self, "check_timeout", float(timeout))


def as_reload(value: Any) -> Reload | None:
    """The shorthands `reload=` takes: None, Reload(...), a signal, or (check argv, signal)."""
    if value is None or isinstance(value, Reload):
        return value
    if isinstance(value, int | str):
        return Reload(signal=value)
    if isinstance(value, tuple | list) and len(value) == 2 and isinstance(value[1], int | str):
        return Reload(signal=value[1], check=value[0])
    raise SpecError(
        None,
        "reload",
        value,
        'expected None, a signal ("HUP"), (check argv, signal) such as '
        '(["nginx", "-t"], "HUP"), or Reload(signal=..., check=...)',
    )


def _enum(enum: type[StrEnum], value: Any, child: str | None, name: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(f"{enum.__name__}.{m.name}" for m in enum)
        raise SpecError(child, name, value, f"expected one of {allowed}") from None


def _check_shutdown(value: Any, child: str | None) -> Shutdown:
    if value in (BRUTAL_KILL, INFINITY):
        return value  # type: ignore[no-any-return]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(
            child, "shutdown", value, 'expected seconds >= 0, "brutal_kill" or "infinity"'
        )
    if not math.isfinite(value) or value < 0:
        raise SpecError(
            child, "shutdown", value, 'expected seconds >= 0 (use "infinity" to wait forever)'
        )
    return float(value)


def _check_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise SpecError(None, "id", value, "expected a non-empty string")
    if "/" in value:
        raise SpecError(
            value, "id", value, "'/' separates supervisors in paths; pick an id without it"
        )
    return value


def _check_positive(value: Any, child: str, name: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise SpecError(child, name, value, "expected a number of seconds > 0")
    if not math.isfinite(value):
        raise SpecError(child, name, value, "expected a finite number of seconds")
    return float(value)


def _check_bool(value: Any, child: str, name: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(child, name, value, "expected True or False")
    return value


@dataclass(frozen=True)
class ChildSpec:
    """One supervised OS process: a Python `target` or a `command` argv, not both.

    - `target`, `args`, `kwargs`: a callable run in the child as target(*args, **kwargs);
      shipped with cloudpickle, so lambdas and closures work.
    - `command`: an argv list, e.g. ["python3", "-m", "http.server"]; no shell.
    - `restart`: Restart.PERMANENT (default), TRANSIENT or TEMPORARY.
    - `shutdown`: seconds between SIGTERM and SIGKILL (default 5.0), "brutal_kill"
      (SIGKILL at once) or "infinity" (SIGTERM, then wait forever).
    - `significant`: for a supervisor with auto_shutdown (default False).
    - `env`: variables added to the parent's environment (or replacing it when
      `inherit_env=False`); `cwd`: working directory (default: the parent's). A child
      with `user` gets only PATH, LANG, LANGUAGE, TZ and LC_* of the parent's
      environment (the rest may be root's own: HOME, XDG_RUNTIME_DIR, SUDO_*), then
      its user's HOME, USER, LOGNAME and SHELL, then `env`, which wins: pass anything
      else on purpose in `env`. Its probes and checks get the same.
    - `ready`: when the child counts as started, so that its next sibling may start:
      "started" (default: once its process runs), "notify" (once it calls
      actors.child.ready()), a number of seconds (once it has stayed up that long) or
      ReadyFile(path) (once the file exists), a probe: TcpProbe(port) (its port
      accepts a connection), HttpProbe(url) (a GET answers 200-399), ExecProbe(argv)
      (a command exits 0), LogLine(regex) (a line of its output matches), or
      "exited" (a one-shot step: once it exits with a normal code; transient or
      temporary only). `start_timeout` (default 30.0 s) bounds the wait, and a child
      not ready by then fails to start (reason start_timeout); a child that exits
      while it is awaited fails to start at once (reason start_failure, with its
      stderr tail). See docs/health.md.
    - `min_uptime`: an exit sooner than this after the start counts as a failed start
      (reason start_failure; default 0.0: never), as supervisord's startsecs.
    - `memory_limit`: bytes of RSS, or None (default: no limit).
    - `stdout`, `stderr`: None (default: the parent's), a file path to append to, or
      "capture" (kept in a bounded buffer, read with the nanny's read_output(); the
      tail of captured stderr travels with an abnormal exit reason).
    - `normal_exit_codes`: exit codes that count as a normal exit (default {0}).
    - `fresh_interpreter`: run a target in a new interpreter instead of a fork of the
      launcher (slower; default False).
    - `warm_start`: keep the next incarnation forked ahead, its target unpickled and
      imports done, waiting for the word to run (restarts skip the fork and the
      imports; one idle process more per child; default False). With `user` or
      `group`, the standby is a fresh interpreter of that user's, started ahead.
    - `backoff`: a Backoff(...) to wait between restarts, beyond OTP (default None:
      restart at once, as OTP).
    - `stop_signal`: the signal that asks the child to stop, a name ("QUIT",
      "SIGQUIT") or a number (default SIGTERM); stored as an int. SIGKILL follows
      after `shutdown` seconds.
    - `kill_mode`: "group" (default: the stop signal goes to the child's process
      group) or "main" (to the main process only; the group is SIGKILLed when
      `shutdown` runs out, as systemd's KillMode=mixed). Both are refused with
      shutdown="brutal_kill", which SIGKILLs the group at once.
    - `ready="sd_notify"` (commands only): the child gets a private NOTIFY_SOCKET
      and counts as started once it sends READY=1, as systemd's Type=notify.
    - `watchdog`: seconds (> 0) within which the child must send WATCHDOG=1 (a
      command, over NOTIFY_SOCKET, with WATCHDOG_USEC set) or call
      actors.child.heartbeat() (a target), or None (default: no watchdog); a
      child that misses it is stopped with the abnormal reason `watchdog`.
    - `liveness`: None (default) or Liveness(probe, failures=3, initial_delay=0.0):
      once ready, the child is probed every probe.period seconds (default 10); after
      `failures` failed probes in a row it is stopped as by its stop signal and
      `shutdown`, with the abnormal reason `unhealthy`, and restarted by its
      supervisor's strategy within its intensity.
    - `pid_file` (commands only): for a program that forks itself into the
      background (systemd's Type=forking): it counts as started once its first
      process exits 0 and this file names a live process of its tree, which is
      then the main process (default None). As with `stdout`, a relative path is
      resolved in the supervisor's working directory, not the child's `cwd`.
    - `reload`: None (default), a signal ("HUP"), (check argv, signal) such as
      (["nginx", "-t"], "HUP"), or Reload(signal=..., check=...): what
      reload_child(id) does.
    - `restart_limit`: None (default) or RestartLimit(intensity, period), also
      written (intensity, period): the child's own restart intensity, OTP's
      pattern of a transient supervisor of its own. One restart too many leaves it
      stopped in state "failed" (event child_failed); its siblings keep running and
      its supervisor's intensity is never charged for its restarts. See
      docs/otp-semantics.md section 4.1.
    - `log_max_bytes`, `log_backups`, `log_timestamps`: how the launcher keeps the
      child's `stdout`/`stderr` file (docs/logs.md): rotated before it passes
      log_max_bytes (0: never) into log_backups older files (file.1 ... file.N),
      each line stamped with its UTC time. None (default): `nannytree run`'s
      defaults, or off.
    - `sockets`: ListenSocket(listen, name=...) values (or tables of the same keys)
      that nannytree binds once and passes to every incarnation, systemd's way: fds
      from 3, LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES (default (): none). A restart
      then refuses no connection. See docs/sockets.md.
    - `user`, `group`: a name or a numeric id (default None: nannytree's own); the
      child runs as that user, with its groups, HOME, USER, LOGNAME and SHELL and a
      clean environment (see `env`), as systemd's User=. Only when nannytree runs as
      root. Every program run for the child (exec probes, start_check, the reload
      check) runs as that user too, with the child's environment and cwd. A target
      taking on another user runs in a fresh interpreter (it holds nothing of the
      launcher's other children).
    - `start_check`: an argv run before each start, as the child (its user, env and
      cwd), such as ["nginx", "-t"] (systemd's ExecStartPre=); one that fails or runs
      over `start_check_timeout` seconds (default 30.0) fails the start, with its
      output (default None: no check). `start_check_as_root=True` (only with `user`
      or `group`; systemd's `+` prefix) runs it as nannytree instead, with
      nannytree's environment, in `/` (default False). A command asking to daemonize
      in its own arguments (nginx -g 'daemon on;', --daemonize yes, memcached -d)
      needs `pid_file`.
    - `no_new_privileges`: the child and its descendants can never gain privileges
      through exec (setuid binaries, file capabilities), as systemd's
      NoNewPrivileges= (default False).
    - `limits`: resource limits set before the child starts, systemd's LimitNOFILE=
      and friends: {"nofile": 1024, "core": 0, "as": "4G", "nproc": "64:128"}; a
      number (soft and hard), "infinity", or "SOFT:HARD" (default None: the limits
      nannytree was started with). See docs/launcher.md.
    """

    id: str
    target: Callable[..., Any] | None = None
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    command: Sequence[str] | None = None
    restart: Restart = Restart.PERMANENT
    shutdown: Shutdown = 5.0
    significant: bool = False
    env: Mapping[str, str] | None = None
    inherit_env: bool = True
    cwd: str | os.PathLike[str] | None = None
    ready: Ready = "started"
    start_timeout: float = 30.0
    min_uptime: float = 0.0
    memory_limit: int | None = None
    stdout: str | os.PathLike[str] | None = None
    stderr: str | os.PathLike[str] | None = None
    normal_exit_codes: Iterable[int] = frozenset({0})
    fresh_interpreter: bool = False
    warm_start: bool = False
    backoff: Backoff | None = None
    stop_signal: SignalLike = _signal.SIGTERM
    kill_mode: KillMode = "group"
    watchdog: float | None = None
    liveness: Liveness | None = None
    pid_file: str | os.PathLike[str] | None = None
    reload: Reload | SignalLike | tuple[Sequence[str], SignalLike] | None = None
    restart_limit: RestartLimit | tuple[int, float] | None = None
    log_max_bytes: int | None = None
    log_backups: int | None = None
    log_timestamps: bool | None = None
    sockets: Sequence[ListenSocket | Mapping[str, Any]] = ()
    user: str | int | None = None
    group: str | int | None = None
    start_check: Sequence[str] | None = None
    start_check_timeout: float = 30.0
    start_check_as_root: bool = False
    no_new_privileges: bool = False
    limits: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        cid = _check_id(self.id)
        for check in _CHILD_CHECKS:
            check(self, cid)

    @property
    def type(self) -> Literal["worker"]:
        return "worker"

    @property
    def notify_socket(self) -> bool:
        """True when the child gets a NOTIFY_SOCKET: a command with sd_notify or a watchdog."""
        return self.command is not None and (self.ready == "sd_notify" or self.watchdog is not None)


@dataclass(frozen=True)
class SupervisorSpec:
    """A supervisor: its flags and its children (ChildSpecs and nested SupervisorSpecs).

    - `strategy`: Strategy.ONE_FOR_ONE (default), ONE_FOR_ALL, REST_FOR_ONE or
      SIMPLE_ONE_FOR_ONE (then `children` is exactly one template).
    - `intensity`, `period`: at most `intensity` restarts (default 1) within any
      `period` seconds (default 5.0); one more and the supervisor gives up.
    - `auto_shutdown`: AutoShutdown.NEVER (default), ANY_SIGNIFICANT or ALL_SIGNIFICANT.
    - `max_children`: simple_one_for_one only: at most this many children (default None).
    - As a child of another supervisor: `restart` (default PERMANENT), `shutdown`
      (default "infinity"), `significant` (default False) and `backoff` (default None).
    - `placement` (default None): a Placement runs this subtree on another node,
      through the tree's engine (see actors.ray.RayEngine); only subtrees cross hosts.
    """

    id: str
    strategy: Strategy = Strategy.ONE_FOR_ONE
    intensity: int = 1
    period: float = 5.0
    children: Sequence[ChildSpec | SupervisorSpec] = ()
    auto_shutdown: AutoShutdown = AutoShutdown.NEVER
    max_children: int | None = None
    restart: Restart = Restart.PERMANENT
    shutdown: Shutdown = "infinity"
    significant: bool = False
    backoff: Backoff | None = None
    placement: Placement | None = None  # multi-host: run this subtree on another node

    def __post_init__(self) -> None:
        sid = _check_id(self.id)
        for check in _SUPERVISOR_CHECKS:
            check(self, sid)

    @property
    def type(self) -> Literal["supervisor"]:
        return "supervisor"


AnySpec: TypeAlias = ChildSpec | SupervisorSpec


def check_childspecs(
    specs: Iterable[AnySpec],
    auto_shutdown: AutoShutdown | None = None,
    *,
    supervisor: str | None = None,
) -> None:
    """Raise SpecError for the first bad spec in `specs` (OTP's check_childspecs).

    Specs are validated when built; this checks what only a list can get wrong
    (duplicate ids, non-specs) and, given `auto_shutdown`, that no child is
    significant under a supervisor that never auto-shuts down.
    """
    if isinstance(specs, ChildSpec | SupervisorSpec) or not isinstance(specs, Iterable):
        raise SpecError(supervisor, "children", specs, "expected a list of specs")
    seen: set[str] = set()
    for spec in specs:
        if not isinstance(spec, ChildSpec | SupervisorSpec):
            raise SpecError(
                supervisor, "children", spec, "expected ChildSpec or SupervisorSpec items"
            )
        if spec.id in seen:
            raise SpecError(spec.id, "id", spec.id, "duplicate child id; ids must be unique")
        seen.add(spec.id)
        if auto_shutdown is AutoShutdown.NEVER and spec.significant:
            raise SpecError(
                spec.id,
                "significant",
                True,
                "the supervisor's auto_shutdown is NEVER; set auto_shutdown "
                "or make the child not significant",
            )


# -- one small check per field --------------------------------------------------------
# Each check reads one field (or one rule between two), raises SpecError naming the
# child and the field, and stores the normalised value. They run in this order, so a
# check may rely on the fields checked before it.

_put = object.__setattr__
_NOT_PERMANENT = "a permanent child cannot be significant; make it transient or temporary"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _refuse_nul(value: Any, cid: str, name: str, what: str) -> None:
    """The OS takes C strings: a NUL byte would end one early (exec refuses it)."""
    text = os.fspath(value)
    if ("\0" if isinstance(text, str) else b"\0") in text:
        raise SpecError(cid, name, value, f"{what} cannot contain NUL bytes ('\\0')")


def _child_target(spec: ChildSpec, cid: str) -> None:
    if (spec.target is None) == (spec.command is None):
        raise SpecError(
            cid,
            "target",
            spec.target,
            "give exactly one of target= (a Python callable) or command= (an argv list)",
        )
    if spec.target is not None and not callable(spec.target):
        raise SpecError(cid, "target", spec.target, "expected a callable")


def _child_command(spec: ChildSpec, cid: str) -> None:
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


def _child_args(spec: ChildSpec, cid: str) -> None:
    if isinstance(spec.args, str | bytes) or not isinstance(spec.args, Iterable):
        raise SpecError(cid, "args", spec.args, "expected a tuple of arguments")
    _put(spec, "args", tuple(spec.args))


def _child_kwargs(spec: ChildSpec, cid: str) -> None:
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


def _child_restart(spec: ChildSpec | SupervisorSpec, cid: str) -> None:
    _put(spec, "restart", _enum(Restart, spec.restart, cid, "restart"))


def _child_shutdown(spec: ChildSpec | SupervisorSpec, cid: str) -> None:
    _put(spec, "shutdown", _check_shutdown(spec.shutdown, cid))


def _child_significant(spec: ChildSpec | SupervisorSpec, cid: str) -> None:
    _check_bool(spec.significant, cid, "significant")
    if spec.significant and spec.restart is Restart.PERMANENT:
        raise SpecError(cid, "significant", True, _NOT_PERMANENT)


def _child_env(spec: ChildSpec, cid: str) -> None:
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


def _child_inherit_env(spec: ChildSpec, cid: str) -> None:
    _check_bool(spec.inherit_env, cid, "inherit_env")


def _child_cwd(spec: ChildSpec, cid: str) -> None:
    if spec.cwd is not None and not isinstance(spec.cwd, str | os.PathLike):
        raise SpecError(cid, "cwd", spec.cwd, "expected a directory path")
    if spec.cwd is not None:
        _refuse_nul(spec.cwd, cid, "cwd", "a path")


def _child_ready(spec: ChildSpec, cid: str) -> None:
    ready = spec.ready
    if _is_number(ready):
        if not math.isfinite(ready) or ready <= 0:  # type: ignore[arg-type,operator]
            raise SpecError(cid, "ready", ready, f"expected {READY_MODES}")
        _put(spec, "ready", float(ready))  # type: ignore[arg-type]
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


def _child_liveness(spec: ChildSpec, cid: str) -> None:
    value = spec.liveness
    if value is None:
        return
    if not isinstance(value, Liveness):
        raise SpecError(cid, "liveness", value, "expected None or Liveness(probe, ...)")
    if spec.ready == "exited":
        raise SpecError(
            cid, "liveness", value, 'a one-shot step (ready="exited") is not probed: drop liveness'
        )


def _child_min_uptime(spec: ChildSpec, cid: str) -> None:
    value = spec.min_uptime
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        raise SpecError(cid, "min_uptime", value, "expected seconds >= 0")
    _put(spec, "min_uptime", float(value))


def _child_start_timeout(spec: ChildSpec, cid: str) -> None:
    _put(spec, "start_timeout", _check_positive(spec.start_timeout, cid, "start_timeout"))
    if isinstance(spec.ready, float) and spec.ready >= spec.start_timeout:
        raise SpecError(
            cid,
            "ready",
            spec.ready,
            f"seconds of uptime must be below start_timeout={spec.start_timeout}; "
            "raise start_timeout",
        )


def _child_memory_limit(spec: ChildSpec, cid: str) -> None:
    value = spec.memory_limit
    if value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or value < 4096
    ):
        raise SpecError(cid, "memory_limit", value, "expected bytes >= 4096 (one page), or None")


def _child_output(spec: ChildSpec, cid: str) -> None:
    for name in ("stdout", "stderr"):
        value = getattr(spec, name)
        if value is not None and not isinstance(value, str | os.PathLike):
            raise SpecError(cid, name, value, 'expected None (inherit), a file path, or "capture"')
        if value is not None:
            _refuse_nul(value, cid, name, "a path")


def _child_normal_exit_codes(spec: ChildSpec, cid: str) -> None:
    codes = spec.normal_exit_codes
    if isinstance(codes, int) or not isinstance(codes, Iterable):
        raise SpecError(cid, "normal_exit_codes", codes, "expected a set of ints, e.g. {0}")
    codes = tuple(codes)
    if not all(_is_number(c) and isinstance(c, int) and 0 <= c <= 255 for c in codes):
        raise SpecError(
            cid, "normal_exit_codes", spec.normal_exit_codes, "expected exit codes from 0 to 255"
        )
    _put(spec, "normal_exit_codes", frozenset(codes))


def _child_fresh_interpreter(spec: ChildSpec, cid: str) -> None:
    if spec.fresh_interpreter and spec.command is not None:
        raise SpecError(
            cid, "fresh_interpreter", spec.fresh_interpreter, "only a target= child can ask for it"
        )
    _check_bool(spec.fresh_interpreter, cid, "fresh_interpreter")


def _child_warm_start(spec: ChildSpec, cid: str) -> None:
    _check_bool(spec.warm_start, cid, "warm_start")
    if spec.warm_start and (spec.command is not None or spec.fresh_interpreter):
        raise SpecError(
            cid,
            "warm_start",
            True,
            "only a target= child forked from the launcher keeps a warm standby; "
            "drop command= or fresh_interpreter=True",
        )


def _child_backoff(spec: ChildSpec | SupervisorSpec, cid: str) -> None:
    _check_backoff(spec.backoff, cid)


def _child_stop_signal(spec: ChildSpec, cid: str) -> None:
    # SIGSTOP never ends a process: the stop would always wait out `shutdown`.
    _put(
        spec, "stop_signal", _check_signal(spec.stop_signal, cid, "stop_signal", (_signal.SIGSTOP,))
    )


def _child_kill_mode(spec: ChildSpec, cid: str) -> None:
    if spec.kill_mode not in KILL_MODES:
        raise SpecError(
            cid,
            "kill_mode",
            spec.kill_mode,
            'expected "group" (stop signal to the process group) or "main" (to the main '
            "process only, the group killed when shutdown runs out)",
        )


def _child_brutal_kill(spec: ChildSpec, cid: str) -> None:
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


def _child_watchdog(spec: ChildSpec, cid: str) -> None:
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


def _child_pid_file(spec: ChildSpec, cid: str) -> None:
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


def _child_reload(spec: ChildSpec, cid: str) -> None:
    try:
        reload = as_reload(spec.reload)
    except SpecError as e:
        raise SpecError(cid, e.field, e.value, e.expected) from None
    _put(spec, "reload", reload)


def _child_restart_limit(spec: ChildSpec, cid: str) -> None:
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


def _child_logs(spec: ChildSpec, cid: str) -> None:
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


def _child_sockets(spec: ChildSpec, cid: str) -> None:
    sockets = as_sockets(spec.sockets, cid)
    check_socket_probes(sockets, spec.ready, spec.liveness, cid)
    _put(spec, "sockets", sockets)


def _child_account(spec: ChildSpec, cid: str) -> None:
    _put(spec, "user", check_account(spec.user, cid, "user"))
    _put(spec, "group", check_account(spec.group, cid, "group"))


def _child_confinement(spec: ChildSpec, cid: str) -> None:
    _check_bool(spec.no_new_privileges, cid, "no_new_privileges")
    _put(spec, "limits", check_limits(spec.limits, cid))


def _child_daemonize(spec: ChildSpec, cid: str) -> None:
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


def _child_start_check(spec: ChildSpec, cid: str) -> None:
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


def _child_as_root(spec: ChildSpec, cid: str) -> None:
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


_CHILD_CHECKS: tuple[Callable[[ChildSpec, str], None], ...] = (
    _child_target,
    _child_command,
    _child_args,
    _child_kwargs,
    _child_restart,
    _child_shutdown,
    _child_significant,
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


def _sup_strategy(spec: SupervisorSpec, sid: str) -> None:
    _put(spec, "strategy", _enum(Strategy, spec.strategy, sid, "strategy"))


def _sup_intensity(spec: SupervisorSpec, sid: str) -> None:
    value = spec.intensity
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SpecError(sid, "intensity", value, "expected an integer >= 0")


def _sup_period(spec: SupervisorSpec, sid: str) -> None:
    _put(spec, "period", _check_positive(spec.period, sid, "period"))


def _sup_auto_shutdown(spec: SupervisorSpec, sid: str) -> None:
    _put(spec, "auto_shutdown", _enum(AutoShutdown, spec.auto_shutdown, sid, "auto_shutdown"))


def _sup_children(spec: SupervisorSpec, sid: str) -> None:
    if isinstance(spec.children, ChildSpec | SupervisorSpec) or not isinstance(
        spec.children, Iterable
    ):
        raise SpecError(sid, "children", spec.children, "expected a list of specs")
    children = tuple(spec.children)
    _put(spec, "children", children)
    check_childspecs(children, spec.auto_shutdown, supervisor=sid)
    if spec.strategy is Strategy.SIMPLE_ONE_FOR_ONE and len(children) != 1:
        raise SpecError(
            sid,
            "children",
            [c.id for c in children],
            "simple_one_for_one takes exactly one child spec: the template",
        )


def _sup_simple_auto_shutdown(spec: SupervisorSpec, sid: str) -> None:
    if (
        spec.strategy is Strategy.SIMPLE_ONE_FOR_ONE
        and spec.auto_shutdown is not AutoShutdown.NEVER
    ):
        raise SpecError(
            sid,
            "auto_shutdown",
            spec.auto_shutdown,
            "simple_one_for_one supervisors cannot auto-shutdown (as OTP 27)",
        )


def _sup_max_children(spec: SupervisorSpec, sid: str) -> None:
    value = spec.max_children
    if value is None:
        return
    if spec.strategy is not Strategy.SIMPLE_ONE_FOR_ONE:
        raise SpecError(sid, "max_children", value, "only simple_one_for_one takes it")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SpecError(sid, "max_children", value, "expected an integer >= 0")


def _sup_placement(spec: SupervisorSpec, sid: str) -> None:
    if spec.placement is not None and not isinstance(spec.placement, Placement):
        raise SpecError(
            sid, "placement", spec.placement, "expected a supervision.Placement(...) or None"
        )


_SUPERVISOR_CHECKS: tuple[Callable[[SupervisorSpec, str], None], ...] = (
    _sup_strategy,
    _sup_placement,
    _sup_intensity,
    _sup_period,
    _sup_auto_shutdown,
    _child_restart,
    _child_shutdown,
    _child_significant,
    _child_backoff,
    _sup_children,
    _sup_simple_auto_shutdown,
    _sup_max_children,
)
