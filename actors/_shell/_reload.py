"""A child's reload: its spec's check command, run as the child (the reload is refused
if it fails), then its reload signal to the main process (systemd's ExecReload= with a
check). The same check guards an operator's restart of a running child
(actors/_operate/_restart.py): a config the check refuses does not stop the child."""

from __future__ import annotations

from supervision import AnySpec, ChildNotRunning, ChildSpec, ReloadRefused
from supervision import Reload as ReloadSpec

from .._process._port import ChildHandle
from ._check_run import CheckFailed, run_check


def reload_check(spec: AnySpec) -> CheckFailed | None:
    """Run the spec's reload check as the child; why it failed, or None (passed, or
    no check: a supervisor, a child without `reload` or without a check)."""
    reload = getattr(spec, "reload", None)
    if not isinstance(spec, ChildSpec) or not isinstance(reload, ReloadSpec):
        return None
    if reload.check is None:
        return None
    return run_check(
        spec, reload.check, reload.check_timeout, "check", as_root=reload.check_as_root
    )


def reload_process(spec: ChildSpec, proc: ChildHandle | None, supervisor: str) -> int:
    """Reload the child's running process; the signal sent. Raises ReloadRefused or
    ChildNotRunning, naming the child and the fix."""
    reload = spec.reload
    if not isinstance(reload, ReloadSpec):  # the spec stores a Reload, or None
        raise ReloadRefused(
            supervisor, spec.id, 'its spec has no reload; set reload="HUP" or a check'
        )
    if proc is None or proc.exit is not None:
        raise ChildNotRunning(supervisor, spec.id, "reload it")
    failed = reload_check(spec)
    if failed is not None:
        raise ReloadRefused(supervisor, spec.id, str(failed))
    if not proc.send_signal(int(reload.signal), group=False):
        raise ChildNotRunning(supervisor, spec.id, "reload it")
    return int(reload.signal)
