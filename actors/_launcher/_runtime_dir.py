"""The private directory of this user's trees: control sockets, their log folders,
and the files that carry an injected exception to a child.

$XDG_RUNTIME_DIR/nannytree when XDG_RUNTIME_DIR names a directory we may write
(systemd makes it per user, 0700; root takes only one of root's: sudo may keep a
user's); else, for root, /run/nannytree (ROOT_DIR:
/run is root's, so no other user can take the name first, as one could in /tmp);
else nannytree-<uid> in the temp directory ($TMPDIR if it names one we may write,
else /tmp). Made with mode 0700. One that exists already must be a directory of
ours that nobody else may enter: it is refused otherwise, never repaired, since
another user may have made it (or a symlink in its place) to read our sockets or
plant files in it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal, overload

ROOT_DIR = Path("/run/nannytree")


class UnsafeDirectory(PermissionError):
    """A directory we would keep private files in is not private; the message says
    which and how to fix it."""


def private_dir(path: Path, *, create: bool) -> Path | None:
    """`path` as a directory of ours with mode 0700, made if absent and `create`;
    None if absent and not `create`. UnsafeDirectory if it is anything else."""
    if create:
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(path, 0o700)  # ours, just made: the umask may have taken bits
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    uid = os.getuid()
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectory(f"{path} is not a directory; remove it")
    if st.st_uid != uid:
        raise UnsafeDirectory(
            f"{path} belongs to uid {st.st_uid}, not to you (uid {uid}); remove it "
            "(as its owner or root) or set XDG_RUNTIME_DIR to a directory of yours"
        )
    if st.st_mode & 0o077:
        raise UnsafeDirectory(
            f"{path} has mode {stat.S_IMODE(st.st_mode):04o}, so other users may enter it; "
            f"`chmod 700 {path}` if it holds nothing foreign, else remove it"
        )
    return path


@overload
def runtime_dir(*, create: Literal[True] = True) -> Path: ...
@overload
def runtime_dir(*, create: bool) -> Path | None: ...
def runtime_dir(*, create: bool = True) -> Path | None:
    """This user's private directory (see the module), made if absent and `create`;
    None if absent and not `create` (a client looks, it never makes). Raises
    UnsafeDirectory if it exists but is not private."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    root = os.getuid() == 0
    if xdg and _writable_dir(xdg) and not (root and os.stat(xdg).st_uid != 0):
        path = Path(xdg) / "nannytree"
    elif root:
        path = ROOT_DIR
    else:
        tmp = os.environ.get("TMPDIR")
        path = Path(tmp if tmp and _writable_dir(tmp) else "/tmp") / f"nannytree-{os.getuid()}"
    return private_dir(path, create=create)


def _writable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)
