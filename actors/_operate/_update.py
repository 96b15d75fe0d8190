"""An update of a running tree, carried out: the live tree read from its
supervisors, the plan (supervision.plan_update), the preflight of what it would
start (supervision.preflight), then the plan step by step through each
supervisor's API under supervision's apply policy, each step an event. Also the
one executor of plan steps that restart-all uses. See docs/update.md.

`nannytree update` (the run host), `Tree.update` and `AsyncNanny.update` all
come here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pykka

from supervision import (
    IN_PLACE,
    UPDATE_SETTLE,
    AnySpec,
    Change,
    ChangeSettings,
    ChildSpec,
    DeleteOld,
    Event,
    EventKind,
    Insert,
    Move,
    NannyError,
    Replace,
    StartAgain,
    StartError,
    StartNew,
    StopOld,
    StoreSpec,
    Strategy,
    SupervisorSpec,
    UpdateFailed,
    UpdateOutcome,
    UpdatePlan,
    UpdateRefused,
    UpdateStep,
    may_overlap,
    plan_update,
    preflight,
    rollback_of,
    standby_of,
    stops_the_update,
    taken_after_a_stop,
)

from .._shell._event_log import EventLog
from ._find import OP_TIMEOUT, Ref, is_nanny, nanny_at
from ._preflight import problems_of


class _Kept(Exception):
    """A standby (start-before-stop) failed to start: the child was not touched."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


# What a step that got no answer, or whose supervisor ended, raises.
_NO_ANSWER: tuple[type[BaseException], ...] = (
    NannyError,
    pykka.ActorDeadError,
    TimeoutError,
    pykka.Timeout,
)

_NO_STANDBY: tuple[type[BaseException], ...] = (*_NO_ANSWER, ValueError)
_NO_ROLLBACK: tuple[type[BaseException], ...] = (StartError, *_NO_ANSWER)

# -- the live tree -------------------------------------------------------------------


def read_live(root: Ref, stored: SupervisorSpec, timeout: float = OP_TIMEOUT) -> LiveTree:
    """The tree as its supervisors hold it now: each supervisor's child specs, in
    start order, read from it, recursively. A nested supervisor that does not run
    or runs on another node is taken as its parent stores it, and named in `whole`
    (an update replaces it whole rather than reaching into it). A simple_one_for_one
    supervisor is its stored spec: its children are made from its template. Each
    supervisor's intensity, period, auto_shutdown and max_children are those it
    runs with (`own_spec`)."""
    whole: set[str] = set()

    def read(nanny: Ref, spec: SupervisorSpec, path: str) -> SupervisorSpec:
        proxy = nanny.proxy()
        # Its own settings as it runs them (an update may have changed them in place);
        # its settings as a child are in its parent's spec of it.
        runs = proxy.own_spec().get(timeout=timeout)
        own = {name: getattr(runs, name) for name in IN_PLACE}
        if spec.strategy is Strategy.SIMPLE_ONE_FOR_ONE:
            return replace(spec, **own)
        children: list[AnySpec] = []
        for info, child in proxy.which_childspecs().get(timeout=timeout):
            if isinstance(child, SupervisorSpec):
                inner = f"{path}/{info.id}"
                below = _nested(proxy, info, child, timeout)
                if below is None:
                    whole.add(inner)
                else:
                    child = read(below, child, inner)
            children.append(child)
        return replace(spec, children=children, **own)

    return LiveTree(read(root, stored, stored.id), frozenset(whole))


@dataclasses.dataclass(frozen=True)
class LiveTree:
    spec: SupervisorSpec
    whole: frozenset[str]  # paths of nested supervisors an update cannot reach into


def _nested(proxy: Any, info: Any, spec: SupervisorSpec, timeout: float) -> Ref | None:
    if info.state != "running" or spec.placement is not None:
        return None
    try:
        ref: Ref = proxy.child_nanny(info.id).get(timeout=timeout)
    except NannyError:
        return None
    return ref if is_nanny(ref) else None  # not a remote stand-in


# -- one step ------------------------------------------------------------------------------


