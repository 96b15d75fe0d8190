"""Child and supervisor specs: frozen, validated once, when built.

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
- `placement` defaults to None: a subtree runs in its parent's process.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeAlias

from ._errors import SpecError
from ._placement import Placement


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


Ready: TypeAlias = Literal["started", "notify"] | float | ReadyFile
READY_MODES = '"started", "notify", seconds of uptime > 0, or ReadyFile(path)'


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
      `inherit_env=False`); `cwd`: working directory (default: the parent's).
    - `ready`: when the child counts as started, so that its next sibling may start:
      "started" (default: once its process runs), "notify" (once it calls
      actors.child.ready()), a number of seconds (once it has stayed up that long) or
      ReadyFile(path) (once the file exists); `start_timeout` (default 30.0 s) bounds
      the wait, and a child not ready by then fails to start (reason start_timeout).
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
      imports; one idle process more per child; default False).
    - `backoff`: a Backoff(...) to wait between restarts, beyond OTP (default None:
      restart at once, as OTP).
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

    def __post_init__(self) -> None:
        cid = _check_id(self.id)
        put = object.__setattr__
        if (self.target is None) == (self.command is None):
            raise SpecError(
                cid,
                "target",
                self.target,
                "give exactly one of target= (a Python callable) or command= (an argv list)",
            )
        if self.target is not None and not callable(self.target):
            raise SpecError(cid, "target", self.target, "expected a callable")
        if self.command is not None:
            if isinstance(self.command, str | bytes):
                raise SpecError(
                    cid,
                    "command",
                    self.command,
                    "expected a list of arguments, e.g. ['sleep', '10'] "
                    "(for a shell line use ['sh', '-c', line])",
                )
            command = tuple(self.command)
            if not command or not all(isinstance(a, str) for a in command):
                raise SpecError(cid, "command", self.command, "expected a non-empty list of str")
            put(self, "command", command)
            if self.fresh_interpreter:
                raise SpecError(
                    cid,
                    "fresh_interpreter",
                    self.fresh_interpreter,
                    "only a target= child can ask for it",
                )
        if isinstance(self.args, str | bytes) or not isinstance(self.args, Iterable):
            raise SpecError(cid, "args", self.args, "expected a tuple of arguments")
        put(self, "args", tuple(self.args))
        if not isinstance(self.kwargs, Mapping):
            raise SpecError(cid, "kwargs", self.kwargs, "expected a mapping of keyword arguments")
        put(self, "kwargs", dict(self.kwargs))
        put(self, "restart", _enum(Restart, self.restart, cid, "restart"))
        put(self, "shutdown", _check_shutdown(self.shutdown, cid))
        _check_bool(self.significant, cid, "significant")
        if self.significant and self.restart is Restart.PERMANENT:
            raise SpecError(
                cid,
                "significant",
                True,
                "a permanent child cannot be significant; make it transient or temporary",
            )
        if self.env is not None:
            if not isinstance(self.env, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()
            ):
                raise SpecError(cid, "env", self.env, "expected a mapping of str to str")
            put(self, "env", dict(self.env))
        _check_bool(self.inherit_env, cid, "inherit_env")
        if self.cwd is not None and not isinstance(self.cwd, str | os.PathLike):
            raise SpecError(cid, "cwd", self.cwd, "expected a directory path")
        ready = self.ready
        if isinstance(ready, int | float) and not isinstance(ready, bool):
            if not math.isfinite(ready) or ready <= 0:
                raise SpecError(cid, "ready", ready, f"expected {READY_MODES}")
            put(self, "ready", float(ready))
        elif isinstance(ready, ReadyFile):
            if not isinstance(ready.path, str | os.PathLike) or not os.fspath(ready.path):
                raise SpecError(cid, "ready", ready, "ReadyFile takes a file path")
        elif ready not in ("started", "notify"):
            raise SpecError(cid, "ready", ready, f"expected {READY_MODES}")
        if ready == "notify" and self.command is not None:
            raise SpecError(
                cid,
                "ready",
                "notify",
                "only a target= child can call actors.child.ready(); for a command use "
                "seconds of uptime or ReadyFile(path)",
            )
        if (
            isinstance(self.min_uptime, bool)
            or not isinstance(self.min_uptime, int | float)
            or (not math.isfinite(self.min_uptime) or self.min_uptime < 0)
        ):
            raise SpecError(cid, "min_uptime", self.min_uptime, "expected seconds >= 0")
        put(self, "min_uptime", float(self.min_uptime))
        put(self, "start_timeout", _check_positive(self.start_timeout, cid, "start_timeout"))
        if isinstance(self.ready, float) and self.ready >= self.start_timeout:
            raise SpecError(
                cid,
                "ready",
                self.ready,
                f"seconds of uptime must be below start_timeout={self.start_timeout}; "
                "raise start_timeout",
            )
        if self.memory_limit is not None and (
            isinstance(self.memory_limit, bool)
            or not isinstance(self.memory_limit, int)
            or self.memory_limit < 4096
        ):
            raise SpecError(
                cid, "memory_limit", self.memory_limit, "expected bytes >= 4096 (one page), or None"
            )
        for name in ("stdout", "stderr"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str | os.PathLike):
                raise SpecError(
                    cid, name, value, 'expected None (inherit), a file path, or "capture"'
                )
        codes = self.normal_exit_codes
        if isinstance(codes, int) or not isinstance(codes, Iterable):
            raise SpecError(cid, "normal_exit_codes", codes, "expected a set of ints, e.g. {0}")
        codes = tuple(codes)
        if not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in codes):
            raise SpecError(
                cid,
                "normal_exit_codes",
                self.normal_exit_codes,
                "expected exit codes from 0 to 255",
            )
        put(self, "normal_exit_codes", frozenset(codes))
        _check_bool(self.fresh_interpreter, cid, "fresh_interpreter")
        _check_bool(self.warm_start, cid, "warm_start")
        if self.warm_start and (self.command is not None or self.fresh_interpreter):
            raise SpecError(
                cid,
                "warm_start",
                True,
                "only a target= child forked from the launcher keeps a warm standby; "
                "drop command= or fresh_interpreter=True",
            )
        _check_backoff(self.backoff, cid)

    @property
    def type(self) -> Literal["worker"]:
        return "worker"


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
        put = object.__setattr__
        put(self, "strategy", _enum(Strategy, self.strategy, sid, "strategy"))
        if self.placement is not None and not isinstance(self.placement, Placement):
            raise SpecError(
                sid, "placement", self.placement, "expected a supervision.Placement(...) or None"
            )
        if (
            isinstance(self.intensity, bool)
            or not isinstance(self.intensity, int)
            or (self.intensity < 0)
        ):
            raise SpecError(sid, "intensity", self.intensity, "expected an integer >= 0")
        put(self, "period", _check_positive(self.period, sid, "period"))
        put(self, "auto_shutdown", _enum(AutoShutdown, self.auto_shutdown, sid, "auto_shutdown"))
        put(self, "restart", _enum(Restart, self.restart, sid, "restart"))
        put(self, "shutdown", _check_shutdown(self.shutdown, sid))
        _check_bool(self.significant, sid, "significant")
        _check_backoff(self.backoff, sid)
        if self.significant and self.restart is Restart.PERMANENT:
            raise SpecError(
                sid,
                "significant",
                True,
                "a permanent child cannot be significant; make it transient or temporary",
            )
        if isinstance(self.children, ChildSpec | SupervisorSpec) or not isinstance(
            self.children, Iterable
        ):
            raise SpecError(sid, "children", self.children, "expected a list of specs")
        children = tuple(self.children)
        put(self, "children", children)
        check_childspecs(children, self.auto_shutdown, supervisor=sid)
        simple = self.strategy is Strategy.SIMPLE_ONE_FOR_ONE
        if simple and len(children) != 1:
            raise SpecError(
                sid,
                "children",
                [c.id for c in children],
                "simple_one_for_one takes exactly one child spec: the template",
            )
        if simple and self.auto_shutdown is not AutoShutdown.NEVER:
            raise SpecError(
                sid,
                "auto_shutdown",
                self.auto_shutdown,
                "simple_one_for_one supervisors cannot auto-shutdown (as OTP 27)",
            )
        if self.max_children is not None:
            if not simple:
                raise SpecError(
                    sid, "max_children", self.max_children, "only simple_one_for_one takes it"
                )
            if (
                isinstance(self.max_children, bool)
                or not isinstance(self.max_children, int)
                or (self.max_children < 0)
            ):
                raise SpecError(sid, "max_children", self.max_children, "expected an integer >= 0")

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
