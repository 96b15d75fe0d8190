"""Optional children in the simulator (docs/otp-semantics.md section 16): a child
with required=False that fails its first start is failed and its siblings run the
whole run; a required one still stops the tree at its start, as OTP's init. The
decision is the core's (tests/core/test_required.py); live: tests/live/test_required.py."""

from __future__ import annotations

import pytest

from supervision import ChildSpec, EventKind, ExitKind, Strategy, SupervisorSpec
from supervision.simulate import Healthy, call, simulate


def spec(strategy: Strategy = Strategy.ONE_FOR_ONE, required: bool = False) -> SupervisorSpec:
    return SupervisorSpec(
        "root",
        strategy=strategy,
        children=[
            ChildSpec("db", command=["db"]),
            ChildSpec("cache", command=["cache"], required=required),
            ChildSpec("web", command=["web"]),
        ],
    )


FIRST_START_FAILS = {"cache": Healthy(failed_starts={1})}


@pytest.mark.parametrize(
    "strategy", [Strategy.ONE_FOR_ONE, Strategy.ONE_FOR_ALL, Strategy.REST_FOR_ONE]
)
def test_an_optional_child_that_cannot_start_is_failed_and_the_rest_serve(strategy):
    result = simulate(spec(strategy), FIRST_START_FAILS, duration=60.0, root_restart_delay=None)
    kinds = [(e.offender, e.context) for e in result.events if e.offender == "cache"]
    assert kinds == [("cache", EventKind.START_FAILED), ("cache", EventKind.CHILD_FAILED)]
    cache, db, web = (result.children[p] for p in ("cache", "db", "web"))
    assert (cache.failed, cache.start_failures, cache.availability) == (1, 1, 0.0)
    assert db.availability == web.availability == 1.0
    assert result.tree.give_ups == 0 and result.ended_at == 60.0


def test_a_required_child_that_cannot_start_stops_the_tree_at_its_start():
    result = simulate(
        spec(required=True), FIRST_START_FAILS, duration=60.0, root_restart_delay=None
    )
    assert [r.kind for _, r in result.tree.root_exits] == [ExitKind.START_FAILURE]
    assert result.children["web"].starts == 0  # never started: OTP's init stops there


def test_a_failed_optional_child_started_later_serves_from_then_on():
    result = simulate(
        spec(),
        FIRST_START_FAILS,
        duration=60.0,
        root_restart_delay=None,
        calls=[call(30.0, "restart_child", "cache")],
    )
    assert result.calls[0].error is None
    assert result.children["cache"].availability == pytest.approx(0.5)
