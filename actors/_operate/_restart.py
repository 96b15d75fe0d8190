"""The operator's restarts: of one child (stop it if it runs, start it again),
and of every child of the root (`supervisorctl restart all`: the plan of
supervision.plan_restart_all, through the update's one executor of steps).
"""

from __future__ import annotations

from supervision import ChildInfo, plan_restart_all

from ._find import OP_TIMEOUT, Ref, Target
from ._update import take_step


def restart(target: Target) -> ChildInfo:
    """Stop the child unless it is stopped (terminate_child), then start it again
    from the spec it kept (restart_child); its new info."""
    if target.info.state != "stopped":
        target.call("terminate_child", target.child_id)
    info: ChildInfo = target.call("restart_child", target.child_id)
    return info


def restart_all(root: Ref, timeout: float = OP_TIMEOUT) -> list[str]:
    """Stop the root's children in reverse start order, then start them in order;
    their ids, in start order."""
    # which_children lists the newest first, as OTP's does: start order is its reverse.
    children = [c.id for c in reversed(root.proxy().which_children().get(timeout=timeout))]
    for step in plan_restart_all(children).steps:
        take_step(root, step)
    return children
