"""An update of a running tree, carried out: the live tree read from its
supervisors, the plan (supervision.plan_update), the preflight of what it would
start (supervision.preflight), then the plan step by step through each
supervisor's API under supervision's apply policy, each step an event. Also the
one executor of plan steps that restart-all uses. See docs/update.md.

`nannytree update` (the run host), `Tree.update` and `AsyncNanny.update` all
come here.
"""

from __future__ import annotations

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
    plan_update,
    preflight,
    stops_the_update,
    taken_after_a_stop,
)

from .._shell._event_log import EventLog
from ._find import OP_TIMEOUT, Ref, is_nanny, nanny_at
from ._preflight import problems_of

# What a step that got no answer, or whose supervisor ended, raises.
_NO_ANSWER: tuple[type[BaseException], ...] = (
    NannyError,
    pykka.ActorDeadError,
    TimeoutError,
    pykka.Timeout,
)

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
        (one that exits sooner fails its start and stays stopped, charging no
        intensity; 0: started once its process runs).

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
        under supervision's apply policy: a start that fails is recorded and the rest
        goes on (the child stays stopped with its new spec); any other failure stops
        the update there, but the nested supervisors' specs are still brought in step
        with what runs."""
        outcome = UpdateOutcome()
        stopped = False
        for step in plan.steps:
            if stopped and not taken_after_a_stop(step):
                outcome.skipped.append(step)
                continue
            try:
                pid = take_step(root, step, settle)
            except StartError as e:
                failure: tuple[str, bool] | None = (e.why, True)  # with its last lines
            except _NO_ANSWER as e:
                failure = (str(e) or type(e).__name__, False)
            else:
                failure = None
            if failure is not None:
                why, start_failed = failure
                outcome.failed.append((step, why))
                self._failed(step, why, plan)
                stopped = stopped or stops_the_update(start_failed)
                continue
            outcome.applied.append(step)
            kind = _KINDS.get(type(step))
            if isinstance(step, ChangeSettings):  # about the supervisor itself
                self._event(step.path, EventKind.UPDATE_SETTINGS_CHANGED, None, detail=step.detail)
            elif kind is not None:
                self._event(step.supervisor, kind, step.child, pid=pid, detail=_detail(step))
        return outcome

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
    if any(why.startswith("failed to start") for _, why in outcome.failed):
        lines.append(
            "a replaced child that failed to start stays stopped with its new spec (an "
            "added one is not added): fix the file and run `nannytree update` again"
        )
    skipped = [f"{_verb(s)} {plan.path_of(s)}" for s in outcome.skipped]
    if skipped:
        lines.append(f"not applied: {', '.join(skipped)}; run `nannytree update` again")
    return "\n".join(lines) if lines else "no change"
