"""Tree files on disk: read, resolve `module:function` targets, substitute `${NAME}`
variables (from the environment, under `vars`), read the `env_file`s with each
child's rights (`read_env_file`), load into a spec."""

from __future__ import annotations

import errno
import importlib
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from supervision import MISSING, ConfigError, SupervisorSpec, load_tree
from supervision.config._env_file import (
    MAX_ENV_FILE_BYTES,
)
from supervision.config._errors import (
    check_size,
)
from supervision.config._keys import (
    MAX_FILE_BYTES,
)

ENV_FILE_TIMEOUT = 10.0  # seconds for a read as another user (it takes ~20 ms)


def import_target(ref: str) -> Callable[..., Any]:
    """Import "package.module:function" (the function may be "Class.method")."""
    module_name, _, attr_path = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        obj = getattr(obj, attr)
    return obj  # type: ignore[no-any-return]


def tree_vars(vars: Mapping[str, object] | None = None) -> dict[str, object]:
    """The values of a tree file's `${NAME}`: the environment, under `vars`."""
    return {**os.environ, **(vars or {})}


def read_tree_file(path: str | Path) -> bytes:
    """A tree file's bytes, never more than its limit (supervision/config/_keys.py): one
    past it is refused (TooLarge) before more is read. OSError if it cannot be read."""
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    check_size(len(data), str(path))
    return data


def load_tree_file(
    path: str | Path,
    *,
    vars: Mapping[str, object] | None = None,
    resolve_targets: bool = True,
) -> SupervisorSpec:
    """Read and load a TOML tree file; targets import from its directory too.

    `${NAME}` and `${NAME:-default}` in its string values take their values from
    `vars`, then the environment (`$${` is a literal `${`; supervision/config/_vars.py).
    Each `env_file` is read with its child's rights (`read_env_file`), when the tree
    is loaded: `nannytree update` reads them again, and a changed value replaces the
    child. `resolve_targets=False` imports nothing: targets stay `UnresolvedTarget`s
    (`nannytree check`). Raises ConfigError (also for a file that cannot be read, or
    a variable unset).
    """
    path = Path(path)
    try:
        data = read_tree_file(path)
    except OSError as e:
        raise ConfigError(str(path), "", MISSING, f"cannot read it ({e.strerror or e})") from None
    # As `python script.py` does: modules beside the file are importable, in the
    # host and (through sys.path, which children inherit) in every child.
    here = str(path.resolve().parent)
    if resolve_targets and here not in sys.path:
        sys.path.insert(0, here)
    return load_tree(
        data,
        str(path),
        resolve_target=import_target if resolve_targets else None,
        vars=tree_vars(vars),
        read_env_file=read_env_file,
    )


def load_tree_text(
    text: str, filename: str, *, vars: Mapping[str, object] | None = None
) -> SupervisorSpec:
    """Load a tree from text (the embedded demo), resolving targets by import, with
    variables and env files as load_tree_file reads them."""
    return load_tree(
        text,
        filename,
        resolve_target=import_target,
        vars=tree_vars(vars),
        read_env_file=read_env_file,
    )


# -- env files, read with the child's rights -------------------------------------------

# Run as the child's user (its own rights, whatever it made the path be): a regular
# file only (a FIFO would hold the read until its timeout, a device never end), at
# most the limit + 1 bytes. The system's sh and head, which any user may run
# (nannytree's Python may be where that user cannot read it: under /root).
_READ_AS_USER = (
    'if [ -e "$1" ] && [ ! -f "$1" ]; then echo "not a regular file" >&2; exit 3; fi\n'
    'exec head -c "$2" -- "$1"\n'
)
_SYSTEM_PATH = "/usr/bin:/bin"
_ERRNO_OF = {os.strerror(n): n for n in errno.errorcode}  # head's text, in the C locale


