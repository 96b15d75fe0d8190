"""The launcher process: ``python -P -m actors._launcher._main SOCK_FD LIFELINE_FD [MODULE...]``.

One per root tree. It starts as the *guardian*: a tiny single-threaded child
subreaper that forks the launcher proper and then only waits. The launcher,
also single-threaded (so forking is safe) and a subreaper, spawns command
children with ``posix_spawn``, forks Python children from its pre-imported
state, reaps every exit and reports it to the host over ``SOCK_FD`` (the
records of ``actors._launcher._protocol``; plain data, never pickle).

Who kills what (docs/launcher.md has the whole table):
- the host dies: EOF on ``LIFELINE_FD``; the launcher kills every child's group
  and every descendant re-parented to it, and exits; the guardian then sweeps
  what is re-parented to it (it kills a launcher still there after 0.5 s);
- the launcher dies: Python children die with it (PR_SET_PDEATHSIG); commands
  and every escaped descendant are re-parented to the guardian, which kills
  them and exits, so the host learns that the launcher is gone only once
  nothing of it is left;
- the host and the launcher die together: the guardian does the same;
- the guardian dies: the launcher gets SIGTERM (PR_SET_PDEATHSIG) and does as
  when the host dies, then exits; the host, which sees the guardian exit, kills
  the process groups it was told about;
- the guardian and the launcher die together (SIGKILL): Python children die with
  the launcher (PR_SET_PDEATHSIG), the host kills the children's groups, and
  what left its child's group survives: the one case not covered.

It never prints: all it says goes on the socket.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import selectors
import signal
import sys
import threading
import time

from . import _bootstrap, _wire
from ._loop import STOP_SIGNALS, LauncherLoop
from ._orphans import sweep
from ._protocol import Hello
from ._title import set_title, take_tree_name

# The launcher's PR_SET_PDEATHSIG: one it catches (one of STOP_SIGNALS), so that the
# guardian's death stops its loop, which kills every child's group and sweeps every
# process re-parented to it before it exits (docs/launcher.md, trap 17).
GUARDIAN_GONE = signal.SIGTERM
# Once the host is gone, how long the launcher has to kill and sweep its children
# itself (a few ms) before the guardian kills it and sweeps in its stead.
HOST_GONE_GRACE = 0.5


def preload(modules: list[str]) -> str | None:
    """Import what forked children should find imported (trap 13); what went wrong, if any."""
    for name in ("cloudpickle", *modules):
        try:
            importlib.import_module(name)
        except BaseException as exc:
            return f"preload module {name!r} failed to import: {type(exc).__name__}: {exc}"
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate())
        return (
            f"a preloaded module started threads ({names}); the launcher must stay "
            "single-threaded to fork safely: do not preload it"
        )
    return None


def guard(launcher: int, lifeline_fd: int) -> int:
    """The guardian: wait for the launcher or the host to die, then leave nothing behind.

    Every process of the tree whose parent dies is re-parented to the nearest
    subreaper: the launcher while it lives, then us. When the host dies, the
    launcher sweeps what it started on its own, and finishes even if we are
    killed meanwhile; one that has not exited within HOST_GONE_GRACE is killed.
    """
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: None)  # the lifeline decides, not signals
    sel = selectors.DefaultSelector()
    sel.register(wake_r, selectors.EVENT_READ)
    sel.register(lifeline_fd, selectors.EVENT_READ)
    status = 0
    deadline: float | None = None  # for the launcher to exit, once the host is gone
    while True:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready = {key.fd for key, _ in sel.select(timeout)}
        if lifeline_fd in ready:
            try:
                data = os.read(lifeline_fd, 64)
            except OSError:
                data = b""
            if not data:  # the host is gone: so is the tree
                sel.unregister(lifeline_fd)  # EOF would wake us again and again
                deadline = time.monotonic() + HOST_GONE_GRACE
        if deadline is not None and time.monotonic() >= deadline:
            deadline = None
            with contextlib.suppress(OSError):
                os.kill(launcher, signal.SIGKILL)  # hung: its Python children die with it
        if wake_r in ready:
            with contextlib.suppress(OSError):
                while os.read(wake_r, 4096):
                    pass
        done = False
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                done = True
                break
            if pid == 0:
                break
            if pid == launcher:
                status, done = os.waitstatus_to_exitcode(raw), True
        if done:
            sweep(os.getpid())
            return status if status >= 0 else 128 - status


def main(argv: list[str]) -> int:
    sock_fd, lifeline_fd = int(argv[0]), int(argv[1])
    # A mask inherited from the host's thread would hold back SIGCHLD and our death signal.
    _bootstrap.unblock_all_signals()
    # Escaped descendants re-parent to the nearest subreaper: the launcher, then us.
    _bootstrap.prctl(_bootstrap.PR_SET_CHILD_SUBREAPER, 1)
    guardian = os.getpid()
    take_tree_name()
    set_title("guardian")  # before the fork: the launcher renames itself below
    launcher = os.fork()
    if launcher:
        os.close(sock_fd)  # only the launcher talks to the host
        return guard(launcher, lifeline_fd)
    # The guardian's death is caught (trap 17): we kill and sweep all we started, then go.
    _bootstrap.prctl(_bootstrap.PR_SET_PDEATHSIG, GUARDIAN_GONE)
    if os.getppid() != guardian:
        os._exit(1)
    _bootstrap.prctl(_bootstrap.PR_SET_CHILD_SUBREAPER, 1)  # not inherited across fork
    loop = LauncherLoop(sock_fd, lifeline_fd)
    if os.getppid() != guardian:  # it died before our handler, or its signal was ignored
        loop.stopping = True
    error = preload(argv[2:])
    set_title("launcher")  # before its Hello: once the host has it, `ps` says so
    loop.sock.settimeout(10.0)
    with contextlib.suppress(OSError):
        loop.sock.sendall(_wire.encode(Hello(loop.pid, error).pack()))
    loop.sock.setblocking(False)
    if error is not None:
        return 1
    gc.freeze()  # fewer copy-on-write faults in forked children
    loop.run()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # the launcher was forked: never run the interpreter's exit twice
