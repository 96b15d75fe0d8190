"""The operator's restarts: of one child (stop it if it runs, start it again),
and of every child of the root (`supervisorctl restart all`: the plan of
supervision.plan_restart_all, through the update's one executor of steps).

A running child with a reload check is checked before it is stopped: a
configuration the check refuses (`nginx -t`) would only fail the start and leave
the service down, so the restart is refused and the child runs on.
"""

from __future__ import annotations

from supervision import ChildInfo, RestartRefused, plan_restart_all

from .._shell._reload import reload_check
from ._find import OP_TIMEOUT, Ref, Target, is_nanny
from ._update import take_step


def restart(target: Target) -> ChildInfo:
    """Stop the child unless it is stopped (terminate_child), then start it again
    from the spec it kept (restart_child); its new info. A running child whose
    reload check fails is not stopped: RestartRefused, with the check's output."""
    if target.info.state != "stopped":
        check_before_restart(target)
        target.call("terminate_child", target.child_id)
    info: ChildInfo = target.call("restart_child", target.child_id)
    return info


def check_before_restart(target: Target) -> None:
    """Run the child's reload check (as the child), if its spec has one; raises
    RestartRefused when it fails. A child of a remote subtree is checked by nothing
    here: its spec is on its node."""
    if target.nanny is None or not is_nanny(target.nanny):
        return
    specs = target.call("which_childspecs")
    spec = next((s for info, s in specs if info.id == target.child_id), None)
    failed = None if spec is None else reload_check(spec)
    if failed is not None:
        supervisor = target.path.rpartition("/")[0] or target.path
        raise RestartRefused(supervisor, target.child_id, str(failed))


def restart_all(root: Ref, timeout: float = OP_TIMEOUT) -> list[str]:
    """Stop the root's children in reverse start order, then start them in order;
    their ids, in start order. Each running child with a reload check is checked
    first: one that fails refuses the whole restart (RestartRefused), nothing stopped."""
    proxy = root.proxy()
    for info, spec in proxy.which_childspecs().get(timeout=timeout):
        if info.state != "stopped":
            failed = reload_check(spec)
            if failed is not None:
                raise RestartRefused(proxy.own_spec().get(timeout=timeout).id, info.id, str(failed))
    # which_children lists the newest first, as OTP's does: start order is its reverse.
    children = [c.id for c in reversed(proxy.which_children().get(timeout=timeout))]
    for step in plan_restart_all(children).steps:
        take_step(root, step)
    return children
