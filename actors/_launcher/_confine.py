"""What a child is confined by between its fork and its exec (or its target): its
resource limits (setrlimit) and no_new_privs (prctl), systemd's LimitNOFILE= and
NoNewPrivileges=. Only a child that sets either pays for the fork+exec they need
(posix_spawn cannot do them)."""

from __future__ import annotations

import ctypes
import errno
import os
import resource

PR_SET_NO_NEW_PRIVS = 38


class Confinement:
    """A template's limits ([name, soft, hard], -1: infinity) and no_new_privs."""

    __slots__ = ("limits", "names", "no_new_privs")

    def __init__(self, limits: list[list[object]], no_new_privs: bool) -> None:
        self.names = [str(name) for name, _, _ in limits]
        self.limits = [
            (getattr(resource, f"RLIMIT_{name}".upper()), _rlim(soft), _rlim(hard))
            for name, soft, hard in limits
        ]
        self.no_new_privs = no_new_privs

    def limit(self) -> tuple[int, int] | None:
        """In the child, while it may still raise a hard limit (before it changes user):
        the limits; (index, errno) of the one refused, else None."""
        for i, (which, soft, hard) in enumerate(self.limits):
            try:
                resource.setrlimit(which, (soft, hard))
            except OSError as exc:
                return i, exc.errno or errno.EPERM
            except ValueError:  # past the hard limit: refused as the kernel would
                return i, errno.EINVAL
        return None

    def seal(self) -> None:
        """In the child, last: no exec after this may gain privileges."""
        if self.no_new_privs:
            libc = ctypes.CDLL(None, use_errno=True)
            if int(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))

    def refused(self, index: int, code: int) -> str:
        """Why limit `index` could not be set, and the fix (in the launcher)."""
        which, soft, hard = self.limits[index]
        name = self.names[index]
        own_soft, own_hard = resource.getrlimit(which)
        return (
            f"cannot set its limit {name} to {_text(soft)}:{_text(hard)} (nannytree's own is "
            f"{_text(own_soft)}:{_text(own_hard)}): {os.strerror(code)}; a hard limit above "
            "nannytree's needs root (CAP_SYS_RESOURCE), and nofile stops at fs.nr_open: "
            f"lower limits.{name}"
        )


def _rlim(value: object) -> int:
    assert isinstance(value, int)
    return resource.RLIM_INFINITY if value < 0 else value


def _text(value: int) -> str:
    return "infinity" if value == resource.RLIM_INFINITY else str(value)
