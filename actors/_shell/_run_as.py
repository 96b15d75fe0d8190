"""As whom, where and with what environment a program run for a child runs: its exec
probes, its `start_check` and its reload check (docs/sockets.md, "Users").

As the child, by default: its uid, gid and supplementary groups, its environment
(`_account.child_env`, the one function that builds the child's own) and its working
directory, which is its own business. A program run as root for a child with a
`user` is the tree file's explicit opt-in (`as_root`, as systemd's `+` prefix): it
then runs as nannytree does, with nannytree's own environment, in `/`: never in a
folder or with a HOME the child's user can fill (a Python run there would import
the child's modules as root).
"""

from __future__ import annotations

import os
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


def run_as(spec: ChildSpec, *, as_root: bool = False) -> RunAs:
    """How a program run for `spec`'s child runs: as the child, or (`as_root`, which
    the spec allows only with `user` or `group`) as nannytree, in /."""
    if as_root:
        return RunAs(env=dict(os.environ), cwd=ROOT_CWD)
    try:
        resolved = _account.resolve(spec)
    except _account.AccountError as e:
        return RunAs(error=str(e))
    cwd = None if spec.cwd is None else os.path.abspath(os.fspath(spec.cwd))
    # Not root: resolve() allowed only our own ids, which need no change.
    account = resolved[0] if resolved is not None and os.geteuid() == 0 else None
    return RunAs(env=_account.child_env(spec, resolved), cwd=cwd, account=account)
