"""A Python target started as a child: forked from the launcher (its modules
preloaded), or run in a fresh interpreter that holds only its own settings (a
target with `fresh_interpreter`, or one that takes on another user: a fork of
ours would hold every child's template). Either may be a warm standby that waits
for "go" before it runs its target (`go_fd`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
from typing import Any

from . import _bootstrap, _listeners, _wire
from ._confine import Confinement
from ._control import CONTROL_FD_ENV
from ._exec import CATCHABLE, close_all, fork_exec, posix_spawn
from ._launched import SpawnError
from ._listeners import ChildSetup
from ._protocol import Template

# The directory holding the `actors` package (actors/_launcher/ is two below it),
# for fresh interpreters.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A fresh interpreter that becomes a user (argv: the package's folder, then main's).
_AS_USER = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from actors._launcher._bootstrap import main; main(sys.argv[2:])"
)


def another_user(t: Template) -> bool:
    """Whether the child takes on other credentials: then a target is exec'd afresh,
    never forked from us, who hold every child's template (env, secrets)."""
    return t.uid >= 0 or t.gid >= 0


def _above(fd: int, setup: ChildSetup) -> int:
    """`fd` moved past the fds a child's sockets take from 3 (closed-on-exec still)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _listeners.FIRST_FD + len(setup.fds))
    os.close(fd)
    return moved


def _child_settings(t: Template) -> dict[str, Any]:
    """What a Python child needs of its template, as plain data."""
    return {"payload": t.payload, "env": t.env, "sys_path": t.sys_path, "argv": t.argv}


def fork_target(
    me: int,
    t: Template,
    out_fd: int | None,
    err_fd: int | None,
    go_fd: int | None = None,
    setup: ChildSetup | None = None,
    confine: Confinement | None = None,
) -> tuple[int, int]:
    """A fork of the launcher that runs `t`'s target (after "go" on `go_fd`, if
    given): (its pid, the read end of its control pipe)."""
    control_r, control_w = os.pipe()
    # A refused limit comes back on it (EOF: all set), for a start error naming it.
    said_r, said_w = os.pipe() if confine is not None else (-1, -1)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()  # or the child would write our buffer again
    # Blocked across fork: the child must not run our handlers before resetting them.
    # (Our mask is empty otherwise; unblocking by hand spares pthread_sigmask's
    # conversion of the whole returned set into enum members on every fork.)
    signal.pthread_sigmask(signal.SIG_BLOCK, CATCHABLE)
    try:
        pid = os.fork()
    except OSError as exc:
        _bootstrap.unblock_all_signals()
        close_all([control_r, control_w, *([said_r, said_w] if confine else [])])
        raise SpawnError(exc.errno, f"fork failed: {exc.strerror}") from None
    if pid == 0:
        _bootstrap.run_forked(
            me,
            control_w,
            _child_settings(t),
            out_fd,
            err_fd,
            go_fd,
            setup,
            confine,
            said_w,
        )
    _bootstrap.unblock_all_signals()
    # Also set here, so a killpg from the host can never precede the child's own setpgid.
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)
    os.close(control_w)
    if confine is not None:
        os.close(said_w)
        try:
            said = os.read(said_r, 32)
        finally:
            os.close(said_r)
        if said:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            os.close(control_r)
            which, _, why = said[1:].partition(b":")
            raise SpawnError(int(why), confine.refused(int(which), int(why)))
    os.set_blocking(control_r, False)
    return pid, control_r


def spawn_fresh(
    me: int,
    t: Template,
    out_fd: int | None,
    err_fd: int | None,
    setup: ChildSetup | None = None,
    confine: Confinement | None = None,
    go_fd: int | None = None,
) -> tuple[int, int]:
    """A target in a new interpreter: by posix_spawn, or fork+exec when it takes on
    sockets, limits or no_new_privs. It holds only its own settings.

    One that takes on another user starts as root, isolated (-I: no env, no cwd on
    its path) so it can read an interpreter that user may not (a venv under /root),
    and becomes the user before it reads its target, as a fork of ours would. With
    `go_fd`, it is a warm standby of such a target: it waits for "go" on it."""
    control_r, control_w = os.pipe()
    # A memfd, not a pipe: writing a large payload must not block the loop.
    settings_fd = os.memfd_create("nannytree-settings", os.MFD_CLOEXEC)
    given_go = -1
    try:
        if setup is not None and setup.fds:
            # Above the fds its sockets take from 3: their numbers are on its argv.
            control_w = _above(control_w, setup)
            settings_fd = _above(settings_fd, setup)
        if go_fd is not None:  # a copy the child inherits: the caller keeps its own
            floor = _listeners.FIRST_FD + (len(setup.fds) if setup is not None else 0)
            given_go = fcntl.fcntl(go_fd, fcntl.F_DUPFD_CLOEXEC, floor)
            os.set_inheritable(given_go, True)
        _wire.write_all(settings_fd, _wire.dumps(_child_settings(t)))
        os.lseek(settings_fd, 0, os.SEEK_SET)
        if another_user(t):
            # Its env is in its settings, applied once it is the user: none of it
            # (LD_PRELOAD, PYTHONPATH) reaches the interpreter while it is root.
            env = {CONTROL_FD_ENV: str(control_w)}
            argv = [sys.executable, "-I", "-c", _AS_USER, _PACKAGE_PARENT]
            argv += [str(me), str(settings_fd), str(t.uid), str(t.gid)]
            argv.append(",".join(map(str, t.groups)))
            # Pickled by value: its unpickler is loaded while the child is root.
            argv.append("cloudpickle" if b"cloudpickle" in (t.payload or b"") else "-")
            argv.append(str(given_go))
            if setup is not None:  # its sockets only: it becomes the user itself
                setup = ChildSetup(setup.fds, setup.names, -1, -1, [])
        else:
            env = dict(t.env)
            env[CONTROL_FD_ENV] = str(control_w)
            python_path = env.get("PYTHONPATH")
            env["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + python_path if python_path else "")
            argv = [sys.executable, "-P", "-m", "actors._launcher._bootstrap"]
            argv += [str(me), str(settings_fd)]
        os.set_inheritable(control_w, True)
        os.set_inheritable(settings_fd, True)
        try:
            if (setup is None or not setup.fds) and confine is None:
                pid = posix_spawn(sys.executable, argv, env, out_fd, err_fd)
            else:
                pid = fork_exec(sys.executable, argv, env, out_fd, err_fd, None, setup, confine)
        except SpawnError:
            os.close(control_r)
            raise
        except OSError as exc:
            os.close(control_r)
            raise SpawnError(
                exc.errno, f"cannot start {sys.executable!r}: {exc.strerror}"
            ) from None
    finally:
        close_all([control_w, settings_fd, *([given_go] if given_go >= 0 else [])])
    os.set_blocking(control_r, False)
    return pid, control_r
