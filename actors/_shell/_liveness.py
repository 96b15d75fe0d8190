"""A worker's liveness probe: watched by the tree's prober while the child runs.

The prober counts (supervision.LivenessCount) and tells the worker only of a
change, as a `HealthChanged` message for the incarnation it watched; a paused
child is not probed (a stopped process cannot answer). See docs/health.md.
"""

from __future__ import annotations

from typing import Any

import pykka

from supervision import ChildSpec, ExecProbe, Health
from supervision.spec._probes import LivenessCount, Verdict

from .._runtime._actor_loop import tell_quietly
from ._messages import HealthChanged
from ._prober import Prober, Watch
from ._run_as import RunAs, run_as


def probe_site(spec: ChildSpec, probe: object) -> RunAs:
    """How `probe` (the child's readiness or liveness) runs, if it runs a program: as
    the child, or as_root; nothing to resolve for the others."""
    if not isinstance(probe, ExecProbe):
        return RunAs()
    return run_as(spec, probe.argv[0], as_root=probe.as_root)


def health_of(count: LivenessCount) -> Health:
    return Health(count.status, count.failures, count.threshold, count.error)


class LivenessWatch:
    """The liveness watch of a worker's current process, if its spec has one."""

    def __init__(self, spec: ChildSpec, prober: Prober) -> None:
        self._spec = spec
        self._prober = prober
        self._watch: Watch | None = None

    def start(self, ref: pykka.ActorRef[Any], incarnation: int) -> None:
        """Probe the process of `incarnation` (ready now) from its initial delay on."""
        self.stop()
        liveness = self._spec.liveness
        if liveness is None:
            return

        def changed(verdict: Verdict, count: LivenessCount) -> None:
            tell_quietly(ref, HealthChanged(incarnation, verdict, health_of(count)))

        self._watch = self._prober.watch(liveness, probe_site(self._spec, liveness.probe), changed)

    def stop(self) -> None:
        if self._watch is not None:
            self._prober.unwatch(self._watch)
            self._watch = None