def take_step(root: Ref, step: UpdateStep, settle: float = 0.0) -> int | None:
    """One step of a plan through its supervisor's API (found below `root` by the
    step's path; "": the root itself), awaited; the pid it started, if any."""
    nanny = nanny_at(root, step.supervisor)
    proxy = nanny.proxy()
    answer: Any
    if isinstance(step, StopOld):
        answer = proxy.terminate_child(step.child)
    elif isinstance(step, DeleteOld):
        answer = proxy.delete_child(step.child)
    elif isinstance(step, Replace):
        answer = proxy.replace_child(step.child, step.spec, settle)
    elif isinstance(step, Insert):
        answer = proxy.insert_child(step.spec, step.after, settle)
    elif isinstance(step, Move):
        answer = proxy.move_child(step.child, step.after)
    elif isinstance(step, ChangeSettings):
        answer = nanny_at(root, step.path).proxy().change_settings(step.spec)
    elif isinstance(step, StoreSpec):
        below = nanny_at(root, f"{step.supervisor}/{step.child}")
        held = read_live(below, step.spec).spec
        answer = proxy.store_childspec(step.child, held)
    elif isinstance(step, StartNew):
        answer = proxy.start_child(step.spec)
    elif isinstance(step, StartAgain):
        answer = proxy.restart_child(step.child)
    else:
        raise TypeError(f"unknown update step {step!r}")
    value = answer.get(timeout=OP_TIMEOUT)
    return getattr(value, "pid", None)


# -- carrying an update out -----------------------------------------------------------------


_KINDS: dict[type[Any], EventKind] = {
    StopOld: EventKind.UPDATE_CHILD_REMOVED,
    Replace: EventKind.UPDATE_CHILD_REPLACED,
    Insert: EventKind.UPDATE_CHILD_ADDED,
    Move: EventKind.UPDATE_CHILD_MOVED,
    StoreSpec: EventKind.UPDATE_SPEC_STORED,
}


