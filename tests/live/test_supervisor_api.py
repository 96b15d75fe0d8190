"""One definition of the supervisor API (actors/_shell/_api.py, issue 36): the calls a
nanny answers during a start are the Protocol's read-only ones, a remote subtree's
stand-in raises NotForwarded for what it does not forward, and AsyncNanny has a twin
of every call."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest
from pykka import messages as pykka_messages

from actors import NannyActor, Tree, aio
from actors._remote._port import FORWARDED
from actors._shell import _nanny
from actors._shell._api import CALLS, READ_ONLY, SupervisorAPI
from actors.testing import FakeEngine
from supervision import (
    ChildSpec,
    LogLine,
    NannyError,
    NotForwarded,
    Placement,
    SupervisorSpec,
)
from tests.support import wait_until

SLEEP = ["sleep", "60"]


def test_the_read_only_calls_are_the_protocols_marked_ones_own_spec_included() -> None:
    marked = {n for n in CALLS if getattr(getattr(SupervisorAPI, n), "__read_only__", False)}
    assert marked == READ_ONLY
    assert {"own_spec", "which_children", "which_tree", "child_status"} <= READ_ONLY
    assert not READ_ONLY & {"start_child", "terminate_child", "replace_child", "read_output"}
    # The nanny's mailbox lets exactly these through while the core waits for a start.
    for name in CALLS:
        call = pykka_messages.ProxyCall(attr_path=(name,), args=(), kwargs={})
        assert _nanny._answers_now(call) == (name in READ_ONLY), name


def test_every_call_of_the_protocol_is_a_method_of_the_nanny_with_its_parameters() -> None:
    for name in CALLS:
        declared = inspect.signature(getattr(SupervisorAPI, name))
        answered = inspect.signature(getattr(NannyActor, name))
        assert list(answered.parameters.values()) == list(declared.parameters.values()), name


def test_own_spec_is_answered_while_a_start_waits(tmp_path: Path) -> None:
    gate = tmp_path / "go"
    # Ready once it says "go", which it does once the gate exists: its start waits.
    waiter = ChildSpec(
        id="slow",
        command=["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done; echo go; exec sleep 60"],
        ready=LogLine("go", stream="stdout"),
        start_timeout=30.0,
    )
    spec = SupervisorSpec(id="root", children=[waiter])
    trees: list[Tree] = []
    starting = threading.Thread(target=lambda: trees.append(Tree.start(spec)))
    starting.start()
    try:
        nanny = _root_while_starting()
        starting_now = lambda: nanny.which_child("slow").get(timeout=10).state == "starting"  # noqa: E731
        wait_until(starting_now, what="the start under way")
        # Answered from the core's state, not held behind the start (it would time out).
        assert nanny.own_spec().get(timeout=5).id == "root"
    finally:
        gate.touch()
        starting.join(30)
        for tree in trees:
            tree.stop()
    assert trees, "the tree did not start"


def _root_while_starting() -> Any:
    wait_until(lambda: bool(pykka.ActorRegistry.get_by_class(NannyActor)), what="the root")
    return pykka.ActorRegistry.get_by_class(NannyActor)[0].proxy()


# -- a remote subtree's stand-in ------------------------------------------------------------


@pytest.fixture
def remote_tree() -> Iterator[Tree]:
    spec = SupervisorSpec(
        id="root",
        children=[
            SupervisorSpec(
                id="ingest",
                placement=Placement(node="b"),
                children=[ChildSpec(id="reader", command=SLEEP)],
            )
        ],
    )
    tree = Tree.start(spec, engine=FakeEngine(["a", "b"]))
    yield tree
    tree.stop(timeout=30)


# Arguments good enough for each call the stand-in does not forward: it raises first.
_ARGS: dict[str, tuple[Any, ...]] = {
    "replace_child": ("reader", ChildSpec(id="reader", command=SLEEP)),
    "store_childspec": ("reader", ChildSpec(id="reader", command=SLEEP)),
    "change_settings": (SupervisorSpec(id="ingest", children=[]),),
    "insert_child": (ChildSpec(id="more", command=SLEEP), None),
    "move_child": ("reader", None),
    "reset_restarts": (),
    "which_childspecs": (),
    "own_spec": (),
    "event_log": (),
}


def test_the_forwarded_calls_are_calls_of_the_api() -> None:
    """The engine port's one list (the stand-in forwards it, the far side answers it)."""
    assert set(FORWARDED) < set(CALLS)


def test_each_call_not_forwarded_raises_not_forwarded_naming_the_call_and_the_subtree(
    remote_tree: Tree,
) -> None:
    stand_in = remote_tree.nanny.child_nanny("ingest").get().proxy()
    assert [c.id for c in stand_in.which_children().get()] == ["reader"]  # forwarded
    for name in sorted(set(CALLS) - set(FORWARDED)):
        args = _ARGS.get(name, ("reader",))
        with pytest.raises(NotForwarded) as error:
            getattr(stand_in, name)(*args).get(timeout=10)
        assert (error.value.call, error.value.supervisor, error.value.child) == (
            name,
            "root",
            "ingest",
        )
        assert name in str(error.value) and "root/ingest" in str(error.value)
        assert isinstance(error.value, NannyError)
    with pytest.raises(NotForwarded, match="terminate_child with dependents"):
        stand_in.terminate_child("reader", True).get(timeout=10)
    with pytest.raises(NotForwarded, match="read_output of the previous run"):
        stand_in.read_output("reader", "stderr", True).get(timeout=10)
    assert remote_tree.nanny.which_child("ingest").get().state == "running"  # nothing broke


# -- AsyncNanny ----------------------------------------------------------------------------


def test_every_call_of_the_protocol_has_an_async_twin_with_its_parameters_and_answer() -> None:
    for name in CALLS:
        twin = getattr(aio.AsyncNanny, name, None)
        assert twin is not None, f"AsyncNanny has no {name}"
        assert inspect.iscoroutinefunction(twin), name
        declared, mirrored = (
            inspect.signature(getattr(SupervisorAPI, name)),
            inspect.signature(twin),
        )
        assert list(mirrored.parameters.values()) == list(declared.parameters.values()), name
        assert mirrored.return_annotation == declared.return_annotation, name


def test_the_async_twins_answer_as_the_nanny_does() -> None:
    import asyncio

    spec = SupervisorSpec(id="root", children=[ChildSpec(id="a", command=SLEEP)])

    async def main() -> tuple[Any, ...]:
        async with aio.AsyncNanny(spec) as nanny:
            assert nanny.tree is not None
            own = await nanny.own_spec()
            specs = await nanny.which_childspecs()
            status = await nanny.child_status("a")
            log = await nanny.event_log()
            await nanny.terminate_child("a", False)
            stopped = (await nanny.which_child("a")).state
            info = await nanny.restart_child("a")
            return own.id, [i.id for i, _ in specs], status, log is nanny.tree.log, stopped, info

    own, ids, status, same_log, stopped, info = asyncio.run(main())
    assert (own, ids, status, same_log, stopped) == ("root", ["a"], "", True, "stopped")
    assert info.state == "running" and info.pid
