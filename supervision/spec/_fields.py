"""The values a spec's fields take, and the small checks they share: the strategy,
restart and shutdown vocabulary, `Backoff`, `ReadyFile`, `Reload`, signals, ids and
seconds. The specs themselves: _spec.py; the check of each field: _checks.py.
"""

from __future__ import annotations

import functools
import math
import os
import signal as _signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, TypeAlias

from .._errors import SpecError
from ._probes import (
    ExecProbe,
    HttpProbe,
    LogLine,
    TcpProbe,
    check_root_program,
)


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


_put = object.__setattr__  # a check stores the normalised value in the frozen spec
