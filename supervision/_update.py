"""What an update of a running tree does, decided from its specs: which children
are stopped, deleted and started, and in which order.

`plan_update(old, new)` is `supervisorctl update` (and `nannytree reload`): the
root's children of `new` that `old` lacks are started, those it no longer has are
stopped and deleted, those whose spec differs are replaced, the others keep running
untouched. `plan_restart_all(ids)` is `supervisorctl restart all`. Both return an
`UpdatePlan`, steps in the order they must be carried out, each naming the
supervisor API call that carries it out and why it is there.

What the supervisor API offers sets what a plan may ask: `start_child` adds a child
at the end of the start order, and a supervisor's stored spec of a child can only be
replaced by deleting the child and adding it again. So a changed child is started
last, and a changed nested supervisor is replaced whole (its subtree restarts):
updating only its changed children would leave its parent holding the old spec,
which the parent's next restart of it would bring back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from ._spec import AnySpec, Strategy, SupervisorSpec


class Change(StrEnum):
    """Why a step is in a plan."""

    ADDED = "added"  # in the new spec only
    CHANGED = "changed"  # in both, with another spec
    REMOVED = "removed"  # in the old spec only
    RESTARTED = "restarted"  # restart all: the same spec, started again


@dataclass(frozen=True)
class StopOld:
    """Stop the child, keeping its spec: `terminate_child(child)`."""

    child: str
    change: Change


@dataclass(frozen=True)
class DeleteOld:
    """Forget the stopped child's spec: `delete_child(child)`."""

    child: str
    change: Change


@dataclass(frozen=True)
class StartNew:
    """Add the child and start it, last in the start order: `start_child(spec)`."""

    spec: AnySpec
    change: Change

    @property
    def child(self) -> str:
        return self.spec.id


@dataclass(frozen=True)
class StartAgain:
    """Start the stopped child from the spec it kept: `restart_child(child)`."""

    child: str
    change: Change


UpdateStep: TypeAlias = StopOld | DeleteOld | StartNew | StartAgain


@dataclass(frozen=True)
class UpdatePlan:
    """The steps of one update of a supervisor's children, in the order to take them."""

    steps: tuple[UpdateStep, ...] = ()

    def children(self, change: Change) -> tuple[str, ...]:
        """The children a step touches for `change`, each once, in step order."""
        return tuple(dict.fromkeys(s.child for s in self.steps if s.change is change))

    @property
    def added(self) -> tuple[str, ...]:
        return self.children(Change.ADDED)

    @property
    def changed(self) -> tuple[str, ...]:
        return self.children(Change.CHANGED)

    @property
    def removed(self) -> tuple[str, ...]:
        return self.children(Change.REMOVED)

    def __bool__(self) -> bool:
        return bool(self.steps)


def plan_update(old: SupervisorSpec, new: SupervisorSpec) -> UpdatePlan:
    """The steps that take a supervisor running `old`'s children to `new`'s.

    Removed children are stopped and deleted first (in `old`'s order), then changed
    ones (in `new`'s order), each stopped and deleted before the next; then the
    changed ones are started again, then the added ones, in `new`'s order. Children
    whose spec is equal are not touched. The supervisor's own settings (strategy,
    intensity, ...) are not part of the plan: they apply when it starts again.

    Raises ValueError when `new` is another tree, or when the template of a running
    simple_one_for_one supervisor would change: its children were made from it and
    have ids of their own, so no step could name them.
    """
    if new.id != old.id:
        raise ValueError(f"an update keeps the tree: {new.id!r} is not {old.id!r}")
    before = {c.id: c for c in old.children}
    after = {c.id: c for c in new.children}
    if old.strategy is Strategy.SIMPLE_ONE_FOR_ONE and before != after:
        raise ValueError(
            f"the children of simple_one_for_one supervisor {old.id!r} are made from its "
            "template, which cannot change while they run; stop the tree and run it again"
        )
    removed = [c for c in before if c not in after]
    changed = [c for c in after if c in before and after[c] != before[c]]
    added = [c for c in after if c not in before]
    steps: list[UpdateStep] = []
    gone = [(c, Change.REMOVED) for c in removed] + [(c, Change.CHANGED) for c in changed]
    for child, why in gone:
        steps += [StopOld(child, why), DeleteOld(child, why)]
    steps += [StartNew(after[c], Change.CHANGED) for c in changed]
    steps += [StartNew(after[c], Change.ADDED) for c in added]
    return UpdatePlan(tuple(steps))


def plan_restart_all(children: Sequence[str]) -> UpdatePlan:
    """Restart every child (given in start order): all stopped, last started first,
    then all started again in start order, each from the spec it kept."""
    stops = [StopOld(c, Change.RESTARTED) for c in reversed(children)]
    starts = [StartAgain(c, Change.RESTARTED) for c in children]
    return UpdatePlan((*stops, *starts))
