"""`Tree.update` and `Tree.restart_all` (and AsyncNanny's) on real processes: the
operations the run host's `nannytree update` and `restart all` carry out, from
Python (docs/update.md, docs/how-to/python-api.md)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from actors import Tree, aio
from actors.testing import TreeHarness
from supervision import (
    ChildSpec,
    EventKind,
    Replace,
    StoreSpec,
    SupervisorSpec,
    UpdateFailed,
    UpdateRefused,
)


def sleeper(cid: str, seconds: int) -> ChildSpec:
    return ChildSpec(id=cid, command=["sleep", str(seconds)], shutdown=2)


def shop() -> SupervisorSpec:
    return SupervisorSpec(
        id="shop",
        intensity=5,
        children=[
            sleeper("db", 601),
            SupervisorSpec(id="apps", children=[sleeper("web", 602), sleeper("job", 603)]),
            sleeper("mail", 604),
        ],
    )


def pids(tree: Tree) -> dict[str, int | None]:
    """Every worker's pid, by path."""
    found: dict[str, int | None] = {}

    def walk(nodes: list) -> None:  # type: ignore[type-arg]
        for node in nodes:
            if node.info.type == "worker":
                found[node.path] = node.info.pid
            walk(list(node.children))

    walk(tree.nanny.which_tree().get(timeout=10))
    return found


def with_web(spec: SupervisorSpec, web: ChildSpec) -> SupervisorSpec:
    apps = spec.children[1]
    assert isinstance(apps, SupervisorSpec)
    return replace(
        spec,
        children=[
            spec.children[0],
            replace(apps, children=[web, apps.children[1]]),
            spec.children[2],
        ],
    )


def test_an_update_that_changes_one_command_restarts_only_that_child() -> None:
    with Tree(shop()) as tree:
        before = pids(tree)
        new = with_web(shop(), sleeper("web", 612))
        outcome = tree.update(new, settle=0)
        # Replaced in apps; then shop's stored spec of apps brought in step.
        assert [type(s) for s in outcome.applied] == [Replace, StoreSpec]
        assert outcome.failed == [] and outcome.skipped == []
        assert outcome.message == "changed: apps/web"
        after = pids(tree)
        assert after["shop/apps/web"] not in (None, before["shop/apps/web"])
        assert {p: after[p] for p in after if p != "shop/apps/web"} == {
            p: before[p] for p in before if p != "shop/apps/web"
        }
        assert tree.spec == new  # the tree as it now runs
        kinds = [e.context for e in tree.events()]
        assert EventKind.UPDATE_CHILD_REPLACED in kinds and EventKind.UPDATE_DONE in kinds
        assert tree.update(new).message == "no change"
        assert pids(tree) == after


def test_a_replacement_that_exits_within_its_settle_fails_the_update_and_the_rest_runs_on() -> None:
    with Tree(shop()) as tree:
        before = pids(tree)
        quits = ChildSpec(id="web", command=["sh", "-c", "echo no config >&2; exit 3"])
        with pytest.raises(UpdateFailed) as raised:
            tree.update(with_web(shop(), quits), settle=5)
        outcome = raised.value.outcome
        assert [(s.child, why.split(":")[0]) for s, why in outcome.failed] == [
            ("web", "failed to start")
        ]
        assert "failed: replace apps/web: failed to start: exit code 3" in str(raised.value)
        # Rolled back: the child runs the spec it ran before, in a new process.
        assert [s.child for s, _ in outcome.rolled_back] == ["web"]
        web = tree.nanny.child_nanny("apps").get(timeout=10).proxy().which_child("web")
        assert web.get(timeout=10).state == "running"
        after = pids(tree)
        assert after["shop/apps/web"] not in (None, before["shop/apps/web"])
        assert {p: after[p] for p in after if p != "shop/apps/web"} == {
            p: before[p] for p in before if p != "shop/apps/web"
        }
        assert tree.alive and tree.spec == shop()
        # The next update converges from the tree as it now runs.
        fixed = with_web(shop(), sleeper("web", 612))
        assert tree.update(fixed, settle=0).message == "changed: apps/web"
        assert pids(tree)["shop/apps/web"] is not None


