"""The user a child runs as (`user`, `group`) and the environment it gets: looked up in
the user database when its request is built, as systemd's User= and Group=
(docs/sockets.md, "Users").

The launcher takes on the ids after the fork (`actors._launcher._listeners.become`);
everything it opens for the child (log files, pipes) it opens as itself, before. The
programs the shell runs for the child (its probes and checks) take the same ids and
the same environment (`_run_as.py`).
"""

from __future__ import annotations

import grp
import os
import pwd

from supervision import ChildSpec

Account = tuple[int, int, tuple[int, ...]]  # uid, gid, supplementary groups
Resolved = tuple[Account, dict[str, str]]  # and the variables of its user entry

# What a child with `user` keeps of nannytree's environment: systemd's User= passes
# PATH and the locale. The rest may be root's own (HOME=/root, XDG_RUNTIME_DIR, SUDO_*,
# MAIL, a credential exported in root's shell): the tree file's `env` passes those on
# purpose.
PASSED = frozenset({"PATH", "LANG", "LANGUAGE", "TZ"})
PASSED_PREFIX = "LC_"


class AccountError(Exception):
    """A child's user or group cannot be taken on; the message names child and field."""


def resolve(spec: ChildSpec) -> Resolved | None:
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


def child_env(spec: ChildSpec, resolved: Resolved | None) -> dict[str, str]:
    """The environment of the child and of every program run for it: nannytree's (all
    of it; with `user`, only PATH and the locale; none with inherit_env=False), then
    the user's HOME, USER, LOGNAME and SHELL, then the spec's own `env`, which wins."""
    if not spec.inherit_env:
        env: dict[str, str] = {}
    elif spec.user is not None:
        env = {k: v for k, v in os.environ.items() if _passed(k)}
    else:
        env = dict(os.environ)
    if resolved is not None:
        env.update(resolved[1])
    env.update(spec.env or {})
    return env


def _passed(name: str) -> bool:
    return name in PASSED or name.startswith(PASSED_PREFIX)


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