class Updater:
    """Carries out updates of one running tree, one at a time.

    `root` gives the root nanny (None while the tree starts); `check` is the
    host's look at a worker the update would start (problems, one line each):
    by default the checks `nannytree check` makes of it (`_preflight.problems_of`)."""

    def __init__(
        self,
        root: Callable[[], Ref | None],
        log: EventLog,
        check: Callable[[ChildSpec], list[str]] = problems_of,
    ) -> None:
        self._root = root
        self._log = log
        self._check = check
        self._lock = threading.Lock()

    def update(
        self, stored: SupervisorSpec, new: SupervisorSpec, settle: float = UPDATE_SETTLE
    ) -> tuple[UpdateOutcome, SupervisorSpec]:
        """Apply `new` to the running tree; what it did (its `message` is the answer
        of `nannytree update`), and the live tree after. `settle`: seconds each
        replaced or added worker without readiness must stay up to count as started
        (one that exits sooner fails its start, charging no intensity, and is rolled
        back to its previous spec; 0: started once its process runs). A replacement
        starts beside the old process where supervision.may_overlap allows it.

        Raises UpdateRefused (nothing stopped) or UpdateFailed (what was applied,
        what failed: the tree is left as the message says, and the next update
        converges from it)."""
        root = self._root()
        if root is None:
            raise TimeoutError("the tree is starting")
        with self._lock:
            live = read_live(root, stored)
            try:
                plan = plan_update(live.spec, new, whole=live.whole)
            except ValueError as e:
                raise self.refuse(stored.id, f"{e}; nothing changed") from None
            found = preflight(plan, self._check)
            if found:
                listed = "\n".join(f"  {p}" for p in found)
                raise self.refuse(
                    stored.id,
                    f"update refused, nothing stopped: {len(found)} problem"
                    f"{'s' if len(found) > 1 else ''} in what it would start:\n{listed}",
                    tuple(found),
                )
            outcome = self.carry_out(root, plan, settle)
            try:
                after = read_live(root, stored).spec
            except pykka.ActorDeadError:  # e.g. an intensity lowered below its restarts
                after, ended = new, True
            else:
                ended = False
        message = summary(plan, outcome)
        if stored.strategy is not new.strategy:
            message += (
                "\nnote: the root supervisor's strategy changed; it applies when the tree "
                "starts again"
            )
        if ended:
            message += "\nnote: the tree is stopping"
        outcome.message = message
        self._event(stored.id, EventKind.UPDATE_DONE, None, detail=message.replace("\n", "; "))
        if outcome.failed:
            raise UpdateFailed(stored.id, message, outcome)
        return outcome, after

    def refuse(self, tree: str, why: str, problems: tuple[str, ...] = ()) -> UpdateRefused:
        """The refusal of an update (recorded as an event): nothing was stopped."""
        detail = why.replace(":\n  ", ": ").replace("\n  ", "; ")
        self._event(tree, EventKind.UPDATE_REFUSED, None, detail=detail)
        return UpdateRefused(tree, why, problems)

    def carry_out(self, root: Ref, plan: UpdatePlan, settle: float = 0.0) -> UpdateOutcome:
        """Each step through its supervisor's API, in order, each awaited and recorded,
        under supervision's apply policy: a start that fails is recorded, a replaced
        child rolled back to its previous spec, and the rest goes on; any other failure stops
        the update there, but the nested supervisors' specs are still brought in step
        with what runs."""
        outcome = UpdateOutcome()
        stopped = False
        for step in plan.steps:
            if stopped and not taken_after_a_stop(step):
                outcome.skipped.append(step)
                continue
            standby = self._standby(root, step) if isinstance(step, Replace) else None
            try:
                if standby is not None:
                    assert isinstance(step, Replace)
                    pid, overlapped = self._overlap(root, step, standby, settle)
                    standby = standby if overlapped else None
                else:
                    pid = take_step(root, step, settle)
            except _Kept as e:  # the standby failed: the old process never stopped
                failure: tuple[str, bool] | None = (e.why, True)
            except StartError as e:
                failure = (e.why, True)  # with its last lines
            except _NO_ANSWER as e:
                failure = (str(e) or type(e).__name__, False)
            else:
                failure = None
            if failure is not None:
                why, start_failed = failure
                outcome.failed.append((step, why))
                self._failed(step, why, plan)
                if start_failed:
                    self._roll_back(root, step, standby, outcome)
                stopped = stopped or stops_the_update(start_failed)
                continue
            outcome.applied.append(step)
            if standby is not None:
                outcome.overlapped.append(step)
            kind = _KINDS.get(type(step))
            if isinstance(step, ChangeSettings):  # about the supervisor itself
                self._event(step.path, EventKind.UPDATE_SETTINGS_CHANGED, None, detail=step.detail)
            elif kind is not None:
                detail = _detail(step)
                if standby is not None:
                    detail = f"started beside the old process (as {standby.id}) before it stopped"
                self._event(step.supervisor, kind, step.child, pid=pid, detail=detail)
        return outcome

    # -- no outage: start before stop, roll back (docs/update.md, section 4) ---------------

    def _standby(self, root: Ref, step: Replace) -> ChildSpec | None:
        """The child to start beside the replaced one, where it may overlap; else None."""
        if not may_overlap(step.was, step.spec):
            return None
        try:
            proxy = nanny_at(root, step.supervisor).proxy()
            children = {c.id: c for c in proxy.which_children().get(timeout=OP_TIMEOUT)}
            now = children.get(step.child)
            if now is None or now.state != "running":  # nothing to keep serving
                return None
            return standby_of(step, children)
        except _NO_STANDBY:  # e.g. a spec the standby's fields refuse
            return None

    def _overlap(
        self, root: Ref, step: Replace, standby: ChildSpec, settle: float
    ) -> tuple[int | None, bool]:
        """Start-before-stop: the new spec starts beside the old process as `standby`
        (sharing its held sockets) and must settle; then the child itself is replaced
        (the standby serves meanwhile); then the standby stops. Raises _Kept when the
        standby failed to start (the old process runs on, untouched), and StartError
        when the child's own start of the new spec failed (the standby still runs).
        Its pid, and whether the two overlapped (an Insert refused otherwise, as by
        max_children: replaced the plain way)."""
        try:
            take_step(root, Insert(step.supervisor, standby, step.child), settle)
        except StartError as e:
            raise _Kept(e.why) from None
        except _NO_ANSWER:  # e.g. its supervisor's max_children: stop, then start
            return take_step(root, step, settle), False
        self._event(
            step.supervisor,
            EventKind.UPDATE_CHILD_ADDED,
            standby.id,
            detail=f"beside {step.child}, which it replaces; stopped once {step.child} runs it",
        )
        pid = take_step(root, step, settle)
        self._stop_standby(root, step, standby)
        return pid, True

    def _stop_standby(self, root: Ref, step: Replace, standby: ChildSpec) -> None:
        # A temporary child is forgotten by its supervisor once stopped.
        take_step(root, StopOld(standby.id, Change.CHANGED, step.supervisor))
        self._event(step.supervisor, EventKind.UPDATE_CHILD_REMOVED, standby.id, detail="standby")

    def _roll_back(
        self, root: Ref, step: UpdateStep, standby: ChildSpec | None, outcome: UpdateOutcome
    ) -> None:
        """After a replacement failed to start: put the child back on the spec it ran,
        so that the service runs on (the standby, if one runs, serves until then)."""
        back = rollback_of(step)
        if back is None:
            return
        nanny = nanny_at(root, step.supervisor).proxy()
        state = nanny.which_child(step.child).get(timeout=OP_TIMEOUT)
        if standby is not None and state.state == "running" and state.pid is not None:
            # The standby failed: the child never left its old spec, nor its process.
            what = f"kept its previous spec, pid {state.pid}: the replacement failed beside it"
            pid: int | None = state.pid
        else:
            try:
                pid = take_step(root, back)
            except _NO_ROLLBACK as e:
                why = e.why if isinstance(e, StartError) else str(e) or type(e).__name__
                what = f"rollback failed, it stays stopped with its new spec: {why}"
                pid = None
            else:
                what = f"runs its previous spec again, pid {pid}"
            if standby is not None:
                with contextlib.suppress(*_NO_ANSWER):
                    self._stop_standby(root, back, standby)
        outcome.rolled_back.append((step, what))
        self._event(step.supervisor, EventKind.UPDATE_ROLLED_BACK, step.child, pid=pid, detail=what)

    def _failed(self, step: UpdateStep, why: str, plan: UpdatePlan) -> None:
        what = f"{_verb(step)} {plan.path_of(step)}"
        self._event(
            step.supervisor, EventKind.UPDATE_STEP_FAILED, step.child, detail=f"{what}: {why}"
        )

    def _event(
        self,
        supervisor: str,
        kind: EventKind,
        child: str | None,
        *,
        pid: int | None = None,
        detail: str = "",
    ) -> None:
        self._log.append(
            Event(time.monotonic(), supervisor, kind, offender=child, pid=pid, detail=detail)
        )


