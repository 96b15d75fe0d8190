"""Fault models for the simulator: how a simulated child fails, starts and stops.

A fault model describes one worker child. Every model has the same start and
stop behaviour fields; the subclasses say when a running process exits by
itself. Every default, in one sentence each:
- `start_duration` defaults to 0.0 seconds: a start succeeds or fails at once.
- `answers_after` defaults to 0.0 seconds: the service answers probes from its start.
- `stop_duration` defaults to 0.0 seconds: a process stops at once on SIGTERM.
- `start_failure_probability` defaults to 0.0: no start fails at random.
- `failed_starts` defaults to (): no start attempt is scripted to fail.
- `Exponential.reason` and `Scripted` exits default to `CRASH` (exit code 1).
- `Scripted.relative` defaults to False: exit times are absolute virtual times.
- `Scripted.repeat` defaults to False: a relative script is not cycled.
- `Hang.answers_sigterm` defaults to False: a hung process is killed at its `shutdown`.
- `Flapping.repeat` defaults to False: past its pattern, every probe passes.

Combined models: a `faults` entry may be a list, `{"db": [Hang(mean=3600),
Flapping(probability=0.05), Exponential(mtbf=600)]}`: a hang, a flapping probe
and crashes on one child at once (`combine` checks it once per run). What
each pair decides together:
- Draws: each model draws from streams of its own, named by the seed, the
  child and the model: the first model's are the child's own (a bare model
  draws as it always did), any other's by its kind (and its rank among models
  of that kind). So adding a model leaves the draws of every model before it
  as they were: the same crash times, the same flapping probes.
- Exits (Exponential, relative Scripted, MemoryGrowth): a process ends at the
  soonest of its models' ends (the earlier model's on a tie; a drawn end before
  a leak); each model draws for every process all the same. Absolute Scripted
  exits all happen.
- Hang with any other: the process hangs at the soonest Hang's time unless it
  ended before; once hung it does nothing, not crash nor leak, until its
  watchdog, its liveness probe or its supervisor stops it (an absolute
  Scripted exit, from outside, still ends it). Every Hang's `at` times apply.
- Flapping with any other: a liveness probe passes only if every Flapping model
  lets it (each draws); a hung or not-yet-answering service fails as alone.
- Start failures: a start fails if any model's `failed_starts` names it or any
  model's `start_failure_probability` draw fails (each from its own stream).
- One value per child: `start_duration`, `stop_duration` and `answers_after`
  may be set (not 0.0) by one model, or by several to the same value; two
  values are refused, naming the child and the field. Likewise every Hang's
  `answers_sigterm` must agree.
- Healthy in a list adds nothing but its start and stop fields.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._errors import SpecError
from .._frozen import build
from .._reasons import ExitKind, ExitReason

CRASH = ExitReason(ExitKind.EXIT_CODE, code=1)
"""The default reason a simulated process fails with: exit code 1."""

START_FAILURE = ExitReason.start_failure("simulated start failure")
"""The reason a simulated start fails with."""


class Rng(Protocol):
    """What a fault model draws from: a `random.Random` does."""

    def random(self) -> float: ...

    def expovariate(self, lambd: float, /) -> float: ...


def _seconds(model: str, name: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(None, f"{model}.{name}", value, "expected a finite number of seconds")
    if value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise SpecError(None, f"{model}.{name}", value, f"expected seconds {bound}")
    return float(value)


def _reason(model: str, name: str, value: Any) -> ExitReason:
    if not isinstance(value, ExitReason):
        raise SpecError(
            None, f"{model}.{name}", value, "expected an ExitReason, e.g. ExitReason.normal()"
        )
    return value


@dataclass(frozen=True, kw_only=True)
class FaultModel:
    """A healthy child: it never exits by itself (the base of every fault model).

    - `start_duration`: virtual seconds a start takes (its supervisor waits,
      as the live one does for a readiness handshake); default 0.0.
    - `stop_duration`: virtual seconds the process takes to exit after SIGTERM;
      default 0.0. The child's `shutdown` spec bounds it: after `shutdown`
      seconds it is killed, `brutal_kill` kills it at once, `infinity` waits.
    - `start_failure_probability`: chance that a start attempt fails (after
      `start_duration`); default 0.0.
    - `failed_starts`: attempt numbers (1 = the child's first start in the
      run, counting every attempt) that fail for sure; default ().
    - `answers_after`: virtual seconds from a process's start until its service
      answers a probe (a warm-up); default 0.0. With a probe as `ready`, the
      start lasts until the first readiness probe at or after it (probes at 0,
      period, 2 x period, ...; `start_duration` is then only when a failing
      start fails); a liveness probe sooner fails at once (connection refused).
    """

    start_duration: float = 0.0
    stop_duration: float = 0.0
    start_failure_probability: float = 0.0
    failed_starts: Collection[int] = ()
    answers_after: float = 0.0

    def __post_init__(self) -> None:
        name = type(self).__name__
        put = object.__setattr__
        put(self, "start_duration", _seconds(name, "start_duration", self.start_duration))
        put(self, "stop_duration", _seconds(name, "stop_duration", self.stop_duration))
        put(self, "answers_after", _seconds(name, "answers_after", self.answers_after))
        p = self.start_failure_probability
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise SpecError(
                None, f"{name}.start_failure_probability", p, "expected a number from 0 to 1"
            )
        put(self, "start_failure_probability", float(p))
        attempts = self.failed_starts
        if isinstance(attempts, int) or not isinstance(attempts, Collection):
            raise SpecError(
                None, f"{name}.failed_starts", attempts, "expected attempt numbers, e.g. {2, 3}"
            )
        if not all(isinstance(a, int) and not isinstance(a, bool) and a >= 1 for a in attempts):
            raise SpecError(
                None, f"{name}.failed_starts", attempts, "expected attempt numbers >= 1"
            )
        put(self, "failed_starts", frozenset(attempts))

    def lifetime(self, rng: Rng, incarnation: int) -> tuple[float, ExitReason] | None:
        """How long the `incarnation`-th process of the child runs, and why it ends.

        None: it runs until it is stopped. `incarnation` counts the child's
        successful starts in the run, from 1.
        """
        return None

    def absolute_exits(self) -> Sequence[tuple[float, ExitReason]]:
        """Exits at absolute virtual times, whatever process is running then."""
        return ()


@dataclass(frozen=True, kw_only=True)
class Healthy(FaultModel):
    """A child that never exits by itself (what a child without a model is)."""


@dataclass(frozen=True)
class Exponential(FaultModel):
    """A child whose processes fail at random: a mean time between failures.

    Each process runs for an exponentially distributed time with mean `mtbf`
    seconds (a memoryless failure rate of 1/mtbf), then exits with `reason`
    (default `CRASH`, exit code 1).
    """

    mtbf: float
    reason: ExitReason = CRASH

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "mtbf", _seconds("Exponential", "mtbf", self.mtbf, positive=True))
        _reason("Exponential", "reason", self.reason)

    def lifetime(self, rng: Rng, incarnation: int) -> tuple[float, ExitReason] | None:
        return rng.expovariate(1.0 / self.mtbf), self.reason


@dataclass(frozen=True)
class Scripted(FaultModel):
    """A child that exits when the script says: a list of (seconds, ExitReason).

    Absolute (`relative=False`, the default): at each virtual time, the child's
    process exits with that reason if one is running and not being stopped;
    otherwise that entry does nothing. Keyed by a simple_one_for_one template's
    path, it is each child's script: at that time every running process of a
    child started from the template exits (a child keyed by its own id keeps
    its own model). Relative (`relative=True`): entry k is
    the k-th successful start of the child in the run: that process runs
    for that many seconds and exits with that reason; processes beyond the
    script run until stopped, unless `repeat=True` cycles it.
    A bare number instead of a pair means `CRASH`.
    """

    exits: Sequence[tuple[float, ExitReason] | float] = ()
    relative: bool = False
    repeat: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.exits, str | bytes) or not isinstance(self.exits, Sequence):
            raise SpecError(
                None, "Scripted.exits", self.exits, "expected a list of (seconds, ExitReason)"
            )
        script: list[tuple[float, ExitReason]] = []
        for entry in self.exits:
            if isinstance(entry, tuple):
                if len(entry) != 2:
                    raise SpecError(
                        None, "Scripted.exits", entry, "expected a (seconds, ExitReason) pair"
                    )
                script.append(
                    (
                        _seconds("Scripted", "exits", entry[0]),
                        _reason("Scripted", "exits", entry[1]),
                    )
                )
            else:
                script.append((_seconds("Scripted", "exits", entry), CRASH))
        object.__setattr__(self, "exits", tuple(script))
        for name in ("relative", "repeat"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(None, f"Scripted.{name}", getattr(self, name), "expected a bool")
        if self.repeat and not self.relative:
            raise SpecError(
                None, "Scripted.repeat", True, "only a relative script repeats; set relative=True"
            )

    def _script(self) -> tuple[tuple[float, ExitReason], ...]:
        return self.exits  # type: ignore[return-value]  # normalised in __post_init__

    def lifetime(self, rng: Rng, incarnation: int) -> tuple[float, ExitReason] | None:
        script = self._script()
        if not self.relative or not script:
            return None
        index = incarnation - 1
        if self.repeat:
            index %= len(script)
        return script[index] if index < len(script) else None

    def absolute_exits(self) -> Sequence[tuple[float, ExitReason]]:
        return () if self.relative else self._script()


@dataclass(frozen=True)
class MemoryGrowth(FaultModel):
    """A leaking child: each process starts at `initial` bytes of RSS and grows by
    `rate` bytes a second until its spec's `memory_limit` stops it.

    The process is stopped when it reaches the limit, with reason `memory_limit`
    (as the live memory watch does, without its sampling delay). A child whose
    spec has no `memory_limit` grows forever and never exits by itself.
    """

    rate: float
    initial: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        rate = self.rate
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
            raise SpecError(None, "MemoryGrowth.rate", rate, "expected bytes per second > 0")
        if isinstance(self.initial, bool) or not isinstance(self.initial, int) or self.initial < 0:
            raise SpecError(None, "MemoryGrowth.initial", self.initial, "expected bytes >= 0")

    def time_to_limit(self, memory_limit: int | None) -> tuple[float, ExitReason] | None:
        """When a process of a child with this `memory_limit` is stopped, and why."""
        if memory_limit is None:
            return None
        seconds = max(0.0, (memory_limit - self.initial) / self.rate)
        return seconds, ExitReason(
            ExitKind.MEMORY_LIMIT,
            signal=15,
            message=f"its process tree used {memory_limit} bytes of RSS, over memory_limit="
            f"{memory_limit}; raise memory_limit or find the leak",
        )


@dataclass(frozen=True)
class Hang(FaultModel):
    """A child that hangs: its process stays alive but stops answering (a deadlock, a
    call that never returns, a SIGSTOP) `after` seconds after each start, after an
    exponentially distributed time of mean `mean` seconds, or at each absolute
    virtual time of `at` (whatever process of the child runs then). Give exactly one.

    From then on it counts as down for availability, though its supervisor still
    sees it running. Its spec's `watchdog` (no heartbeat for `watchdog` seconds)
    or `liveness` (its probes fail from the first one at or after the hang, each
    after its probe's `timeout`, since nothing answers; the `failures`-th in a row
    decides) notices it, whichever decides first; then it is stopped and, since a
    hung process ignores SIGTERM (unless `answers_sigterm`), killed after its
    `shutdown`. It exits with reason `watchdog` or `unhealthy`, as live. Without
    either it stays hung until its supervisor stops it.
    """

    after: float | None = None
    mean: float | None = None
    answers_sigterm: bool = False
    at: Sequence[float] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.at, str | bytes) or not isinstance(self.at, Sequence):
            raise SpecError(None, "Hang.at", self.at, "expected a list of virtual times")
        at = tuple(_seconds("Hang", "at", t) for t in self.at)
        object.__setattr__(self, "at", at)
        if sum((self.after is not None, self.mean is not None, bool(at))) != 1:
            raise SpecError(
                None,
                "Hang.after",
                self.after,
                "give exactly one of after= or mean= (seconds) or at= (virtual times)",
            )
        if self.after is not None:
            object.__setattr__(self, "after", _seconds("Hang", "after", self.after))
        elif self.mean is not None:
            object.__setattr__(self, "mean", _seconds("Hang", "mean", self.mean, positive=True))
        if not isinstance(self.answers_sigterm, bool):
            raise SpecError(None, "Hang.answers_sigterm", self.answers_sigterm, "expected a bool")

    def hang_time(self, rng: Rng) -> float | None:
        """Seconds from a start to the hang (None: it hangs at the times of `at`)."""
        if self.after is not None:
            return self.after
        if self.mean is not None:
            return rng.expovariate(1.0 / self.mean)
        return None


@dataclass(frozen=True)
class Flapping(FaultModel):
    """A service whose liveness probes fail now and then while its process runs on
    (an overloaded handler, a flaky dependency): give `probability` (each probe
    fails with that chance, drawn per probe) or `pattern` (the k-th liveness probe
    of each process passes if its k-th entry is True; past the pattern every probe
    passes, or the pattern starts again with `repeat=True`).

    A failing probe fails at once (the service answered, wrongly), and the service
    counts as up for availability until its supervisor stops it: the probe is what
    flaps. Readiness probes are not affected (see `answers_after`).
    """

    probability: float | None = None
    pattern: Sequence[bool] | None = None
    repeat: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.probability is None) == (self.pattern is None):
            raise SpecError(
                None,
                "Flapping.probability",
                self.probability,
                "give exactly one of probability= (a chance per probe) or pattern= (bools)",
            )
        p = self.probability
        if p is not None and (
            isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0
        ):
            raise SpecError(None, "Flapping.probability", p, "expected a number from 0 to 1")
        pattern = self.pattern
        if pattern is not None:
            if (
                isinstance(pattern, str | bytes)
                or not isinstance(pattern, Sequence)
                or not pattern
                or not all(isinstance(b, bool) for b in pattern)
            ):
                raise SpecError(
                    None,
                    "Flapping.pattern",
                    pattern,
                    "expected a non-empty list of bools (True: that probe passes)",
                )
            object.__setattr__(self, "pattern", tuple(pattern))
        if not isinstance(self.repeat, bool):
            raise SpecError(None, "Flapping.repeat", self.repeat, "expected a bool")
        if self.repeat and pattern is None:
            raise SpecError(None, "Flapping.repeat", True, "only a pattern repeats")

    def probe_passes(self, rng: Rng, index: int) -> bool:
        """Whether the `index`-th liveness probe of a process (from 0) passes."""
        if self.pattern is None:
            assert self.probability is not None
            return not (self.probability > 0.0 and rng.random() < self.probability)
        pattern = self.pattern
        if self.repeat:
            index %= len(pattern)
        return pattern[index] if index < len(pattern) else True


MODELS: tuple[type[FaultModel], ...] = (
    Exponential,
    Scripted,
    MemoryGrowth,
    Hang,
    Flapping,
    Healthy,
)
"""Every fault model a `faults` entry may hold (a refusal lists them all)."""

FaultEntry = FaultModel | Sequence[FaultModel]
"""What a `faults` key maps to: one fault model, or a list of them (combined)."""

_ONE_VALUE = ("start_duration", "stop_duration", "answers_after")


@dataclass(frozen=True)
class Combination:
    """The fault models of one `faults` key and what they decide together (a bare model
    is a combination of one); `combine` builds it. The rules are the module's."""

    models: tuple[FaultModel, ...]
    start_duration: float = 0.0
    stop_duration: float = 0.0
    answers_after: float = 0.0
    answers_sigterm: bool = False  # a hung process ends at SIGTERM (its Hang says so)

    @property
    def hangs(self) -> bool:
        return any(isinstance(m, Hang) for m in self.models)


