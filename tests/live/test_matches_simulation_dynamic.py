"""Live and simulated agree on dynamic children: a simple_one_for_one child's crash,
scripted by its id in the simulation, and a terminate_child by pid."""

from __future__ import annotations

from supervision import ChildSpec, EventKind, ExitKind, ExitReason, SupervisorSpec
from supervision.simulate import Scripted, call, event_sequence, pid_of, simulate
from tests.support import children

KILLED = ExitReason(ExitKind.KILLED, signal=9)


def test_a_dynamic_childs_crash_and_a_terminate_by_pid_alike(nanny_tree):
    # Three children of "pool"; the second is killed and restarted; the third is
    # stopped by its pid; then the tree stops.
    pool = SupervisorSpec(
        id="pool",
        strategy="simple_one_for_one",
        intensity=3,
        period=60.0,
        children=[ChildSpec(id="w", target=children.sleep_forever)],
    )
    spec = SupervisorSpec(
        id="root",
        children=[ChildSpec(id="a", target=children.sleep_forever), pool],
    )
    starts = [call(1.0, "start_child", (), supervisor="pool") for _ in range(3)]
    simulated = simulate(
        spec,
        {"pool/w-2": Scripted([(5.0, KILLED)])},
        duration=20.0,
        calls=[
            *starts,
            call(7.0, "terminate_child", pid_of("w-3"), supervisor="pool"),
            call(8.0, "which_children", supervisor="pool"),
            call(9.0, "stop"),
        ],
    )
    expected = event_sequence(simulated.events)
    assert ("root/pool", "child_exited", "w-2") in expected
    assert [r.error for r in simulated.calls] == [None] * 6
    assert all(isinstance(r.value.pid, int) for r in simulated.calls[:3])

    tree = nanny_tree(spec)
    live_pool = tree.nanny.child_nanny("pool").get().proxy()
    infos = [live_pool.start_child(()).get() for _ in range(3)]
    assert [i.id for i in infos] == [r.value.id for r in simulated.calls[:3]]
    tree.kill("w-2")
    tree.wait_for(EventKind.CHILD_STARTED, "w-2")
    assert live_pool.terminate_child(tree.pid("w-3")).get() is None
    listing = live_pool.which_children().get()
    assert [c.id for c in listing] == [c.id for c in simulated.calls[4].value] == ["w-2", "w-1"]
    tree.ref.stop()
    tree.log.wait_for(
        lambda e: e.context is EventKind.SUPERVISOR_STOPPED and e.supervisor == "root", 10
    )
    assert event_sequence(tree.log.snapshot()) == expected
