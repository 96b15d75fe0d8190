"""As whom, where and with what environment a program run for a child runs: its exec
probes, its `start_check` and its reload check (docs/sockets.md, "Users").

As the child, by default: its uid, gid and supplementary groups, its environment
(`_account.child_env`, the one function that builds the child's own) and its working
directory, which is its own business. A program run as root for a child with a
`user` is the tree file's explicit opt-in (`as_root`, as systemd's `+` prefix): it
then runs as nannytree does, with nannytree's own environment, in `/`: never in a
folder or with a HOME the child's user can fill (a Python run there would import
the child's modules as root), and only if its file and every folder above it are
root's alone (checked before each run: a few lstat calls).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from supervision import ChildSpec

from . import _account

ROOT_CWD = "/"


@dataclass(frozen=True)
class RunAs:
    """How one program runs: `env` (None: nannytree's own), `cwd` (None: nannytree's),
    `account` (uid, gid, groups; None: nannytree's ids), or `error` when the child's
    user cannot be taken on (the program does not run)."""

    env: Mapping[str, str] | None = None
    cwd: str | None = None
    account: _account.Account | None = None
    error: str = ""

    def popen(self) -> dict[str, Any]:
        """The keyword arguments of subprocess.Popen that say it."""
        kw: dict[str, Any] = {
            "env": None if self.env is None else dict(self.env),
            "cwd": self.cwd,
        }
        if self.account is not None:
            uid, gid, groups = self.account
            kw.update(user=uid, group=gid, extra_groups=list(groups))
        return kw


def run_as(spec: ChildSpec, program: str, *, as_root: bool = False) -> RunAs:
    """How `program`, run for `spec`'s child, runs: as the child, or (`as_root`, which
    the spec allows only with `user` or `group`) as nannytree, in /, if only root can
    change it."""
    if as_root:
        where = program if "/" in program else shutil.which(program)
        who = None if where is None else program_changer(where)
        if who is not None:
            return RunAs(error=root_program_problem(program, who))
        return RunAs(env=dict(os.environ), cwd=ROOT_CWD)
    try:
        resolved = _account.resolve(spec)
    except _account.AccountError as e:
        return RunAs(error=str(e))
    cwd = None if spec.cwd is None else os.path.abspath(os.fspath(spec.cwd))
    # Not root: resolve() allowed only our own ids, which need no change.
    account = resolved[0] if resolved is not None and os.geteuid() == 0 else None
    return RunAs(env=_account.child_env(spec, resolved), cwd=cwd, account=account)


def root_program_problem(program: str, who: str) -> str:
    """Why a root run of `program` is refused, and the fix (`check` says it too)."""
    return (
        f"{program!r} would run as root, but {who} can change it: code another user "
        "writes, run as root; make the file and its folders root's and not writable by "
        "others (chown root:root, chmod go-w)"
    )


def program_changer(path: str) -> str | None:
    """Who but root can change `path` (the file, a link on its way, or a folder above
    it), or None. Only root can change what this found root's, so a run right after
    runs what was checked."""
    seen: list[str] = []
    for start in (os.path.abspath(path), os.path.realpath(path)):
        here = start
        while here not in seen:
            seen.append(here)
            here = os.path.dirname(here)
    for place in seen:
        try:
            st = os.lstat(place)
        except OSError:
            continue
        if st.st_uid != 0:
            return f"uid {st.st_uid} (it owns {place})"
        if stat.S_ISLNK(st.st_mode):
            continue  # a link's mode means nothing; its folder is checked
        sticky = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
        if st.st_mode & stat.S_IWGRP and st.st_gid != 0 and not sticky:
            return f"group {st.st_gid} ({place} is group-writable)"
        if st.st_mode & stat.S_IWOTH and not sticky:
            return f"anyone ({place} is writable by all)"
    return None
