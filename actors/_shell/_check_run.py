"""A check command run for a child: its reload's check (`_reload.py`) and its
`start_check` (`_worker.py`), as systemd's ExecReload= check and ExecStartPre=: an
argv run with the child's environment and cwd, bounded by a timeout, its output kept
(at most CHECK_OUTPUT bytes) to say why it failed."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from supervision import ChildSpec

from .._runtime._pooled import blocking

CHECK_OUTPUT = 2048  # bytes of a failed check's output kept


@dataclass(frozen=True)
class CheckFailed:
    """Why a check failed (`why`: "its check 'nginx -t' exited 1") and what it said."""

    why: str
    output: str = ""

    def __str__(self) -> str:
        return f"{self.why}: {self.output}" if self.output else self.why


def run_check(
    spec: ChildSpec, argv: Sequence[str], timeout: float, name: str
) -> CheckFailed | None:
    """Run `argv` as the child's `name` ("check", "start_check"); None if it exited 0."""
    env = dict(os.environ) if spec.inherit_env else {}
    env.update(spec.env or {})
    cwd = os.fspath(spec.cwd) if spec.cwd is not None else None
    command = shlex.join(argv)
    try:
        with blocking():
            done = subprocess.run(
                list(argv),
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=timeout,
            )
    except subprocess.TimeoutExpired:
        return CheckFailed(f"its {name} {command!r} ran over {timeout}s")
    except OSError as e:
        return CheckFailed(f"its {name} {command!r} could not run: {e}")
    if done.returncode == 0:
        return None
    said = done.stdout[-CHECK_OUTPUT:].decode(errors="replace").strip()
    return CheckFailed(f"its {name} {command!r} exited {done.returncode}", said)
