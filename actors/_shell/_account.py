"""The user a child runs as (`user`, `group`): looked up in the user database when its
request is built, as systemd's User= and Group= (docs/sockets.md, "Users").

The launcher takes on the ids after the fork (`actors._launcher._listeners.become`);
everything it opens for the child (log files, pipes) it opens as itself, before.
"""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Mapping

from supervision import ChildSpec

Account = tuple[int, int, tuple[int, ...]]  # uid, gid, supplementary groups


class AccountError(Exception):
    """A child's user or group cannot be taken on; the message names child and field."""


def resolve(spec: ChildSpec) -> tuple[Account, dict[str, str]] | None:
    """(uid, gid, groups) and the variables systemd's User= sets (HOME, USER, LOGNAME,
    SHELL), or None when the child runs as nannytree; raises AccountError."""
    if spec.user is None and spec.group is None:
        return None
    cid = spec.id
    env: dict[str, str] = {}
    uid = os.geteuid()
    gid = os.getegid()
    name: str | None = None
    if spec.user is not None:
        entry = _user(spec.user, cid)
        if entry is not None:
            uid, gid, name = entry.pw_uid, entry.pw_gid, entry.pw_name
            env = {
                "HOME": entry.pw_dir,
                "USER": entry.pw_name,
                "LOGNAME": entry.pw_name,
                "SHELL": entry.pw_shell or "/bin/sh",
            }
        else:  # a numeric id the database does not know, as systemd allows
            uid = int(spec.user)
            if spec.group is None:
                raise AccountError(
                    f"child {cid!r}: field 'user' is {spec.user!r}, a uid with no user "
                    "entry; give group as well"
                )
    if spec.group is not None:
        gid = _group(spec.group, cid)
    groups = tuple(os.getgrouplist(name, gid)) if name is not None else (gid,)
    if os.geteuid() != 0 and (uid != os.geteuid() or gid != os.getegid()):
        field = "user" if spec.user is not None else "group"
        raise AccountError(
            f"child {cid!r}: field {field!r} is {getattr(spec, field)!r}, but nannytree runs "
            f"as uid {os.geteuid()}, not root, and only root may start a child as another "
            f"user; drop {field} or run nannytree as root"
        )
    return (uid, gid, groups), env


def child_env(env: Mapping[str, str], account_env: Mapping[str, str], spec: ChildSpec) -> None:
    """The user's variables, unless the spec's own env sets them."""
    own = spec.env or {}
    for key, value in account_env.items():
        if key not in own:
            env[key] = value  # type: ignore[index]


def _user(value: str | int, cid: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwuid(value) if isinstance(value, int) else pwd.getpwnam(value)
    except KeyError:
        if isinstance(value, int):
            return None
        raise AccountError(
            f"child {cid!r}: field 'user' is {value!r}: no such user on this host; create "
            "it (useradd --system) or fix the name"
        ) from None


def _group(value: str | int, cid: str) -> int:
    if isinstance(value, int):
        return value
    try:
        return grp.getgrnam(value).gr_gid
    except KeyError:
        raise AccountError(
            f"child {cid!r}: field 'group' is {value!r}: no such group on this host; create "
            "it (groupadd --system) or fix the name"
        ) from None


def notify_owner(spec: ChildSpec) -> tuple[int, int] | None:
    """Who must own the child's notify socket: its user's (uid, gid) when it runs as
    another user; None otherwise, or when that user cannot be taken on (the spawn
    request reports why)."""
    if os.geteuid() != 0:
        return None
    try:
        account = resolve(spec)
    except AccountError:
        return None
    return None if account is None else account[0][:2]
