"""A program exec'd as a child: its path looked up in the child's PATH, then
`posix_spawn`, or fork and exec when it takes on work before its exec (its own pid
in its env, sockets from fd 3, another user, limits). A fresh interpreter for a
Python target is started the same way (`_targets`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
from collections.abc import Iterable

from . import _bootstrap
from ._confine import Confinement
from ._launched import SpawnError
from ._listeners import ChildSetup

CATCHABLE = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}


def close_all(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def which(command: str, path: str) -> str:
    """PATH lookup in the *child's* PATH (glibc's posix_spawnp uses ours)."""
    if "/" in command:
        return command
    denied = False
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory or ".", command)
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if os.access(candidate, os.X_OK):
            return candidate
        denied = True
    if denied:
        raise SpawnError(
            errno.EACCES,
            f"command {command!r} is on PATH but not executable; fix its permissions (chmod +x)",
        )
    raise SpawnError(
        errno.ENOENT,
        f"command {command!r} not found on PATH {path!r}; install it, give its full path, "
        "or set PATH in the child's env",
    )


def _dup_actions(out_fd: int | None, err_fd: int | None) -> list[tuple[int, int, int]]:
    actions = []
    if out_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, out_fd, 1))
    if err_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, err_fd, 2))
    return actions


def posix_spawn(
    path: str, argv: list[str], env: dict[str, str], out_fd: int | None, err_fd: int | None
) -> int:
    """A child in its own process group, with a fresh interpreter's signals (trap 5)."""
    return os.posix_spawn(
        path,
        argv,
        env,
        file_actions=_dup_actions(out_fd, err_fd),
        setpgroup=0,
        setsigdef=CATCHABLE,
        setsigmask=(),
    )


def fork_exec(
    path: str,
    argv: list[str],
    env: dict[str, str],
    out_fd: int | None,
    err_fd: int | None,
    pid_env: str | None,
    setup: ChildSetup | None = None,
    confine: Confinement | None = None,
) -> int:
    """As posix_spawn, but with the child's own pid in `pid_env` (known only after the
    fork), what `setup` asks (sockets from fd 3, another user) and what `confine` does
    (limits, no_new_privs). The exec's failure comes back on a close-on-exec pipe, as
    an OSError."""
    err_r, err_w = os.pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, CATCHABLE)
    try:
        pid = os.fork()
    except OSError:
        _bootstrap.unblock_all_signals()
        os.close(err_r)
        os.close(err_w)
        raise
    if pid == 0:
        try:
            signal.set_wakeup_fd(-1)
            for sig in CATCHABLE:
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(sig, signal.SIG_DFL)
            os.setpgid(0, 0)
            if out_fd is not None:
                os.dup2(out_fd, 1)
            if err_fd is not None:
                os.dup2(err_fd, 2)
            own = {pid_env: str(os.getpid())} if pid_env is not None else {}
            if confine is not None:  # limits first: raising a hard one needs root
                refused = confine.limit()
                if refused is not None:
                    os.write(err_w, b"L%d:%d" % refused)
                    os._exit(127)
            if setup is not None:
                try:
                    (err_w,) = setup.apply([err_w])
                except OSError as exc:
                    os.write(err_w, b"S%d" % (exc.errno or 0))  # not the exec: the setup
                    os._exit(127)
                own.update(setup.env(os.getpid()))
            if confine is not None:
                confine.seal()
            _bootstrap.unblock_all_signals()
            os.execve(path, argv, {**env, **own})
        except OSError as exc:
            os.write(err_w, str(exc.errno or 0).encode())
        finally:
            os._exit(127)
    _bootstrap.unblock_all_signals()
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # as the child does: a killpg may come before it runs
    os.close(err_w)
    try:
        said = os.read(err_r, 32)  # EOF at the exec: the pipe is close-on-exec
    finally:
        os.close(err_r)
    if said:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        if said.startswith(b"L") and confine is not None:
            which, _, why = said[1:].partition(b":")
            raise SpawnError(int(why), confine.refused(int(which), int(why)))
        if said.startswith(b"S") and setup is not None:
            code = int(said[1:]) if said[1:].isdigit() else errno.EIO
            raise SpawnError(
                code,
                f"cannot take on uid {setup.uid}, gid {setup.gid} and groups {setup.groups}"
                f" or place its sockets: {os.strerror(code)} (a container may forbid "
                "setgroups; run nannytree as real root, or drop user/group)",
            )
        code = int(said) if said.isdigit() else errno.EIO
        raise OSError(code, os.strerror(code))
    return pid
