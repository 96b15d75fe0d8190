"""plan_update and plan_restart_all: what a reload and a restart-all do to a
supervisor's children, decided from specs alone (no process, no clock)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from supervision import (
    AnySpec,
    Change,
    ChildSpec,
    DeleteOld,
    StartAgain,
    StartNew,
    StopOld,
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


def apply(plan: UpdatePlan, children: list[AnySpec]) -> tuple[list[Running], set[str]]:
    """The plan carried out on a model of a supervisor's child list, with the rules
    of its API (terminate a running child, delete a stopped one, start_child appends,
    restart_child starts a stopped one); the children after, and those it touched."""
    model = [Running(spec) for spec in children]
    touched: set[str] = set()

    def find(child: str) -> Running:
        found = [r for r in model if r.spec.id == child]
        assert len(found) == 1, f"no child {child!r} to act on"
        return found[0]

    for step in plan.steps:
        touched.add(step.child)
        if isinstance(step, StopOld):
            assert find(step.child).up, f"{step.child} stopped twice"
            find(step.child).up = False
        elif isinstance(step, DeleteOld):
            assert not find(step.child).up, f"{step.child} deleted while running"
            model.remove(find(step.child))
        elif isinstance(step, StartNew):
            assert all(r.spec.id != step.child for r in model), f"{step.child} already present"
            model.append(Running(step.spec))
        else:
            assert isinstance(step, StartAgain)
            assert not find(step.child).up, f"{step.child} started while running"
            find(step.child).up = True
    return model, touched


# A child list: unique ids, each with a version (two specs of one id differ by it),
# now and then a nested supervisor.
IDS = st.sampled_from("abcdefgh")


@st.composite
def children(draw: st.DrawFn) -> list[AnySpec]:
    pairs = draw(st.lists(st.tuples(IDS, st.integers(0, 2)), unique_by=lambda p: p[0], max_size=8))
    specs: list[AnySpec] = []
    for child_id, version in pairs:
        if draw(st.booleans()) and child_id in "gh":
            specs.append(SupervisorSpec(id=child_id, children=[worker("w", version)]))
        else:
            specs.append(worker(child_id, version))
    return specs


@given(children(), children())
def test_the_plan_takes_the_old_children_to_the_new_ones_and_touches_no_other(old, new):
    plan = plan_update(tree(*old), tree(*new))
    model, touched = apply(plan, old)
    assert all(r.up for r in model)
    assert {r.spec.id: r.spec for r in model} == {c.id: c for c in new}
    before = {c.id: c for c in old}
    kept = [c.id for c in new if before.get(c.id) == c]
    assert not touched & set(kept), "a child the file did not change was touched"
    # The kept ones stay in their order; the changed, then the added, follow in new's.
    changed = [c.id for c in new if c.id in before and c.id not in kept]
    added = [c.id for c in new if c.id not in before]
    in_old_order = [c.id for c in old if c.id in kept]
    assert [r.spec.id for r in model] == in_old_order + changed + added
    assert (plan.added, plan.changed) == (tuple(added), tuple(changed))
    assert set(plan.removed) == {c.id for c in old} - {c.id for c in new}


@given(children(), children())
def test_every_stop_comes_before_every_start(old, new):
    steps = plan_update(tree(*old), tree(*new)).steps
    kinds = [isinstance(s, StartNew) for s in steps]
    assert kinds == sorted(kinds)


@given(children())
def test_an_unchanged_file_changes_nothing(specs):
    assert not plan_update(tree(*specs), tree(*specs))


def test_the_reload_of_the_cli_example_step_by_step():
    old = tree(worker("keep"), worker("edit"), worker("drop"))
    new = tree(worker("keep"), worker("edit", 1), worker("new"))
    assert plan_update(old, new).steps == (
        StopOld("drop", Change.REMOVED),
        DeleteOld("drop", Change.REMOVED),
        StopOld("edit", Change.CHANGED),
        DeleteOld("edit", Change.CHANGED),
        StartNew(worker("edit", 1), Change.CHANGED),
        StartNew(worker("new"), Change.ADDED),
    )


def test_a_changed_nested_supervisor_is_replaced_whole():
    """Its parent keeps the spec it starts it from, and only a delete and an add
    replace that: updating the nested children alone would be undone by the
    parent's next restart of it."""
    old = tree(worker("a"), SupervisorSpec(id="pool", children=[worker("w"), worker("x")]))
    pool = SupervisorSpec(id="pool", children=[worker("w", 1), worker("x")])
    plan = plan_update(old, tree(worker("a"), pool))
    assert plan.steps == (
        StopOld("pool", Change.CHANGED),
        DeleteOld("pool", Change.CHANGED),
        StartNew(pool, Change.CHANGED),
    )


def test_another_tree_is_refused():
    with pytest.raises(ValueError, match="'other' is not 'root'"):
        plan_update(tree(), SupervisorSpec(id="other"))


def test_a_running_simple_one_for_one_keeps_its_template():
    simple = tree(worker("job"), strategy=Strategy.SIMPLE_ONE_FOR_ONE)
    assert not plan_update(simple, simple)
    with pytest.raises(ValueError, match="simple_one_for_one supervisor 'root'"):
        plan_update(simple, tree(worker("job", 1), strategy=Strategy.SIMPLE_ONE_FOR_ONE))


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
