"""A test author's mistakes fail at once and name the fix: a misspelt child id, an
event kind given by a wrong name (issue 38, item 1)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from actors.testing import TreeHarness
from supervision import ChildSpec, EventKind, Strategy, SupervisorSpec

SLEEP = ["sleep", "60"]


def _spec() -> SupervisorSpec:
    return SupervisorSpec(
        "app",
        children=[
            ChildSpec("service", command=SLEEP, stderr="capture"),
            SupervisorSpec("pool", children=[ChildSpec("worker", command=SLEEP)]),
        ],
    )


MISSPELT: dict[str, Callable[[TreeHarness], Any]] = {
    "wait_for": lambda h: h.wait_for(EventKind.CHILD_STARTED, "sevrice"),
    "wait_ready": lambda h: h.wait_ready("sevrice"),
    "wait_restarted": lambda h: h.wait_restarted("sevrice"),
    "wait_output": lambda h: h.wait_output("sevrice", "x"),
    "expect_no_event": lambda h: h.expect_no_event(EventKind.CHILD_EXITED, "sevrice", within=5),
    "probe.wait_for": lambda h: h.probe().wait_for(EventKind.CHILD_STARTED, "sevrice"),
    "pid": lambda h: h.pid("sevrice"),
    "kill": lambda h: h.kill("sevrice"),
    "output": lambda h: h.output("sevrice"),
}


@pytest.mark.parametrize("call", sorted(MISSPELT))
def test_a_misspelt_child_id_fails_at_once_with_a_did_you_mean(
    nanny_tree: Callable[..., TreeHarness], call: str
) -> None:
    tree = nanny_tree(_spec())
    began = time.monotonic()
    with pytest.raises(LookupError) as raised:
        MISSPELT[call](tree)
    took = time.monotonic() - began
    message = str(raised.value)
    assert "'sevrice'" in message and "did you mean 'service'" in message, message
    assert re.search(r"Its children: .*service.*worker", message), message
    # Not a wait's timeout (10 s; expect_no_event's 5 s): it failed before any wait.
    assert took < 4, took


def test_a_nested_child_and_a_path_are_known(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = nanny_tree(_spec())
    assert tree.wait_ready("worker").id == "worker"
    assert tree.wait_ready("app/pool/worker").id == "worker"
    tree.expect_no_event(EventKind.CHILD_EXITED, "pool/worker", within=0.1)


def test_a_dynamic_child_its_supervisor_could_still_add_is_not_refused(
    nanny_tree: Callable[..., TreeHarness],
) -> None:
    spec = SupervisorSpec(
        "pool", strategy=Strategy.SIMPLE_ONE_FOR_ONE, children=[ChildSpec("w", command=SLEEP)]
    )
    tree = nanny_tree(spec)
    tree.expect_no_event(EventKind.CHILD_STARTED, "w-3", within=0.1)  # not yet added
    with pytest.raises(LookupError, match=r"no child 'ww-3' in tree 'pool'\. Its children: w\."):
        tree.expect_no_event(EventKind.CHILD_STARTED, "ww-3", within=0.1)


def test_a_child_the_tree_had_is_still_known(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = nanny_tree(_spec())
    mark = tree.mark()
    tree.nanny.terminate_child("service").get()
    tree.nanny.delete_child("service").get()
    tree.wait_for(EventKind.CHILD_TERMINATED, "service", since=mark)


def test_an_event_kind_by_its_name(nanny_tree: Callable[..., TreeHarness]) -> None:
    tree = nanny_tree(_spec())
    event = tree.wait_for("child_started", "service", since=0)
    assert event.context is EventKind.CHILD_STARTED
    with pytest.raises(
        ValueError, match=r"no event kind 'child_strated'; did you mean 'child_started'"
    ):
        tree.wait_for("child_strated", "service")
    with pytest.raises(TypeError, match="an event kind is an EventKind or its name"):
        tree.wait_for(3, "service")  # type: ignore[arg-type]
