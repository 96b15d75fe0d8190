"""What the host says about a worker an update would start, before anything
stops: its cwd, its program and the folders of the files it writes exist. The
facts that `supervision.preflight` turns into a refusal.

`Tree.update` checks these; the run host checks what `nannytree check` does
(actors/cli/_check.py: these and more: probes' programs, users, sockets, limits).
"""

from __future__ import annotations

import os
import shutil

from supervision import CAPTURE, ChildSpec, ReadyFile


def problems_of(child: ChildSpec) -> list[str]:
    """The problems of one worker, one line each, naming the child and the field."""
    found = []
    cwd = None if child.cwd is None else os.fspath(child.cwd)
    if cwd is not None and not os.path.isdir(cwd):
        found.append(f"child {child.id!r}: cwd {cwd!r} does not exist; create it or fix cwd")
    if child.command is not None:
        program = child.command[0]
        if not _runnable(program, cwd, None if child.env is None else dict(child.env)):
            found.append(
                f"child {child.id!r}: program {program!r} is not an executable file"
                + ("" if "/" in program else " on PATH")
                + "; install it or give its full path"
            )
    files = {"pid_file": child.pid_file, "stdout": child.stdout, "stderr": child.stderr}
    if isinstance(child.ready, ReadyFile):
        files["ready file"] = child.ready.path
    for name, path in files.items():
        if path is None or path == CAPTURE:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            found.append(
                f"child {child.id!r}: {name} {str(path)!r}: folder {folder!r} does not exist; "
                "create it or fix the path"
            )
    return found


def _runnable(program: str, cwd: str | None, env: dict[str, str] | None) -> bool:
    """Whether `program` would be found and run as the child's env and cwd say."""
    if "/" in program:
        full = os.path.join(cwd or os.getcwd(), program)
        return os.path.isfile(full) and os.access(full, os.X_OK)
    path_env = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
    return shutil.which(program, path=path_env) is not None