def read_env_file(path: str, user: str | int | None, group: str | int | None) -> bytes:
    """An env file's bytes (at most MAX_ENV_FILE_BYTES + 1), read with the rights of the
    child's `user` and `group` (supervision/config/_env_file.py, `EnvFileReader`).

    Run as root for a child with a user other than root, the read runs as that user,
    its group and groups (`head`, in a process of its own, as its exec probes are): a
    path that user can change (a symlink to /etc/shadow in its own folder) gives it
    nothing it could not read itself. Otherwise the file is read here, as nannytree.
    Only a regular file is read: a FIFO or a device is refused (one swapped in after
    that look holds a read as the user at most ENV_FILE_TIMEOUT)."""
    ids = _ids_for(user, group) if os.geteuid() == 0 and user is not None else None
    if ids is None or ids[0] == 0:
        return _read_here(path)
    uid, gid, groups = ids
    argv = ["/bin/sh", "-c", _READ_AS_USER, "sh", os.path.abspath(path)]
    argv.append(str(MAX_ENV_FILE_BYTES + 1))
    try:
        done = subprocess.run(
            argv,
            user=uid,
            group=gid,
            extra_groups=list(groups),
            cwd="/",
            env={"PATH": _SYSTEM_PATH, "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=ENV_FILE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise OSError(errno.ETIMEDOUT, f"no end in {ENV_FILE_TIMEOUT:g} s", path) from None
    if done.returncode == 0:
        return done.stdout
    text = done.stderr.decode(errors="replace").strip()[-300:]
    if done.returncode == 3:
        raise OSError(errno.EINVAL, "not a regular file", path)
    reason = text.rpartition(": ")[2]  # head: cannot open 'x' for reading: Permission denied
    raise OSError(_ERRNO_OF.get(reason, errno.EIO), reason or "head failed", path)


def _read_here(path: str, hops: int = 0) -> bytes:
    """The file read with the tree's own rights, as the launcher opens a child's files
    (actors/_launcher/_safe_open.py): its folder walked from / without following a
    symlink someone else could have put there, and refused if anyone but root and the
    tree's owner can write it or the file, since what they wrote would become the
    environment of a child that runs with the tree's rights (LD_PRELOAD, say). A
    symlink is followed only there, as a folder's is."""
    from ._launcher._safe_open import UnsafeFile, open_folder, owners

    path = os.path.abspath(path)
    folder = open_folder(os.path.dirname(path), None)  # UnsafeFile: others can write it
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:
            fd = os.open(os.path.basename(path), flags, dir_fd=folder.fd)
        except OSError as e:
            if e.errno != errno.ELOOP or hops >= 40:
                raise OSError(e.errno, e.strerror, path) from None
            link = os.readlink(os.path.basename(path), dir_fd=folder.fd)  # root's to set
            return _read_here(os.path.join(os.path.dirname(path), link), hops + 1)
    finally:
        folder.close()
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if st.st_uid not in owners() or st.st_mode & 0o002 or (st.st_mode & 0o020 and st.st_gid):
            raise UnsafeFile(
                f"{path} can be changed by a user other than root and the tree's owner, "
                "and is read for a child that runs with the tree's rights: whatever they "
                f"write would be its environment; make it root's (chown root: {path}; "
                f"chmod go-w {path}), or give the child a user (user = ...)"
            )
        return os.read(fd, MAX_ENV_FILE_BYTES + 1)
    finally:
        os.close(fd)


def _ids_for(user: str | int, group: str | int | None) -> tuple[int, int, tuple[int, ...]]:
    """(uid, gid, groups) a child with this user and group runs with (as the shell's
    account lookup: actors/_shell/_account.py); LookupError naming what is unknown."""
    import grp
    import pwd

    try:
        entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
    except KeyError:
        if isinstance(user, str):
            raise LookupError(f"no user {user!r} on this host") from None
        entry = None  # a numeric uid without an entry, as systemd allows
    if group is None and entry is None:
        raise LookupError(f"uid {user} has no user entry and no group is given")
    if isinstance(group, str):
        try:
            gid = grp.getgrnam(group).gr_gid
        except KeyError:
            raise LookupError(f"no group {group!r} on this host") from None
    else:
        gid = group if group is not None else entry.pw_gid  # type: ignore[union-attr]
    if entry is None:
        return int(user), gid, (gid,)
    return entry.pw_uid, gid, tuple(os.getgrouplist(entry.pw_name, gid))
