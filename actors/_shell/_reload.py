"""A child's reload: its spec's check command (the reload is refused if it fails),
then its reload signal to the main process (systemd's ExecReload= with a check)."""

from __future__ import annotations

import os
import shlex
import subprocess

from supervision import ChildNotRunning, ChildSpec, ReloadRefused
from supervision import Reload as ReloadSpec

from .._process._port import ChildHandle
from .._runtime._pooled import blocking

CHECK_OUTPUT = 2048  # bytes of a failed reload check's output kept in the error


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
    if reload.check is not None:
        _run_check(spec, list(reload.check), reload.check_timeout, supervisor)
    if not proc.send_signal(int(reload.signal), group=False):
        raise ChildNotRunning(supervisor, spec.id, "reload it")
    return int(reload.signal)


def _run_check(spec: ChildSpec, argv: list[str], timeout: float, supervisor: str) -> None:
    env = dict(os.environ) if spec.inherit_env else {}
    env.update(spec.env or {})
    cwd = os.fspath(spec.cwd) if spec.cwd is not None else None
    command = shlex.join(argv)
    try:
        with blocking():
            done = subprocess.run(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
    except subprocess.TimeoutExpired:
        raise ReloadRefused(
            supervisor, spec.id, f"its check {command!r} ran over {timeout}s"
        ) from None
    except OSError as e:
        raise ReloadRefused(
            supervisor, spec.id, f"its check {command!r} could not run: {e}"
        ) from None
    if done.returncode != 0:
        said = done.stdout[-CHECK_OUTPUT:].decode(errors="replace").strip()
        raise ReloadRefused(
            supervisor,
            spec.id,
            f"its check {command!r} exited {done.returncode}" + (f": {said}" if said else ""),
        )