def combine(key: str, entry: object) -> Combination:
    """The `faults` entry at `key` (a fault model, or a list of them) as a Combination.

    Refused, naming the key and the field: anything not a fault model, an empty list,
    and models that disagree on a value a child has once (`start_duration`,
    `stop_duration`, `answers_after`: at most one model may set it; Hang's
    `answers_sigterm`: every Hang alike).
    """
    if isinstance(entry, FaultModel):
        # A bare model (most keys: one per worker): its own values, nothing to disagree;
        # the Combination the general case makes, built in one step.
        return build(
            Combination,
            {
                "models": (entry,),
                "start_duration": entry.start_duration if entry.start_duration != 0.0 else 0.0,
                "stop_duration": entry.stop_duration if entry.stop_duration != 0.0 else 0.0,
                "answers_after": entry.answers_after if entry.answers_after != 0.0 else 0.0,
                "answers_sigterm": isinstance(entry, Hang) and entry.answers_sigterm is True,
            },
        )
    names = ", ".join(m.__name__ for m in MODELS)
    if isinstance(entry, list | tuple) and entry:
        models: tuple[FaultModel, ...] = tuple(entry)
        for model in models:
            if not isinstance(model, FaultModel):
                raise SpecError(
                    key, "faults", model, f"expected a fault model in the list: one of {names}"
                )
    else:
        raise SpecError(
            key, "faults", entry, f"expected a fault model ({names}) or a non-empty list of them"
        )
    values: dict[str, float] = {}
    for name in _ONE_VALUE:
        set_ = {getattr(m, name) for m in models if getattr(m, name) != 0.0}
        if len(set_) > 1:
            raise SpecError(
                key,
                f"faults {name}",
                sorted(set_),
                f"combined models disagree on {name}; set it on one model only "
                "(the others keep the default 0.0)",
            )
        values[name] = set_.pop() if set_ else 0.0
    sigterm = {m.answers_sigterm for m in models if isinstance(m, Hang)}
    if len(sigterm) > 1:
        raise SpecError(
            key,
            "faults answers_sigterm",
            sorted(sigterm),
            "combined Hang models disagree on answers_sigterm; give each the same value",
        )
    return Combination(models, answers_sigterm=sigterm == {True}, **values)
