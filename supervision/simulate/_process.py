"""A simulated worker's process, and the faults drawn for the worker over the whole
run (each start's failure or lifetime, from its fault model and the run's seed)."""

from __future__ import annotations

from random import Random

from .._reasons import ExitReason
from ._faults import (
    Combination,
    FaultModel,
    Flapping,
    Hang,
    Healthy,
    MemoryGrowth,
)
from ._health import ProbeLoop

_HEALTHY = Combination((Healthy(),))


# -- one worker's faults, over the whole run ------------------------------------------


def _tag(models: tuple[FaultModel, ...], i: int) -> str:
    """The name of model `i`'s streams: the first model's are the child's own (so a bare
    model draws as it always did); any other's, by its kind and how many of that kind
    come before it from the second on, so that adding a model leaves the draws of
    those before it (and of other kinds) as they were."""
    if i == 0:
        return ""
    kind = type(models[i]).__name__
    n = sum(1 for m in models[1:i] if type(m).__name__ == kind)
    return f"/{kind}" if n == 0 else f"/{kind}#{n + 1}"


class _Streams:
    """One model's random streams for one worker: its processes' lives and hangs, its
    start failures and its probes (each drawn only by what needs it).

    Each stream is made when first drawn from: seeding one costs more than most runs
    draw from it (a third of a 1,000-worker start), and most models use one or two.
    Made, it is a plain attribute (a slot): a draw reads it with no call."""

    __slots__ = ("_name", "life", "probes", "starts")

    life: Random
    starts: Random
    probes: Random  # a Flapping model's draws

    def __init__(self, seed: int, path: str, tag: str) -> None:
        self._name = f"{seed}/{path}{tag}"

    def __getattr__(self, name: str) -> Random:
        """A stream's first use (its slot is empty): seed it."""
        suffix = _STREAMS.get(name)
        if suffix is None:
            raise AttributeError(name)
        stream = Random(f"{self._name}/{suffix}")
        setattr(self, name, stream)
        return stream


_STREAMS = {"life": "life", "starts": "start", "probes": "probe"}  # attribute -> seed name


class _Faults:
    """A worker's faults over the run: its models (combined: see _faults) and each
    model's own streams."""

    def __init__(self, combo: Combination, seed: int, path: str, key: str | None) -> None:
        self.combo = combo
        self.key = key  # the `faults` key its models came from (None: no model, healthy)
        models = combo.models
        self.streams = [(m, _Streams(seed, path, _tag(models, i))) for i, m in enumerate(models)]
        self.flapping = [(m, s.probes) for m, s in self.streams if isinstance(m, Flapping)]
        self.attempts = 0  # start attempts (counted only if a model may fail one)
        self.successes = 0
        # What each start asks of the models, found once (a start draws a crash, the
        # common case, with no loop over models that cannot fail it, leak or hang).
        self.hangs = [(m, s) for m, s in self.streams if isinstance(m, Hang)]
        self.leaks = [m for m, _ in self.streams if isinstance(m, MemoryGrowth)]
        self.may_fail_start = any(
            m.failed_starts or m.start_failure_probability > 0.0 for m in models
        )
        self.single = self.streams[0] if len(self.streams) == 1 else None
        self.single_life = None if self.leaks else self.single  # lifetime's fast case

    def start_fails(self) -> bool:
        """Whether the next start attempt fails: if any model's fails (each draws).
        Never, without drawing, when `may_fail_start` is False (the caller may skip it)."""
        self.attempts += 1
        if not self.may_fail_start:
            return False
        fails = False
        for model, streams in self.streams:
            if self.attempts in model.failed_starts:
                fails = True
            p = model.start_failure_probability
            if p > 0.0 and streams.starts.random() < p:
                fails = True
        return fails

    def lifetime(self, memory_limit: int | None) -> tuple[float, ExitReason] | None:
        """How the next process ends by itself: the soonest of the models' drawn ends and
        leaks (the earlier model's on a tie); None: it runs until stopped."""
        single = self.single_life
        if single is not None:  # one model that does not leak: its draw (drawn_lifetime's)
            self.successes += 1
            return single[0].lifetime(single[1].life, self.successes)
        drawn = self.drawn_lifetime()
        if not self.leaks:
            return drawn
        leak = self.memory_limit_time(memory_limit)
        if leak is not None and (drawn is None or leak[0] < drawn[0]):
            return leak
        return drawn

    def drawn_lifetime(self) -> tuple[float, ExitReason] | None:
        """A one-shot step's drawn end (a relative Scripted entry, an Exponential draw),
        the soonest; a memory limit is not one (see _health.step_run)."""
        self.successes += 1
        if self.single is not None:
            model, streams = self.single
            return model.lifetime(streams.life, self.successes)
        soonest: tuple[float, ExitReason] | None = None
        for model, streams in self.streams:
            end = model.lifetime(streams.life, self.successes)
            if end is not None and (soonest is None or end[0] < soonest[0]):
                soonest = end
        return soonest

    def memory_limit_time(self, memory_limit: int | None) -> tuple[float, ExitReason] | None:
        """When the fastest leak reaches `memory_limit`, if a model leaks."""
        soonest: tuple[float, ExitReason] | None = None
        for model in self.leaks:
            end = model.time_to_limit(memory_limit)
            if end is not None and (soonest is None or end[0] < soonest[0]):
                soonest = end
        return soonest

    def hang_time(self) -> float | None:
        """Seconds from a start to its process's hang: the soonest Hang's (each draws)."""
        soonest: float | None = None
        for model, streams in self.hangs:
            after = model.hang_time(streams.life)
            if after is not None and (soonest is None or after < soonest):
                soonest = after
        return soonest

    def probe_passes(self, index: int) -> bool:
        """Whether the `index`-th liveness probe of a process passes: if every Flapping
        model lets it (each draws, so none shifts another's stream)."""
        passes = True
        for model, rng in self.flapping:
            if not model.probe_passes(rng, index):
                passes = False
        return passes


class _Process:
    __slots__ = (
        "alive",
        "answers_at",
        "attempts",
        "child_id",
        "end",
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
        # Set when its models draw an end (the record `_Node._life_ends` is given).
        self.child_id = ""
        self.end: ExitReason | None = None
