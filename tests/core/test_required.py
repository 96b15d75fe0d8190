"""The decision core with optional children (`required = False`, docs/otp-semantics.md
section 16): a failed first start leaves the child failed and starts the rest; a
required one still fails the supervisor's start, as OTP's init. A fake clock, no
processes."""

from __future__ import annotations

import pytest

from supervision import (
    AutoShutdown,
    ChildSpec,
    EventKind,
    Restart,
    SpecError,
    Strategy,
    SupervisorSpec,
)
from supervision._core import Supervisor
from tests.support.fake_executor import FakeClock, FakeExecutor, worker


def tree(
    strategy: Strategy = Strategy.ONE_FOR_ONE, intensity: int = 1, **web: object
) -> SupervisorSpec:
    return SupervisorSpec(
        "sup",
        strategy=strategy,
        intensity=intensity,
        children=[worker("a"), worker("web", **web), worker("b")],
    )


def started(spec: SupervisorSpec, failing: str) -> FakeExecutor:
    ex = FakeExecutor(Supervisor(spec), FakeClock())
    ex.fail_starts(failing)
    ex.start()
    ex.drain()
    return ex


def states(ex: FakeExecutor) -> dict[str, str]:
    return {c.id: c.state for c in ex.sup.children()}


@pytest.mark.parametrize(
    "strategy", [Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE]
)
def test_an_optional_child_that_fails_its_first_start_is_failed_and_the_rest_run(strategy):
    ex = started(tree(strategy, required=False), "web")
    assert states(ex) == {"a": "running", "web": "failed", "b": "running"}
    assert ex.sup.mode == "running" and not ex.exits
    assert ex.event_kinds() == [
        EventKind.SUPERVISOR_STARTED,
        EventKind.CHILD_STARTED,
        EventKind.START_FAILED,
        EventKind.CHILD_FAILED,
        EventKind.CHILD_STARTED,
    ]
    failed = next(e for e in ex.events if e.context is EventKind.CHILD_FAILED)
    assert failed.offender == "web" and failed.reason is not None
    assert "required = false" in failed.detail
    assert ex.sup.which_child("web").last_exit == failed.reason
    assert ex.sup.restart_times == ()  # nothing charged


def test_a_required_child_that_fails_its_first_start_still_fails_the_supervisor():
    ex = started(tree(), "web")  # required defaults to True: OTP's init (section 2.4)
    assert ex.sup.mode == "stopped"
    assert [e.reason.kind.value for e in ex.exits] == ["start_failure"]
    assert ex.terminated_ids() == ["a"]


def test_a_failed_optional_child_is_started_later_by_restart_child():
    ex = started(tree(required=False), "web")
    ex.clock.advance(10.0)
    reply = ex.call("restart_child", "web")
    ex.drain()
    assert reply.error is None
    assert states(ex) == {"a": "running", "web": "running", "b": "running"}


def test_an_optional_child_that_fails_a_later_start_is_restarted_as_any_child():
    """Only the FIRST start is optional: after it ran, its exits and failed restarts
    are OTP's (section 5.5), charged to the supervisor."""
    ex = started(tree(intensity=3, required=False), "nobody")
    ex.fail_starts("web", 1)
    ex.clock.advance(1.0)
    ex.exit("web")
    ex.drain()
    assert ex.sup.which_child("web").state == "running"
    assert len(ex.sup.restart_times) == 2  # the exit and the failed restart


def test_an_optional_significant_child_that_fails_triggers_auto_shutdown():
    spec = SupervisorSpec(
        "sup",
        auto_shutdown=AutoShutdown.ANY_SIGNIFICANT,
        children=[
            worker("a"),
            worker("web", required=False, significant=True, restart=Restart.TRANSIENT),
            worker("b"),
        ],
    )
    ex = started(spec, "web")
    assert EventKind.AUTO_SHUTDOWN in ex.event_kinds()
    assert ex.sup.mode == "stopped"
    assert ex.started_ids() == ["a"]  # b is not started by a supervisor shutting down
    assert ex.terminated_ids() == ["a"]


def test_required_must_be_a_bool():
    with pytest.raises(SpecError, match=r"'web'.*required.*expected True or False"):
        ChildSpec("web", command=["true"], required="no")  # type: ignore[arg-type]