def test_a_refused_preflight_stops_nothing_and_names_the_child_and_the_field(
    tmp_path: Path,
) -> None:
    with Tree(shop()) as tree:
        before = pids(tree)
        mark = len(tree.log)
        typo = ChildSpec(id="web", command=["slepe", "602"], stdout=str(tmp_path / "no" / "o"))
        with pytest.raises(UpdateRefused) as raised:
            tree.update(with_web(shop(), typo))
        assert raised.value.problems == (
            "child 'web': program 'slepe' is not an executable file on PATH; "
            "install it or give its full path",
            f"child 'web': stdout '{tmp_path}/no/o': folder '{tmp_path}/no' does not exist; "
            "create it or fix the path",
        )
        assert str(raised.value).startswith("update refused, nothing stopped: 2 problems")
        assert pids(tree) == before
        assert tree.spec == shop()
        refused = [e for e in tree.log.snapshot()[mark:] if e.context is EventKind.UPDATE_REFUSED]
        assert len(refused) == 1 and "slepe" in refused[0].detail
        with pytest.raises(UpdateRefused, match="the new tree is 'other', not 'shop'"):
            tree.update(replace(shop(), id="other"))
        with pytest.raises(ValueError, match="settle must be seconds"):
            tree.update(shop(), settle=-1)
        assert pids(tree) == before


def test_an_update_from_a_file_and_a_file_that_is_not_valid(tmp_path: Path) -> None:
    spec = SupervisorSpec(id="t", children=[sleeper("a", 611), sleeper("b", 612)])
    path = tmp_path / "t.toml"
    with Tree(spec) as tree:
        before = pids(tree)
        path.write_text(
            # As the Python spec it updates: no restart_limit (a file's default has one).
            "[defaults]\nrestart_limit = false\n"
            '[supervisor]\nid = "t"\n'
            '[[supervisor.children]]\nid = "a"\ncommand = ["sleep", "611"]\nshutdown = 2\n'
            '[[supervisor.children]]\nid = "b"\ncommand = ["sleep", "${SECONDS}"]\nshutdown = 2\n'
        )
        outcome = tree.update(path, settle=0, vars={"SECONDS": 622})
        assert outcome.message == "changed: b"
        after = pids(tree)
        assert after["t/a"] == before["t/a"] and after["t/b"] != before["t/b"]
        path.write_text('[supervisor]\nid = "t"\nintensity = "many"\n')
        with pytest.raises(UpdateRefused, match="the file is not valid, nothing changed"):
            tree.update(path)
        assert pids(tree) == after


def test_restart_all_restarts_every_child_of_the_root_in_order() -> None:
    with Tree(shop()) as tree:
        before = pids(tree)
        mark = len(tree.log)
        assert tree.restart_all() == ["db", "apps", "mail"]
        events = [e for e in tree.log.snapshot()[mark:] if e.supervisor == "shop"]
        stopped = [e.offender for e in events if e.context is EventKind.CHILD_TERMINATED]
        started = [e.offender for e in events if e.context is EventKind.CHILD_STARTED]
        assert stopped == ["mail", "apps", "db"]  # last started first
        assert started == ["db", "apps", "mail"]
        after = pids(tree)
        assert set(after) == set(before)
        assert all(after[p] is not None and after[p] != before[p] for p in before)


def test_the_async_twins_update_and_restart_all_without_blocking_the_loop() -> None:
    async def main() -> tuple[str, list[str], dict[str, int | None], dict[str, int | None]]:
        async with aio.AsyncNanny(shop()) as nanny:
            assert nanny.tree is not None
            before = pids(nanny.tree)
            outcome = await nanny.update(with_web(shop(), sleeper("web", 612)), settle=0)
            middle = pids(nanny.tree)
            ids = await nanny.restart_all()
            return outcome.message, ids, before, middle

    message, ids, before, middle = asyncio.run(main())
    assert message == "changed: apps/web"
    assert ids == ["db", "apps", "mail"]
    assert (
        middle["shop/db"] == before["shop/db"]
        and middle["shop/apps/web"] != before["shop/apps/web"]
    )


def test_the_harness_updates_and_restarts_all_and_its_waits_look_from_there() -> None:
    with TreeHarness(shop(), strict=True) as harness:
        old = harness.pid("web")
        outcome = harness.update(with_web(shop(), sleeper("web", 612)), settle=0)
        assert outcome.message == "changed: apps/web"
        assert harness.spec == with_web(shop(), sleeper("web", 612))
        started = harness.wait_for(EventKind.CHILD_STARTED, "web")  # since the update
        assert started.pid == harness.wait_ready("web").pid != old
        db = harness.pid("db")
        assert harness.restart_all() == ["db", "apps", "mail"]
        assert harness.wait_restarted("db").pid != db
        assert harness.unexpected() == []  # the operator's doing, not a crash