def _verb(step: UpdateStep) -> str:
    return {
        StopOld: "stop",
        DeleteOld: "delete",
        Replace: "replace",
        Insert: "add",
        Move: "move",
        StoreSpec: "store the spec of",
        ChangeSettings: "change the settings of",
        StartNew: "start",
        StartAgain: "start",
    }[type(step)]


def _detail(step: UpdateStep) -> str:
    if isinstance(step, Insert | Move):
        return "first" if step.after is None else f"after {step.after}"
    return ""


def _settings_steps(plan: UpdatePlan) -> list[ChangeSettings]:
    return [s for s in plan.steps if isinstance(s, ChangeSettings)]


def summary(plan: UpdatePlan, outcome: UpdateOutcome) -> str:
    """The answer of `nannytree update`: what was applied; what failed, and why; what
    was not taken."""
    if not plan:
        return "no change"
    applied = UpdatePlan(tuple(outcome.applied), plan.root)
    failed_children = {plan.path_of(s) for s, _ in outcome.failed}
    parts = []
    for what, ids in (
        ("added", applied.added),
        ("changed", applied.changed),
        ("removed", [c for c in applied.removed if c not in failed_children]),
        ("moved", applied.moved),
        ("settings", [f"{applied.path_of(c)} ({c.detail})" for c in _settings_steps(applied)]),
    ):
        if ids:
            parts.append(f"{what}: {', '.join(ids)}")
    lines = ["; ".join(parts)] if parts else []
    for step, why in outcome.failed:
        lines.append(f"failed: {_verb(step)} {plan.path_of(step)}: {why}")
    for step, what in outcome.rolled_back:
        lines.append(f"rolled back: {plan.path_of(step)} {what}")
    rolled = {id(step) for step, _ in outcome.rolled_back}
    started = [s for s, why in outcome.failed if why.startswith("failed to start")]
    if any(id(s) in rolled for s in started):
        lines.append(
            "a replacement that failed to start was rolled back: the child runs its previous "
            "spec; fix the file and run `nannytree update` again"
        )
    if any(id(s) not in rolled for s in started):
        lines.append(
            "a replaced child that failed to start stays stopped with its new spec (an "
            "added one is not added): fix the file and run `nannytree update` again"
        )
    skipped = [f"{_verb(s)} {plan.path_of(s)}" for s in outcome.skipped]
    if skipped:
        lines.append(f"not applied: {', '.join(skipped)}; run `nannytree update` again")
    return "\n".join(lines) if lines else "no change"
