"""What an update of a running tree does, decided from its specs: which children
are stopped, deleted, replaced, added and moved, by which supervisor, in which order.

`plan_update(live, new)` is `supervisorctl update` (and `nannytree update`): `live`
is what the running supervisors hold now (docs/update.md), `new` the edited file.
It recurses into nested supervisors: a changed grandchild is replaced alone, its
siblings and cousins keep running. Every step names the supervisor (by path, as
events do: "shop/apps") whose API carries it out. `plan_restart_all(ids)` is
`supervisorctl restart all`. Both return an `UpdatePlan`, steps in the order they
must be carried out.

Beside the plan, the rest of what an update decides without touching a process:
the preflight (`preflight`: what makes it refused before anything stops), the
apply policy (`stops_the_update`, `taken_after_a_stop`: which step failures stop
it, which let it go on), its `settle` (`check_settle`), and what it did
(`UpdateOutcome`). The live tree's operations layer (actors/_operate/_update.py)
carries them out; the simulator can model an operator's update with them.

The file's order is kept (beyond OTP, whose start_child only appends: see
docs/otp-semantics.md, section 13): a changed child is replaced at its place, an
added one is placed where the file puts it, a kept one the file moved is moved
(without a restart). A nested supervisor whose children changed keeps running;
its parent's stored spec of it is brought in step afterwards (`StoreSpec`), so
that the parent's next restart of it starts what runs now, not the old children.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import TypeAlias

from .spec._fields import Restart, Strategy
from .spec._spec import AnySpec, ChildSpec, SupervisorSpec


class Change(StrEnum):
    """Why a step is in a plan."""

    ADDED = "added"  # in the new spec only
    CHANGED = "changed"  # in both, with another spec
    REMOVED = "removed"  # in the old spec only
    RESTARTED = "restarted"  # restart all: the same spec, started again
    MOVED = "moved"  # the same spec, at another place in the start order
    SETTINGS = "settings"  # a supervisor's own settings, changed in place


@dataclass(frozen=True)
class StopOld:
    """Stop the child, keeping its spec: `terminate_child(child)`."""

    child: str
    change: Change
    supervisor: str = ""  # its path ("" in a plan_restart_all: the root)


@dataclass(frozen=True)
class DeleteOld:
    """Forget the stopped child's spec: `delete_child(child)`."""

    child: str
    change: Change
    supervisor: str = ""


@dataclass(frozen=True)
class StartNew:
    """Add the child and start it, last in the start order: `start_child(spec)`."""

    spec: AnySpec
    change: Change
    supervisor: str = ""

    @property
    def child(self) -> str:
        return self.spec.id


@dataclass(frozen=True)
class StartAgain:
    """Start the stopped child from the spec it kept: `restart_child(child)`."""

    child: str
    change: Change
    supervisor: str = ""


@dataclass(frozen=True)
class Replace:
    """Stop the child, give it the new spec at the same place, start it:
    `replace_child(child, spec)`. A failed start leaves it stopped with the new spec,
    until the update rolls it back to `was` (`rollback_of`), the spec it ran."""

    supervisor: str
    spec: AnySpec
    change: Change = Change.CHANGED
    # The spec it runs now, for the rollback (None: not known); not part of the step's
    # identity: two plans that replace a child by the same spec are the same plan.
    was: AnySpec | None = field(default=None, compare=False)

    @property
    def child(self) -> str:
        return self.spec.id


@dataclass(frozen=True)
class Insert:
    """Add the child right after `after` (None: first) and start it:
    `insert_child(spec, after)`."""

    supervisor: str
    spec: AnySpec
    after: str | None
    change: Change = Change.ADDED

    @property
    def child(self) -> str:
        return self.spec.id


@dataclass(frozen=True)
class Move:
    """Move a running child right after `after` (None: first), touching nothing
    else: `move_child(child, after)`."""

    supervisor: str
    child: str
    after: str | None
    change: Change = Change.MOVED


@dataclass(frozen=True)
class StoreSpec:
    """After the steps inside the nested supervisor `child`: keep in `supervisor`
    its new settings with the children it holds now: `store_childspec(child, spec)`."""

    supervisor: str
    child: str
    spec: SupervisorSpec
    change: Change = Change.CHANGED


