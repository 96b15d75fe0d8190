"""Where `nannytree run` keeps its children's log files, and how (docs/logs.md).

Not in the runtime directory (a tmpfs for a login session, emptied at logout):
`--log-dir`, else $NANNYTREE_LOG_DIR, else /var/log/nannytree for root and
$XDG_STATE_HOME/nannytree (~/.local/state/nannytree) for a user. Under it, one
private folder per tree (`<dir>/<tree>/<supervisor>/<child>.log`).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from actors._launcher._journal import identifier_of
from actors._launcher._safe_open import open_folder
from actors.cli._control import ControlError, own_dir
from supervision import CAPTURE, ChildSpec, SupervisorSpec

LOG_DIR_ENV = "NANNYTREE_LOG_DIR"
DEFAULT_MAX_BYTES = 10 << 20  # per file, as `--log-max-bytes` says unless told
DEFAULT_BACKUPS = 5  # older files kept: at most 60 MiB a child by default


def default_log_dir() -> Path:
    """$NANNYTREE_LOG_DIR, else /var/log/nannytree (root), else the XDG state home's."""
    given = os.environ.get(LOG_DIR_ENV)
    if given:
        return Path(given)
    if os.geteuid() == 0:
        return Path("/var/log/nannytree")
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "nannytree"


def tree_log_folder(base: Path, stem: str) -> Path:
    """`base/stem`, private to us (made, with `base`, if absent); OSError or
    ControlError (a folder of someone else's) if it cannot be.

    The base is walked as a child's log folder is (actors/_launcher/_safe_open.py):
    one another user owns or can write is refused, since they could swap `stem`
    for a symlink. The launcher walks every child's path again at each open."""
    base.mkdir(mode=0o755, parents=True, exist_ok=True)
    where = str(base.absolute())
    held = open_folder(where, None, reading=True)
    held.close()
    if held.foreign is not None:
        mine = "root" if os.geteuid() == 0 else "you"
        raise ControlError(
            f"log folder {where} can be written by {held.foreign}: they could swap "
            f"{stem} in it for a symlink and have the tree write where they choose; "
            f"make it {mine} only to write (chown {os.geteuid()}: {where}; chmod go-w {where}) "
            "or pass --log-dir a folder of yours"
        )
    folder = own_dir(base / stem, create=True)
    assert folder is not None
    return folder


def with_log_defaults(
    spec: SupervisorSpec, max_bytes: int, backups: int, stamps: bool
) -> SupervisorSpec:
    """The tree with every child that writes to a file and sets no log_* field of
    its own kept as the run's flags say (a placed subtree's files are on its node)."""
    children: list[ChildSpec | SupervisorSpec] = []
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            keep = child.placement is None
            children.append(with_log_defaults(child, max_bytes, backups, stamps) if keep else child)
            continue
        if not any(
            s not in (None, CAPTURE) and identifier_of(s) is None
            for s in (child.stdout, child.stderr)
        ):
            children.append(child)
            continue
        children.append(
            replace(
                child,
                log_max_bytes=max_bytes if child.log_max_bytes is None else child.log_max_bytes,
                log_backups=backups if child.log_backups is None else child.log_backups,
                log_timestamps=stamps if child.log_timestamps is None else child.log_timestamps,
            )
        )
    return replace(spec, children=children)
