"""`nannytree reset ID`: forget the restarts counted so far, so that an operator who
fixed the cause is not one crash away from a give-up (docs/otp-semantics.md
section 4.1). ID is a supervisor (its intensity window; the tree's id for the
root) or a child with a restart_limit (its own window; a failed one is then
stopped, and `nannytree start ID` starts it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors.cli._control import OP_TIMEOUT

if TYPE_CHECKING:
    from .._operate._find import Target
    from .._operate._snapshot import TreeInspector


def reset(inspector: TreeInspector, key: str, call: Callable[..., Any]) -> str:
    """Reset the window `key` names; the answer says which and how many restarts it held.
    `call(target, method, *args)` asks a child's supervisor (the Controller's)."""
    root = inspector.spec
    if key.strip("/") == root.id:
        ref = inspector.ref
        if ref is None:
            raise TimeoutError("the tree is starting")
        count = ref.proxy().reset_restarts(None).get(timeout=OP_TIMEOUT)
        return _supervisor(root.id, count, root)
    t: Target = inspector.find(key)
    spec = inspector.spec_at(t.path)
    if t.info.type == "supervisor":
        nested = call(t, "child_nanny", t.child_id)
        if not hasattr(nested.actor_class, "reset_restarts"):
            raise ValueError(
                f"{t.path} is a remote subtree, whose supervisor does not forward reset"
            )
        count = nested.proxy().reset_restarts(None).get(timeout=OP_TIMEOUT)
        return _supervisor(t.path, count, spec)
    was_failed = t.info.state == "failed"
    count = call(t, "reset_restarts", t.child_id)
    limit = getattr(spec, "restart_limit", None)
    within = f" (at most {limit.intensity} in {limit.period:g} s)" if limit is not None else ""
    text = f"reset {t.path}: forgot {_restarts(count)} counted by its restart_limit{within}"
    if was_failed:
        text += f"; it is stopped, not failed: `nannytree start {key}` starts it"
    return text


def _supervisor(path: str, count: int, spec: Any) -> str:
    intensity, period = getattr(spec, "intensity", None), getattr(spec, "period", None)
    within = f" (at most {intensity} in {period:g} s)" if intensity is not None and period else ""
    return (
        f"reset {path}: forgot {_restarts(count)} counted by its intensity{within}; "
        "the next restarts count from zero"
    )


def _restarts(count: int) -> str:
    return f"{count} restart{'' if count == 1 else 's'}"