@dataclass(frozen=True)
class ChangeSettings:
    """Before the steps inside the supervisor `child` of `supervisor` ("" with the
    root's id: the root): take its new intensity, period, auto_shutdown and
    max_children in place, its children running on (OTP's code_change):
    `change_settings(spec)` on that supervisor. Its new restart, shutdown,
    significant and backoff, which its parent acts on, take effect with the
    StoreSpec that follows its steps."""

    supervisor: str
    child: str
    spec: SupervisorSpec
    was: SupervisorSpec  # what it ran with
    change: Change = Change.SETTINGS

    @property
    def path(self) -> str:
        """The supervisor's own path ("shop/apps")."""
        return f"{self.supervisor}/{self.child}" if self.supervisor else self.child

    @property
    def detail(self) -> str:
        """What changes: "intensity 1 -> 7, period 5 -> 30"."""
        changed = []
        for name in (*IN_PLACE, *(AS_CHILD if self.supervisor else ())):
            was, now = getattr(self.was, name), getattr(self.spec, name)
            if was != now:
                changed.append(f"{name} {_shown(was)} -> {_shown(now)}")
        return ", ".join(changed)


def _shown(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(getattr(value, "value", value))


UpdateStep: TypeAlias = (
    StopOld
    | DeleteOld
    | StartNew
    | StartAgain
    | Replace
    | Insert
    | Move
    | StoreSpec
    | ChangeSettings
)


@dataclass(frozen=True)
class UpdatePlan:
    """The steps of one update of a tree, in the order to take them."""

    steps: tuple[UpdateStep, ...] = ()
    root: str = ""  # the tree's id: children() names children by their path below it

    def path_of(self, step: UpdateStep) -> str:
        """The step's child by its path below the root ("web", "apps/app")."""
        return where(step, self.root)

    def children(self, change: Change) -> tuple[str, ...]:
        """The children a step touches for `change`, each once, in step order, by
        their path below the root ("web", "apps/app"). A StoreSpec is bookkeeping:
        not counted."""
        return tuple(
            dict.fromkeys(
                where(s, self.root)
                for s in self.steps
                if s.change is change and not isinstance(s, StoreSpec)
            )
        )

    @property
    def added(self) -> tuple[str, ...]:
        return self.children(Change.ADDED)

    @property
    def changed(self) -> tuple[str, ...]:
        return self.children(Change.CHANGED)

    @property
    def removed(self) -> tuple[str, ...]:
        return self.children(Change.REMOVED)

    @property
    def moved(self) -> tuple[str, ...]:
        return self.children(Change.MOVED)

    @property
    def settings(self) -> tuple[str, ...]:
        """The supervisors whose own settings change in place ("" for the root)."""
        return self.children(Change.SETTINGS)

    def __bool__(self) -> bool:
        return bool(self.steps)


def where(step: UpdateStep, root: str = "") -> str:
    """The step's child by its path below `root` (its full path if root is "")."""
    supervisor = step.supervisor
    if root and (supervisor == root or supervisor.startswith(root + "/")):
        supervisor = supervisor[len(root) + 1 :]
    return f"{supervisor}/{step.child}" if supervisor else step.child


def plan_update(
    old: SupervisorSpec, new: SupervisorSpec, *, whole: Collection[str] = ()
) -> UpdatePlan:
    """The steps that take a tree running `old` (what its supervisors hold now) to `new`.

    In each supervisor, its own settings that can change in place (intensity,
    period, auto_shutdown, max_children: OTP's code_change) change first; then
    removed children are stopped and deleted (last started first); then, in
    `new`'s order, each child is moved to its place if the file moved it, replaced
    if its spec changed, added at its place if new. A nested supervisor with the
    same strategy is not replaced: the plan goes into it (its steps name it), then
    stores its new spec (its restart, shutdown, ... as a child too) in its parent.
    One whose strategy or placement changed is replaced whole, as is one named in
    `whole` (by path: the caller cannot reach into it, e.g. it does not run or runs
    on another node), one with a placement, and a simple_one_for_one whose template
    changed. Children whose spec is equal are not touched. The root's strategy is
    not part of the plan: it applies when the tree starts again.

    Raises ValueError when `new` is another tree, or when the template of a running
    simple_one_for_one root would change: its children were made from it and have
    ids of their own, so no step could name them.
    """
    if new.id != old.id:
        raise ValueError(f"an update keeps the tree: {new.id!r} is not {old.id!r}")
    steps: list[UpdateStep] = []
    if _in_place(old) != _in_place(new) and old.strategy is new.strategy:
        steps.append(ChangeSettings("", old.id, new, old))
    _plan_into(old, new, old.id, frozenset(whole), steps)
    return UpdatePlan(tuple(steps), old.id)


def _plan_into(
    old: SupervisorSpec,
    new: SupervisorSpec,
    path: str,
    whole: frozenset[str],
    steps: list[UpdateStep],
) -> None:
    before = {c.id: c for c in old.children}
    after = {c.id: c for c in new.children}
    if old.strategy is Strategy.SIMPLE_ONE_FOR_ONE:
        if not _same_children(old, new):
            raise ValueError(
                f"the children of simple_one_for_one supervisor {path!r} are made from its "
                "template, which cannot change while they run; stop the tree and run it again"
            )
        return
    removed = [c for c in before if c not in after]
    for child in reversed(removed):
        steps += [StopOld(child, Change.REMOVED, path), DeleteOld(child, Change.REMOVED, path)]
    order = [c for c in before if c in after]  # the start order as the steps leave it
    prev: str | None = None
    for spec in new.children:
        cid = spec.id
        if cid in before:
            at = order.index(cid)
            if (order[at - 1] if at else None) != prev:
                steps.append(Move(path, cid, prev))
                order.remove(cid)
                order.insert(0 if prev is None else order.index(prev) + 1, cid)
            was = before[cid]
            if not _same(was, spec):
                inner = f"{path}/{cid}"
                if (
                    isinstance(was, SupervisorSpec)
                    and isinstance(spec, SupervisorSpec)
                    and inner not in whole
                    and was.placement is None
                    and spec.placement is None
                    and was.strategy is spec.strategy
                    and (
                        was.strategy is not Strategy.SIMPLE_ONE_FOR_ONE or _same_children(was, spec)
                    )
                ):
                    if _in_place(was) != _in_place(spec) or _as_child(was) != _as_child(spec):
                        steps.append(ChangeSettings(path, cid, spec, was))
                    _plan_into(was, spec, inner, whole, steps)
                    steps.append(StoreSpec(path, cid, spec))
                else:
                    steps.append(Replace(path, spec, was=was))
        else:
            steps.append(Insert(path, spec, prev))
            order.insert(0 if prev is None else order.index(prev) + 1, cid)
        prev = cid


IN_PLACE = ("intensity", "period", "auto_shutdown", "max_children")
"""A running supervisor's own settings an update changes without restarting it."""


AS_CHILD = ("restart", "shutdown", "significant", "backoff")
"""A nested supervisor's settings its parent acts on: kept by StoreSpec, no restart."""


def _in_place(spec: SupervisorSpec) -> tuple[object, ...]:
    return tuple(getattr(spec, name) for name in IN_PLACE)


def _as_child(spec: SupervisorSpec) -> tuple[object, ...]:
    return tuple(getattr(spec, name) for name in AS_CHILD)


def _settings(spec: SupervisorSpec) -> dict[str, object]:
    """A supervisor's spec but its children."""
    return {f.name: getattr(spec, f.name) for f in fields(spec) if f.name != "children"}


def _same_children(a: SupervisorSpec, b: SupervisorSpec) -> bool:
    return len(a.children) == len(b.children) and all(
        _same(x, y) for x, y in zip(a.children, b.children, strict=True)
    )


def _same(a: AnySpec, b: AnySpec) -> bool:
    """Equal specs; a supervisor's children compared one by one (a list and a
    tuple of the same children are the same)."""
    if isinstance(a, SupervisorSpec) and isinstance(b, SupervisorSpec):
        return _settings(a) == _settings(b) and _same_children(a, b)
    return a == b


def plan_restart_all(children: Sequence[str]) -> UpdatePlan:
    """Restart every child (given in start order): all stopped, last started first,
    then all started again in start order, each from the spec it kept."""
    stops = [StopOld(c, Change.RESTARTED) for c in reversed(children)]
    starts = [StartAgain(c, Change.RESTARTED) for c in children]
    return UpdatePlan((*stops, *starts))


# -- the preflight -------------------------------------------------------------------


def starting_workers(plan: UpdatePlan) -> Iterator[ChildSpec]:
    """The workers the plan would start (those of a replaced or added supervisor too)."""
    for step in plan.steps:
        if isinstance(step, Replace | Insert):
            yield from _workers(step.spec)


def _workers(spec: AnySpec) -> Iterator[ChildSpec]:
    if isinstance(spec, ChildSpec):
        yield spec
    else:
        for child in spec.children:
            yield from _workers(child)


def preflight(plan: UpdatePlan, problems_of: Callable[[ChildSpec], Iterable[str]]) -> list[str]:
    """Every problem of the workers the plan would start, each once, in plan order:
    an update with any is refused before anything stops. `problems_of` is the host's
    look at one worker (its programs, cwd, the folders of the files it writes...),
    one line each, naming the child and the field."""
    found: list[str] = []
    for child in starting_workers(plan):
        found += problems_of(child)
    return list(dict.fromkeys(found))


# -- the apply policy -------------------------------------------------------------------


def stops_the_update(start_failed: bool) -> bool:
    """Whether a failed step stops the update there. A start that failed does not
    (the replaced child is rolled back to its previous spec, an added one is not
    added: the rest goes on); any other failure does (a supervisor that did not answer, a
    child no longer there): the steps after it are not taken."""
    return not start_failed


def taken_after_a_stop(step: UpdateStep) -> bool:
    """Whether a step is still taken after a failure stopped the update: a StoreSpec
    is, so that each nested supervisor's stored spec is brought in step with what it
    runs (its parent's next restart of it starts that, not the old children)."""
    return isinstance(step, StoreSpec)


@dataclass
class UpdateOutcome:
    """What an update did: the steps applied, those that failed (each with why),
    those not taken after a failure that stopped it, and its summary (`message`:
    what `nannytree update` answers). `rolled_back`: the failed replacements whose
    child runs its previous spec again (or never stopped running it), each with
    what runs now; `overlapped`: the replacements started before the old process
    stopped (`may_overlap`)."""

    applied: list[UpdateStep] = field(default_factory=list)
    failed: list[tuple[UpdateStep, str]] = field(default_factory=list)
    skipped: list[UpdateStep] = field(default_factory=list)
    message: str = ""
    rolled_back: list[tuple[UpdateStep, str]] = field(default_factory=list)
    overlapped: list[UpdateStep] = field(default_factory=list)


# -- no outage: start before stop, and roll back -------------------------------------------


def rollback_of(step: UpdateStep) -> Replace | None:
    """What puts a replaced child back on the spec it ran when its replacement failed
    to start (so that the service runs on): the same Replace with the old spec, or
    None (not a Replace, or its old spec is not known)."""
    if not isinstance(step, Replace) or step.was is None:
        return None
    return Replace(step.supervisor, step.was, step.change, was=step.spec)


_OWN_READINESS = ("started", "notify", "sd_notify")


def may_overlap(was: AnySpec | None, new: AnySpec) -> bool:
    """Whether the replacement of a worker running `was` by `new` may start before the
    old process stops (start-before-stop). Only where two processes can serve at once
    and be told apart: the old one's listening sockets are all held for it by nannytree
    and passed to the new one too (docs/sockets.md: both accept from one queue, so no
    port is bound twice); neither writes a pid_file (one file, two daemons) nor runs on
    another node; and the new one's readiness is its own: "started" (with the update's
    settle), "notify", "sd_notify" or seconds of uptime. A probe (HTTP, TCP, exec) or a
    ready file could be answered by the old process."""
    if not isinstance(was, ChildSpec) or not isinstance(new, ChildSpec):
        return False
    held = _listens(was)
    if not held or not held <= _listens(new):
        return False
    if was.pid_file is not None or new.pid_file is not None:
        return False
    ready = new.ready
    if isinstance(ready, int | float) and not isinstance(ready, bool):
        return True  # seconds of uptime
    return ready in _OWN_READINESS


def _listens(spec: ChildSpec) -> set[str]:
    # A built spec holds ListenSockets (the checks turned tables into them).
    return {str(getattr(s, "listen", "")) for s in spec.sockets}


STANDBY_SUFFIX = "~update"
"""Appended to a child's id to name the process an update starts beside it."""


def standby_of(step: Replace, taken: Collection[str]) -> ChildSpec:
    """The child an update starts beside the one it replaces (start-before-stop):
    the new spec under an id no sibling has ("web~update"), temporary (its exit
    restarts nothing) and not significant; it is stopped once the child itself runs
    the new spec. Raises ValueError when the step may not overlap."""
    spec = step.spec
    if not isinstance(spec, ChildSpec) or not may_overlap(step.was, spec):
        raise ValueError(f"the replacement of {step.child!r} may not start before the old stops")
    cid, n = f"{spec.id}{STANDBY_SUFFIX}", 1
    while cid in taken:
        n += 1
        cid = f"{spec.id}{STANDBY_SUFFIX}{n}"
    return replace(spec, id=cid, restart=Restart.TEMPORARY, significant=False)


# -- settle ------------------------------------------------------------------------------

UPDATE_SETTLE = 1.0
"""Seconds a child that an update replaces or adds must stay up to count as started
(supervisord's startsecs), unless it has a readiness of its own: the default."""

UPDATE_SETTLE_MAX = 600.0
"""The longest `settle` an update takes."""


def check_settle(value: object) -> float:
    """An update's `settle`, checked: seconds from 0 to UPDATE_SETTLE_MAX."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= UPDATE_SETTLE_MAX
    ):
        raise ValueError(
            f"settle must be seconds from 0 to {UPDATE_SETTLE_MAX:g}, not {value!r}: "
            "how long a replaced or added child must stay up to count as started"
        )
    return float(value)
