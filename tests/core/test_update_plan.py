"""plan_update and plan_restart_all: what an update and a restart-all do to a
tree (nested supervisors included), decided from specs alone (no process, no clock)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervision import (
    AnySpec,
    Change,
    ChangeSettings,
    ChildSpec,
    DeleteOld,
    Insert,
    Move,
    Replace,
    Restart,
    StartAgain,
    StopOld,
    StoreSpec,
    Strategy,
    SupervisorSpec,
    UpdatePlan,
    plan_restart_all,
    plan_update,
)


def worker(child_id: str, version: int = 0) -> ChildSpec:
    return ChildSpec(id=child_id, command=["sleep", str(600 + version)])


def tree(*children: AnySpec, strategy: Strategy = Strategy.ONE_FOR_ONE) -> SupervisorSpec:
    return SupervisorSpec(id="root", strategy=strategy, children=list(children))


@dataclass
class Running:
    spec: AnySpec
    up: bool = True
    children: list[Running] | None = None  # a nested supervisor's, as it holds them


def running(specs: Sequence[AnySpec]) -> list[Running]:
    return [
        Running(s, children=running(s.children) if isinstance(s, SupervisorSpec) else None)
        for s in specs
    ]


def apply(plan: UpdatePlan, children: list[AnySpec]) -> tuple[list[Running], set[str]]:
    """The plan carried out on a model of a tree, with the rules of the supervisor
    API (terminate a running child, delete a stopped one, insert at a place, replace
    and move in place, store a nested supervisor's spec); the root's children after,
    and the paths of the children a step touched (a StoreSpec touches nothing)."""
    model = running(children)
    touched: set[str] = set()

    def level(path: str) -> list[Running]:
        found = model
        for part in path.split("/")[1:]:
            node = find(found, part)
            assert node.up and node.children is not None, f"{path} is not a running supervisor"
            found = node.children
        return found

    def find(found: list[Running], child: str) -> Running:
        match = [r for r in found if r.spec.id == child]
        assert len(match) == 1, f"no child {child!r} to act on"
        return match[0]

    def place(found: list[Running], node: Running, after: str | None) -> None:
        found.insert(0 if after is None else found.index(find(found, after)) + 1, node)

    for step in plan.steps:
        if isinstance(step, ChangeSettings):  # in place: touches no child
            if step.supervisor:
                node = find(level(step.supervisor), step.child)
                assert node.up and node.children is not None, f"{step.path} is not running"
                assert isinstance(node.spec, SupervisorSpec)
                assert node.spec.strategy is step.spec.strategy, "a strategy changed in place"
            continue
        found = level(step.supervisor or "root")
        if not isinstance(step, StoreSpec):
            touched.add(f"{step.supervisor}/{step.child}" if step.supervisor else step.child)
        if isinstance(step, StopOld):
            assert find(found, step.child).up, f"{step.child} stopped twice"
            find(found, step.child).up = False
        elif isinstance(step, DeleteOld):
            assert not find(found, step.child).up, f"{step.child} deleted while running"
            found.remove(find(found, step.child))
        elif isinstance(step, Insert):
            assert all(r.spec.id != step.child for r in found), f"{step.child} already present"
            place(found, running([step.spec])[0], step.after)
        elif isinstance(step, Replace):
            node = find(found, step.child)
            found[found.index(node)] = running([step.spec])[0]
        elif isinstance(step, Move):
            node = find(found, step.child)
            found.remove(node)
            place(found, node, step.after)
        elif isinstance(step, StoreSpec):
            node = find(found, step.child)
            assert node.children is not None
            held = [r.spec for r in node.children]
            assert held == list(step.spec.children), "stored a spec its children do not run"
            node.spec = step.spec
        elif isinstance(step, StartAgain):
            assert not find(found, step.child).up, f"{step.child} started while running"
            find(found, step.child).up = True
        else:
            raise AssertionError(f"a plan made a {step}")
    return model, touched


def specs_of(model: list[Running]) -> list[AnySpec]:
    return [r.spec for r in model]


# A child list: unique ids, each with a version (two specs of one id differ by it),
# now and then a nested supervisor (of the same kind), with its own children.
IDS = st.sampled_from("abcdefgh")


@st.composite
def children(draw: st.DrawFn, depth: int = 2) -> list[AnySpec]:
    pairs = draw(st.lists(st.tuples(IDS, st.integers(0, 2)), unique_by=lambda p: p[0], max_size=6))
    specs: list[AnySpec] = []
    for child_id, version in pairs:
        if depth and child_id in "gh":
            inner = draw(children(depth - 1))
            specs.append(SupervisorSpec(id=child_id, intensity=1 + version % 2, children=inner))
        else:
            specs.append(worker(child_id, version))
    return specs


def up_everywhere(model: list[Running]) -> bool:
    return all(r.up and (r.children is None or up_everywhere(r.children)) for r in model)


def untouched_paths(old: Sequence[AnySpec], new: Sequence[AnySpec], path: str) -> set[str]:
    """Paths of the children whose spec is equal in both (nothing in them changed)."""
    before = {c.id: c for c in old}
    kept: set[str] = set()
    for c in new:
        was = before.get(c.id)
        if was == c:
            kept.add(f"{path}/{c.id}")
            if isinstance(c, SupervisorSpec):
                kept |= all_paths(c.children, f"{path}/{c.id}")
        elif (
            isinstance(was, SupervisorSpec)
            and isinstance(c, SupervisorSpec)
            and was.strategy is c.strategy  # its intensity changes in place: gone into
        ):
            kept |= untouched_paths(was.children, c.children, f"{path}/{c.id}")
    return kept


def all_paths(specs: Sequence[AnySpec], path: str) -> set[str]:
    found = set()
    for c in specs:
        found.add(f"{path}/{c.id}")
        if isinstance(c, SupervisorSpec):
            found |= all_paths(c.children, f"{path}/{c.id}")
    return found


@given(children(), children())
def test_the_plan_takes_the_live_tree_to_the_file_and_touches_no_other_child(old, new):
    plan = plan_update(tree(*old), tree(*new))
    model, touched = apply(plan, old)
    assert up_everywhere(model)
    # File order, at every level: a changed child keeps its place, an added one is
    # where the file puts it.
    assert specs_of(model) == new
    moved = {f"root/{m}" for m in plan.moved}
    assert not (touched - moved) & untouched_paths(old, new, "root"), (
        "a child the file did not change was touched"
    )


@given(children(), children())
def test_removals_come_first_and_each_step_names_a_supervisor(old, new):
    steps = plan_update(tree(*old), tree(*new)).steps
    kinds = [not isinstance(s, StopOld | DeleteOld) for s in steps]
    assert all(s.supervisor.startswith("root") for s in steps)
    # Removals of one supervisor come before its other steps.
    for sup in {s.supervisor for s in steps}:
        mine = [k for k, s in zip(kinds, steps, strict=True) if s.supervisor == sup]
        assert mine == sorted(mine)


@given(children())
def test_an_unchanged_file_changes_nothing(specs):
    assert not plan_update(tree(*specs), tree(*specs))
    as_tuples = [
        SupervisorSpec(id=s.id, intensity=s.intensity, children=tuple(s.children))
        if isinstance(s, SupervisorSpec)
        else s
        for s in specs
    ]
    assert not plan_update(tree(*specs), tree(*as_tuples)), "a tuple of children is no change"


def test_the_update_of_the_cli_example_step_by_step():
    old = tree(worker("keep"), worker("edit"), worker("drop"))
    new = tree(worker("new"), worker("keep"), worker("edit", 1))
    plan = plan_update(old, new)
    assert plan.steps == (
        StopOld("drop", Change.REMOVED, "root"),
        DeleteOld("drop", Change.REMOVED, "root"),
        Insert("root", worker("new"), None),
        Replace("root", worker("edit", 1)),
    )
    assert (plan.added, plan.changed, plan.removed) == (("new",), ("edit",), ("drop",))


def test_a_changed_grandchild_is_replaced_alone_and_its_parent_keeps_the_new_spec():
    """Its siblings and cousins are not touched; the parent's stored spec of the
    nested supervisor is brought in step, so its next restart starts what runs."""
    apps = SupervisorSpec(id="apps", children=[worker("redis"), worker("app")])
    old = tree(worker("a"), apps, SupervisorSpec(id="more", children=[worker("c")]))
    apps2 = SupervisorSpec(id="apps", children=[worker("redis"), worker("app", 1)])
    new = tree(worker("a"), apps2, SupervisorSpec(id="more", children=[worker("c")]))
    plan = plan_update(old, new)
    assert plan.steps == (
        Replace("root/apps", worker("app", 1)),
        StoreSpec("root", "apps", apps2),
    )
    assert plan.changed == ("apps/app",)


def test_a_nested_supervisor_whose_strategy_changed_is_replaced_whole():
    old = tree(SupervisorSpec(id="pool", children=[worker("w")]))
    pool = SupervisorSpec(id="pool", strategy=Strategy.ONE_FOR_ALL, children=[worker("w", 1)])
    assert plan_update(old, tree(pool)).steps == (Replace("root", pool),)


def test_settings_change_in_place_first_and_the_children_are_gone_into():
    """OTP's code_change: a supervisor's intensity, period, auto_shutdown and
    max_children change without a restart, before its children's steps; its restart,
    shutdown, ... as a child are its parent's, kept by the StoreSpec."""
    pool = SupervisorSpec(id="pool", children=[worker("w"), worker("v")])
    old = SupervisorSpec(id="root", intensity=1, children=[worker("a"), pool])
    pool2 = SupervisorSpec(
        id="pool", intensity=5, period=60, restart=Restart.TRANSIENT, children=[worker("w", 1)]
    )
    new = SupervisorSpec(id="root", intensity=3, children=[worker("a"), pool2])
    plan = plan_update(old, new)
    assert plan.steps == (
        ChangeSettings("", "root", new, old),
        ChangeSettings("root", "pool", pool2, pool),
        StopOld("v", Change.REMOVED, "root/pool"),
        DeleteOld("v", Change.REMOVED, "root/pool"),
        Replace("root/pool", worker("w", 1)),
        StoreSpec("root", "pool", pool2),
    )
    assert plan.settings == ("root", "pool")
    assert plan.steps[0].detail == "intensity 1 -> 3"
    assert (
        plan.steps[1].detail == "intensity 1 -> 5, period 5 -> 60, restart permanent -> transient"
    )
    assert plan.changed == ("pool/w",) and plan.removed == ("pool/v",)


def test_a_dynamic_pool_whose_settings_changed_keeps_its_children():
    jobs = SupervisorSpec(id="jobs", strategy=Strategy.SIMPLE_ONE_FOR_ONE, children=[worker("j")])
    jobs2 = SupervisorSpec(
        id="jobs", strategy=Strategy.SIMPLE_ONE_FOR_ONE, max_children=3, children=[worker("j")]
    )
    assert plan_update(tree(jobs), tree(jobs2)).steps == (
        ChangeSettings("root", "jobs", jobs2, jobs),
        StoreSpec("root", "jobs", jobs2),
    )


def test_a_nested_supervisor_the_caller_cannot_reach_into_is_replaced_whole():
    old = tree(SupervisorSpec(id="pool", children=[worker("w")]))
    pool = SupervisorSpec(id="pool", children=[worker("w", 1)])
    assert plan_update(old, tree(pool), whole={"root/pool"}).steps == (Replace("root", pool),)


def test_a_kept_child_the_file_moved_is_moved_not_restarted():
    old = tree(worker("a"), worker("b"), worker("c"))
    plan = plan_update(old, tree(worker("c"), worker("a"), worker("b")))
    assert plan.steps == (Move("root", "c", None),)
    assert plan.moved == ("c",)


def test_another_tree_is_refused():
    with pytest.raises(ValueError, match="'other' is not 'root'"):
        plan_update(tree(), SupervisorSpec(id="other"))


def test_a_running_simple_one_for_one_keeps_its_template():
    simple = tree(worker("job"), strategy=Strategy.SIMPLE_ONE_FOR_ONE)
    assert not plan_update(simple, simple)
    with pytest.raises(ValueError, match="simple_one_for_one supervisor 'root'"):
        plan_update(simple, tree(worker("job", 1), strategy=Strategy.SIMPLE_ONE_FOR_ONE))


def test_a_nested_simple_one_for_one_whose_template_changed_is_replaced_whole():
    jobs = SupervisorSpec(id="jobs", strategy=Strategy.SIMPLE_ONE_FOR_ONE, children=[worker("j")])
    jobs2 = SupervisorSpec(
        id="jobs", strategy=Strategy.SIMPLE_ONE_FOR_ONE, children=[worker("j", 1)]
    )
    assert plan_update(tree(jobs), tree(jobs2)).steps == (Replace("root", jobs2),)


@given(st.lists(IDS, unique=True))
def test_restart_all_stops_last_started_first_then_starts_in_order(ids):
    plan = plan_restart_all(ids)
    assert plan.steps == (
        *(StopOld(c, Change.RESTARTED) for c in reversed(ids)),
        *(StartAgain(c, Change.RESTARTED) for c in ids),
    )
    model, touched = apply(plan, [worker(c) for c in ids])
    assert [r.spec.id for r in model] == ids and all(r.up for r in model)
    assert touched == set(ids)
