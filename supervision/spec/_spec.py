"""Child and supervisor specs: frozen, validated once, when built (a bad field names
the child, the field and the fix). The values their fields take: _fields.py; the
check of each field of a worker: _checks.py; a supervisor's own checks are here.

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
- `required` defaults to True: a worker that fails its first start stops its
  supervisor's start, as in OTP.
"""

from __future__ import annotations

import os
import signal as _signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .._errors import SpecError
from ._checks import (
    _CHILD_CHECKS,
    _child_backoff,
    _child_restart,
    _child_shutdown,
    _child_significant,
)
from ._fields import (
    AutoShutdown,
    Backoff,
    KillMode,
    Ready,
    Reload,
    Restart,
    Shutdown,
    SignalLike,
    Strategy,
    _check_id,
    _check_positive,
    _enum,
    _put,
)
from ._keywords import keywords_checked
from ._placement import Placement
from ._probes import (
    Liveness,
)
from ._restart_limit import RestartLimit
from ._sockets import ListenSocket


@keywords_checked
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
    - `required`: True (default, OTP's init): a failed first start of the child
      fails its supervisor's start, which stops the children already started.
      False: the child is left "failed" (event child_failed, as supervisord's
      FATAL) and its siblings start and run; restart_child starts it later. See
      docs/otp-semantics.md section 16.
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
    required: bool = True
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


@keywords_checked
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
