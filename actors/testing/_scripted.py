"""Slow and failing starts for a *command* child, without writing a Python target
(`hang_on_start`, `ready_after` and friends are Python targets): `scripted(spec, ...)`
wraps the command in a few lines of POSIX sh that run before it and then exec it, so
the supervised process is still the program itself.

- `fail_starts=K`: its first K starts exit 1 at once (counted in a file of the test's),
  saying so on stderr: a flaky dependency, a start that fails and then works.
- `start_delay=S`: S seconds pass before the program begins (its readiness is that much
  later): a slow start, a start timeout.
- `crash_after=S`: S seconds after it began, the program is SIGKILLed, as a crash would.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import tempfile

from supervision import ChildSpec

_SCRIPT = """\
n=$(cat {state} 2>/dev/null || echo 0)
echo $((n + 1)) > {state}
if [ "$n" -lt {fail} ]; then
  echo "scripted: start $((n + 1)) of {child} fails (fail_starts={fail})" >&2
  exit 1
fi
{delay}{crash}exec "$@"
"""


def scripted(
    spec: ChildSpec,
    *,
    fail_starts: int = 0,
    start_delay: float = 0.0,
    crash_after: float | None = None,
    state_dir: str | os.PathLike[str] | None = None,
) -> ChildSpec:
    """`spec` (a command child) with faults before its program starts; see the module.
    The start count lives in `state_dir` (a new private temporary folder if None)."""
    if spec.command is None:
        raise TypeError(
            f"scripted() wraps a command; child {spec.id!r} runs a Python target: use "
            "testing.ready_after, hang_on_start or crash_after as its target instead"
        )
    for name, value in (("fail_starts", fail_starts), ("start_delay", start_delay)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, not {value!r}")
    if crash_after is not None and crash_after <= 0:
        raise ValueError(f"crash_after must be > 0 seconds, not {crash_after!r}")
    folder = os.fspath(state_dir) if state_dir is not None else tempfile.mkdtemp(prefix="nt-")
    state = shlex.quote(os.path.join(folder, f"{spec.id}.starts"))
    delay = f"sleep {start_delay:g}\n" if start_delay else ""
    # A sibling in the child's group kills it later (the program keeps the shell's pid).
    crash = f"( sleep {crash_after:g}; kill -KILL $$ ) &\n" if crash_after is not None else ""
    script = _SCRIPT.format(
        state=state, fail=int(fail_starts), child=shlex.quote(spec.id), delay=delay, crash=crash
    )
    return dataclasses.replace(spec, command=("sh", "-c", script, "scripted", *spec.command))
