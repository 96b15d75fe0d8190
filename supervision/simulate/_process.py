"""A simulated worker's process, and the faults drawn for the worker over the whole
run (each start's failure or lifetime, from its fault model and the run's seed)."""

from __future__ import annotations

from functools import cached_property
from random import Random

from .._reasons import ExitReason
from ._faults import (
    FaultModel,
    Healthy,
)
from ._health import ProbeLoop

_HEALTHY = Healthy()


# -- one worker's faults, over the whole run ------------------------------------------


class _Faults:
    def __init__(self, model: FaultModel, seed: int, path: str, key: str | None) -> None:
        self.model = model
        self.key = key  # the `faults` key its model came from (None: no model, healthy)
        self._streams = f"{seed}/{path}"
        self.attempts = 0
        self.successes = 0

    # Each stream is made when first drawn from: seeding one costs more than most runs
    # draw from it (a third of a 1,000-worker start), and most models use one or two.
    @cached_property
    def life(self) -> Random:
        return Random(f"{self._streams}/life")

    @cached_property
    def starts(self) -> Random:
        return Random(f"{self._streams}/start")

    @cached_property
    def probes(self) -> Random:
        """A Flapping model's draws."""
        return Random(f"{self._streams}/probe")

    def start_fails(self) -> bool:
        self.attempts += 1
        model = self.model
        if self.attempts in model.failed_starts:
            return True
        p = model.start_failure_probability
        return p > 0.0 and self.starts.random() < p

    def lifetime(self) -> tuple[float, ExitReason] | None:
        self.successes += 1
        return self.model.lifetime(self.life, self.successes)


class _Process:
    __slots__ = (
        "alive",
        "answers_at",
        "attempts",
        "hung",
        "incarnation",
        "loop",
        "paused",
        "pid",
        "reason",
        "stopping",
        "watchdog_at",
    )

    def __init__(self, incarnation: int, pid: int, answers_at: float = 0.0) -> None:
        self.incarnation = incarnation
        self.pid = pid
        self.alive = True
        self.paused = False
        self.hung = False  # alive but stuck (a Hang fault): ignores SIGTERM
        self.reason: ExitReason | None = None
        self.answers_at = answers_at  # when its service answers probes
        self.loop: ProbeLoop | None = None  # its liveness watch, while one runs
        self.attempts = 0  # liveness attempts so far (a Flapping pattern's index)
        self.stopping = False  # its liveness decided to stop it (reason unhealthy)
        self.watchdog_at: float | None = None  # when its watchdog decides to stop it
