"""The README's testing examples, as they are written there."""

from actors import testing
from supervision import ChildSpec, EventKind, ExitKind, Strategy, SupervisorSpec


def test_pool_restarts_together(nanny_tree):
    tree = nanny_tree(
        SupervisorSpec(
            id="pool",
            strategy=Strategy.ONE_FOR_ALL,
            children=[
                ChildSpec(id="a", target=testing.ready_after, args=(0.1,), ready="notify"),
                ChildSpec(id="b", target=testing.run_forever),
            ],
        )
    )
    probe = tree.probe()  # records events from now on
    tree.kill("a")  # SIGKILL (or tree.kill("a", signal.SIGTERM))
    tree.wait_for(EventKind.CHILD_STARTED, "b", where=lambda e: e.incarnation == 2)
    assert probe.contexts("b")[:2] == [EventKind.CHILD_TERMINATED, EventKind.CHILD_STARTED]


def test_crash_with_an_exception(nanny_tree):
    tree = nanny_tree(
        SupervisorSpec(
            id="root", children=[ChildSpec(id="w", target=testing.run_forever, restart="temporary")]
        )
    )
    tree.crash("w", ValueError("injected"))  # raised inside the running target
    reason = tree.wait_for(EventKind.CHILD_EXITED, "w").reason
    assert reason.kind is ExitKind.EXCEPTION and reason.exc_type == "ValueError"
