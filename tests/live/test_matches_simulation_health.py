"""A liveness restart, live and simulated: the same events in the same order
(issue 25 item 9). The live service is SIGSTOPped once it is healthy; the
simulated one hangs (`Hang(at=...)`)."""

from __future__ import annotations

import os
import signal
import sys

from actors import Tree
from actors.testing import free_port
from supervision import ChildSpec, EventKind, ExitKind, HttpProbe, Liveness, SupervisorSpec
from supervision.simulate import Hang, event_sequence, simulate
from tests.live.test_health import SERVICE
from tests.support import wait_until


def _spec(port: int) -> SupervisorSpec:
    url = f"http://127.0.0.1:{port}/health"
    return SupervisorSpec(
        id="root",
        intensity=3,
        period=10,
        children=[
            ChildSpec(
                id="web",
                command=[sys.executable, SERVICE, str(port)],
                ready=HttpProbe(url),
                liveness=Liveness(HttpProbe(url, period=0.2, timeout=0.3), failures=2),
                shutdown=0.5,
            )
        ],
    )


def test_a_liveness_restart_live_matches_the_simulation() -> None:
    spec = _spec(free_port())
    simulated = simulate(spec, {"web": Hang(at=[1.0])}, duration=6.0)
    expected = event_sequence(simulated.events)
    assert ("root", "child_unhealthy", "web") in expected  # the scenario is the one meant
    assert simulated.children["web"].unhealthy == 1
    with Tree(spec) as tree:

        def healthy(n: int) -> bool:
            kinds = [e.context for e in tree.log.snapshot()]
            return kinds.count(EventKind.CHILD_HEALTHY) >= n

        wait_until(lambda: healthy(1), what="the first child_healthy")
        pid = tree.nanny.which_children().get()[0].pid
        os.kill(pid, signal.SIGSTOP)  # alive, and silent
        wait_until(lambda: healthy(2), what="healthy again after the restart")
        live = tree.log.snapshot()
    assert event_sequence(live) == expected
    exits = [e for e in live if e.context is EventKind.CHILD_EXITED]
    assert [e.reason.kind for e in exits if e.reason] == [ExitKind.UNHEALTHY]
