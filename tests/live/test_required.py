"""An optional child (required=False) on real processes, through the Python API:
it fails its first start (it exits while awaited), is left failed, its siblings
start and run, and the event order is the simulator's (docs/otp-semantics.md section 16)."""

from __future__ import annotations

from supervision import ChildSpec, ExitKind, SupervisorSpec
from supervision.simulate import Healthy, event_sequence, simulate
from tests.targets import children


def test_an_optional_child_that_cannot_start_is_failed_live_as_simulated(nanny_tree):
    spec = SupervisorSpec(
        id="root",
        children=[
            ChildSpec(id="db", target=children.sleep_forever),
            ChildSpec(id="cache", target=children.exit_with, args=(1,), ready=5.0, required=False),
            ChildSpec(id="web", target=children.sleep_forever),
        ],
    )
    simulated = simulate(spec, {"cache": Healthy(failed_starts={1})}, duration=5.0)
    tree = nanny_tree(spec)  # started: the optional child did not stop the start
    states = {c.id: c.state for c in tree.nanny.which_children().get()}
    assert states == {"db": "running", "cache": "failed", "web": "running"}
    cache = tree.nanny.which_child("cache").get()
    assert cache.last_exit is not None and cache.last_exit.kind is ExitKind.EXIT_CODE  # why
    live = event_sequence(tree.log.snapshot())
    assert live == event_sequence(simulated.events)[: len(live)]
    assert ("root", "child_failed", "cache") in live
