"""warm_start: the next incarnation is forked ahead and waits for the word."""

from __future__ import annotations

import os
import signal
import time

import psutil

from supervision import ChildSpec, EventKind, SpecError, SupervisorSpec
from tests.support import children_by_id, wait_event, wait_until
from tests.targets import children


def _launcher_children(ref) -> list[psutil.Process]:
    """The live processes of this tree's launcher: its children and their standbys."""
    found = []
    try:
        launcher = psutil.Process(_launcher_pid(ref))
        kids = launcher.children()
    except psutil.NoSuchProcess:
        return found
    for c in kids:
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                found.append(c)
        except psutil.NoSuchProcess:
            pass
    return found


def _launcher_pid(ref) -> int:
    launcher = ref._actor_weakref()._context.spawner  # the tree's own, not another test's
    return launcher.pid


def _warm_tree(tree, **fields):
    return tree(
        SupervisorSpec(
            id="root",
            intensity=100,
            period=10.0,
            children=[ChildSpec(id="w", target=children.sleep_forever, warm_start=True, **fields)],
        )
    )


def test_a_restart_runs_the_standby_forked_before_the_crash(tree):
    ref = _warm_tree(tree)
    first = children_by_id(ref)["w"].pid
    wait_until(lambda: len(_launcher_children(ref)) == 2, what="the standby is forked")
    standby = next(p for p in _launcher_children(ref) if p.pid != first)
    os.kill(first, signal.SIGKILL)
    event = wait_event(ref, EventKind.CHILD_STARTED, "w", where=lambda e: e.incarnation == 2)
    assert event.pid == standby.pid  # no fork on the restart path
    wait_until(lambda: len(_launcher_children(ref)) == 2, what="the standby is refilled")


def test_the_standby_is_stopped_with_its_child(tree):
    ref = _warm_tree(tree)
    wait_until(lambda: len(_launcher_children(ref)) == 2, what="the standby is forked")
    ref.proxy().terminate_child("w").get()
    wait_until(lambda: _launcher_children(ref) == [], what="child and standby gone")


def test_a_crash_storm_keeps_one_standby_at_most(tree):
    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=1000,
            period=10.0,
            children=[ChildSpec(id="w", target=children.exit_with, args=(1,), warm_start=True)],
        )
    )
    seen_max = 0
    deadline = time.monotonic() + 10
    log = ref.proxy().event_log().get()
    while time.monotonic() < deadline:
        seen_max = max(seen_max, len(_launcher_children(ref)))
        if any(e.incarnation and e.incarnation >= 50 for e in log.snapshot()):
            break
    assert seen_max <= 2
    wait_event(ref, EventKind.CHILD_STARTED, "w", where=lambda e: e.incarnation >= 50)


def test_an_environment_change_is_not_served_by_a_stale_standby(tree, tmp_path):
    out = tmp_path / "env"

    def report() -> None:
        out.write_text(os.environ.get("NANNYTREE_WARM", "unset"))
        children.sleep_forever()

    ref = tree(
        SupervisorSpec(
            id="root",
            intensity=10,
            children=[ChildSpec(id="w", target=report, warm_start=True)],
        )
    )
    wait_until(lambda: out.exists(), what="first run")
    wait_until(lambda: len(_launcher_children(ref)) == 2, what="the standby is forked")
    os.environ["NANNYTREE_WARM"] = "changed"
    try:
        os.kill(children_by_id(ref)["w"].pid, signal.SIGKILL)
        wait_until(lambda: out.read_text() == "changed", what="the new env reached the child")
    finally:
        del os.environ["NANNYTREE_WARM"]


def test_warm_start_is_for_forked_targets_only():
    for fields in ({"command": ["true"]}, {"target": print, "fresh_interpreter": True}):
        try:
            ChildSpec(id="x", warm_start=True, **fields)
        except SpecError as err:
            assert err.field == "warm_start"
        else:
            raise AssertionError(f"warm_start accepted with {fields}")
