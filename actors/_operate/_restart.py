"""The operator's restarts: of one child (stop it if it runs, start it again),
and of every child of the root (`supervisorctl restart all`: the plan of
supervision.plan_restart_all, through the update's one executor of steps).

A running child with a reload check (or each such worker of a supervisor restarted
whole) is checked before it is stopped: a configuration the check refuses (`nginx
-t`) would only fail the start and leave the service down, so the restart is
refused and the child runs on.
"""

from __future__ import annotations

from supervision import ChildInfo, NannyError, RestartRefused, SupervisorSpec, plan_restart_all

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
    """Run the reload check of the child (as the child), or of each running worker
    below it if it is a supervisor, where the spec has one; raises RestartRefused
    when one fails. A child of a remote subtree is checked by nothing here: its
    spec is on its node."""
    if target.nanny is None or not is_nanny(target.nanny):
        return
    supervisor = target.path.rpartition("/")[0] or target.path
    _refuse_failing_checks(target.nanny, supervisor, only=target.child_id)


def _refuse_failing_checks(
    nanny: Ref, path: str, only: str | None = None, timeout: float = OP_TIMEOUT
) -> None:
    """Each running child of the supervisor `nanny` (at `path`; `only`: that child
    alone), and the running workers of its nested supervisors, checked in start
    order; the first failure raises RestartRefused naming its child."""
    proxy = nanny.proxy()
    for info, spec in proxy.which_childspecs().get(timeout=timeout):
        if (only is not None and info.id != only) or info.state == "stopped":
            continue
        if isinstance(spec, SupervisorSpec):
            if spec.placement is None and info.state == "running":
                try:
                    below: Ref = proxy.child_nanny(info.id).get(timeout=timeout)
                except NannyError:  # it ended meanwhile: nothing of it to keep running
                    continue
                if is_nanny(below):
                    _refuse_failing_checks(below, f"{path}/{info.id}", timeout=timeout)
            continue
        failed = reload_check(spec)
        if failed is not None:
            raise RestartRefused(path, info.id, str(failed))


def restart_all(root: Ref, timeout: float = OP_TIMEOUT) -> list[str]:
    """Stop the root's children in reverse start order, then start them in order;
    their ids, in start order. Each running worker with a reload check (nested ones
    too) is checked first: one that fails refuses the whole restart (RestartRefused),
    nothing stopped."""
    proxy = root.proxy()
    _refuse_failing_checks(root, proxy.own_spec().get(timeout=timeout).id, timeout=timeout)
    # which_children lists the newest first, as OTP's does: start order is its reverse.
    children = [c.id for c in reversed(proxy.which_children().get(timeout=timeout))]
    for step in plan_restart_all(children).steps:
        take_step(root, step)
    return children
