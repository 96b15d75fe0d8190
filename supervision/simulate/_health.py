"""Health in virtual time: readiness probes, one-shot steps and liveness probes.

The live shell's rules (docs/health.md) as arithmetic on virtual times; the
engine (`_run`) schedules what these say:
- A start with a probe as `ready` is tried at once and every probe period
  (supervision.spec._probes.READY_PERIOD unless the probe says): it ends at the first
  attempt at or after the service answers (`FaultModel.answers_after`), or at
  `start_timeout` if that attempt would be later (reason start_timeout).
- A one-shot step (`ready="exited"`) runs until its model ends its process, or
  for `start_duration` seconds and then exits 0; a normal exit is its start.
- Liveness: a process is probed `initial_delay` after it is ready (or resumed),
  then every `period`, counted by the live counter (supervision.LivenessCount); an
  attempt that outlasts the period moves the schedule to its end, as live.
This module draws nothing itself: the engine hands it its seeded streams.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .._info import Health
from .._reasons import ExitReason
from ..spec._fields import (
    BRUTAL_KILL,
    INFINITY,
)
from ..spec._probes import PROBES, Liveness, LivenessCount, Verdict, ready_period
from ..spec._spec import (
    ChildSpec,
)
from ._faults import Combination

NOT_YET = "connection refused (the service does not answer yet)"
FLAPPED = "the probe failed (simulated)"
NEVER = math.inf  # a step that never ends by itself


def _tidy(seconds: float) -> float:
    """Virtual times of a schedule, free of float noise (3 x 0.1 is 0.3), so that a
    probe "at or after" a time is decided as written."""
    return round(seconds, 9)


def probe_ready_after(answers_after: float, period: float) -> float:
    """Seconds from a start to the first readiness attempt at or after `answers_after`."""
    return _tidy(math.ceil(_tidy(answers_after / period)) * period)


_NUMBER = (int, float)  # a tuple: `int | float` would build a union per call


def start_delay(spec: ChildSpec, model: Combination, fails: bool) -> tuple[float, bool]:
    """Seconds until a worker's start is decided, and whether it is by start_timeout.

    A number as `ready` takes that long; a probe, its first attempt at or after the
    service answers (unless the start fails: its process ends at `start_duration`);
    anything else the model's `start_duration`. Only "started" has no timeout.
    """
    ready = spec.ready
    if isinstance(ready, _NUMBER) and not isinstance(ready, bool):
        delay = float(ready)
    elif isinstance(ready, PROBES) and not fails:
        delay = probe_ready_after(model.answers_after, ready_period(ready))
    else:
        delay = model.start_duration
    return delay, ready != "started" and delay > spec.start_timeout


def step_run(
    spec: ChildSpec,
    model: Combination,
    life: tuple[float, ExitReason] | None,
    leak: tuple[float, ExitReason] | None,
    hang: float | None,
) -> tuple[float, ExitReason]:
    """How long a one-shot step's process runs and why it ends (NEVER: it does not).

    `life` is what its models drew for this process (a relative Scripted entry, an
    Exponential draw); without one it runs `start_duration` and exits 0. Either way,
    reaching its memory_limit first (`leak`: when, and why) ends it then, and a hang
    first (`hang` seconds after its start) keeps it running.
    """
    end = life if life is not None else (model.start_duration, ExitReason.normal())
    if leak is not None and leak[0] < end[0]:
        end = leak
    if hang is not None and hang < end[0]:
        return NEVER, ExitReason.normal()
    return end


def stop_time(spec: ChildSpec, model: Combination, hung: bool) -> float:
    """Seconds from the shell's decision to stop a process (watchdog, liveness) to its
    exit: SIGTERM, then SIGKILL at `shutdown`; a hung process ignores SIGTERM unless
    its model `answers_sigterm`."""
    shutdown = spec.shutdown
    if shutdown == BRUTAL_KILL:
        return 0.0
    answers = not hung or model.answers_sigterm
    if shutdown == INFINITY:
        return model.stop_duration
    if not answers:
        return float(shutdown)
    return min(model.stop_duration, float(shutdown))


class ProbeLoop:
    """One watch of a process's liveness: from its readiness, or from a resume (a
    paused process is not probed, and a resumed one starts a fresh count, as live)."""

    __slots__ = ("_base", "_k", "count", "liveness")

    def __init__(self, liveness: Liveness, first: float) -> None:
        self.liveness = liveness
        self.count = LivenessCount(liveness.failures)
        self._base, self._k = first, 0

    @property
    def due(self) -> float:
        """When the next attempt begins."""
        return _tidy(self._base + self._k * self.liveness.period)

    def attempt(
        self,
        passes: Callable[[int], bool],
        index: int,
        *,
        now: float,
        answers_at: float,
        hung: bool,
    ) -> tuple[bool, float, str]:
        """The attempt beginning `now`: (passed, how long it took, its error).

        A hung service never answers: the attempt fails at its timeout. One that does
        not answer yet refuses at once; a Flapping one fails at once when it flaps
        (`passes(index)` says; `index` counts the process's liveness attempts, from 0).
        """
        timeout = self.liveness.probe.timeout
        if hung:
            return False, timeout, f"no answer within {timeout:g} s"
        if now < _tidy(answers_at):  # as tidy as the schedule: a start at 45.8808560834
            return False, 0.0, NOT_YET  # is probed at 45.880856083, and answers
        if not passes(index):
            return False, 0.0, FLAPPED
        return True, 0.0, ""

    def observe(self, began: float, took: float, ok: bool, error: str) -> Verdict | None:
        """Count an attempt's result; schedule the next (an attempt longer than the
        period is followed by the next at once, as the live prober does)."""
        if took <= self.liveness.period:
            self._k += 1
        else:
            self._base, self._k = _tidy(began + took), 0
        return self.count.observe(ok, error)

    def health(self) -> Health:
        c = self.count
        return Health(c.status, c.failures, c.threshold, c.error)

    def stop_reason(self) -> ExitReason:
        c = self.count
        return ExitReason.unhealthy(c.failures, str(self.liveness.probe), c.error)
