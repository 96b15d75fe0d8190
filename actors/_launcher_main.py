"""The launcher process: ``python -P -m actors._launcher_main SOCK_FD LIFELINE_FD [MODULE...]``.

One per root tree, single-threaded (so forking is safe), a child subreaper.
It spawns command children with ``posix_spawn`` and forks Python children from
its pre-imported state, reaps every exit and reports it to the host over
``SOCK_FD``. EOF on ``LIFELINE_FD`` (the host died or closed the tree), or
SIGTERM/SIGINT/SIGHUP, makes it kill every child's group and every descendant
re-parented to it, then exit. It never prints: all it says goes on the socket.

Messages (see ``actors._wire``): from the host ``("spawn", req_id, settings)``;
to the host ``("hello", pid, error)``, ``("spawned", req_id, pid)``,
``("spawn_failed", req_id, errno, message)``, ``("ready", pid)`` and
``("exited", pid, returncode, error)``.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import os
import pickle
import selectors
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from actors import _bootstrap, _wire

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_CATCHABLE = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
_OUTPUT_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
# The directory holding the `actors` package, for fresh interpreters.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _SpawnFailed(Exception):
    def __init__(self, err: int | None, message: str) -> None:
        super().__init__(message)
        self.errno = err
        self.message = message


class _Child:
    __slots__ = ("captures", "control_fd", "decoder", "error", "pid")

    def __init__(self, pid: int, control_fd: int | None) -> None:
        self.pid = pid
        self.control_fd = control_fd
        self.decoder = _wire.Decoder()
        self.error: tuple[str, str, str] | None = None
        self.captures: dict[int, int] = {}  # stream (1 or 2) -> read end of its pipe


def _which(command: str, path: str) -> str:
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
        raise _SpawnFailed(
            errno.EACCES,
            f"command {command!r} is on PATH but not executable; fix its permissions (chmod +x)",
        )
    raise _SpawnFailed(
        errno.ENOENT,
        f"command {command!r} not found on PATH {path!r}; install it, give its full path, "
        "or set PATH in the child's env",
    )


def _chdir(cwd: str) -> None:
    try:
        os.chdir(cwd)
    except FileNotFoundError as exc:
        raise _SpawnFailed(
            exc.errno, f"working directory {cwd!r} does not exist; create it or fix cwd"
        ) from None
    except OSError as exc:
        raise _SpawnFailed(
            exc.errno, f"cannot use working directory {cwd!r}: {exc.strerror}; fix cwd"
        ) from None


def _open_output(path: str | None, which: str, captures: dict[int, int]) -> int | None:
    if path is None:
        return None
    if path == "capture":
        read_end, write_end = os.pipe()  # both close-on-exec; dup2 onto 1/2 clears it
        os.set_blocking(read_end, False)
        captures[1 if which == "stdout" else 2] = read_end
        return write_end
    try:
        return os.open(path, _OUTPUT_FLAGS, 0o644)
    except OSError as exc:
        raise _SpawnFailed(
            exc.errno,
            f"cannot open its {which} file {path!r}: {exc.strerror}; "
            "check that the directory exists and is writable",
        ) from None


def _dup_actions(out_fd: int | None, err_fd: int | None) -> list[tuple[int, int, int]]:
    actions = []
    if out_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, out_fd, 1))
    if err_fd is not None:
        actions.append((os.POSIX_SPAWN_DUP2, err_fd, 2))
    return actions


def _posix_spawn(
    path: str, argv: list[str], env: Mapping[str, str], out_fd: int | None, err_fd: int | None
) -> int:
    """A child in its own process group, with a fresh interpreter's signals (trap 5)."""
    return os.posix_spawn(
        path,
        argv,
        env,
        file_actions=_dup_actions(out_fd, err_fd),
        setpgroup=0,
        setsigdef=_CATCHABLE,
        setsigmask=(),
    )


def _child_pids(me: int) -> list[int]:
    """Pids of our live children: the kernel's list when it has one, else a /proc scan."""
    try:
        with open(f"/proc/self/task/{me}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return [pid for pid, _ in _children_of(me)]


def _children_of(me: int) -> list[tuple[int, int]]:
    """(pid, pgid) of every live process whose parent is `me`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        if int(fields[1]) == me:
            found.append((int(name), int(fields[2])))
    return found


class LauncherLoop:
    def __init__(self, sock_fd: int, lifeline_fd: int) -> None:
        self.pid = os.getpid()
        # Passed fds arrive inheritable: they must not leak into commands.
        self.sock = socket.socket(fileno=sock_fd)
        self.sock.set_inheritable(False)
        os.set_inheritable(lifeline_fd, False)
        self.lifeline = lifeline_fd
        self.children: dict[int, _Child] = {}
        self.standbys: dict[int, tuple[_Child, int]] = {}  # id -> (child, write end of "go")
        self.discarded: dict[int, _Child] = {}
        self.outbox: list[bytes] = []
        self.requests = _wire.Decoder()
        self._recv_buf = bytearray(1 << 18)
        self._recv_view = memoryview(self._recv_buf)
        self.stopping = False
        self.host_gone = False

        self.sel = selectors.DefaultSelector()
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        # A Python-level handler is what makes the C handler write the wakeup fd.
        signal.signal(signal.SIGCHLD, self._on_sigchld)
        for sig in _STOP_SIGNALS:
            signal.signal(sig, self._on_stop_signal)
        self.sel.register(self.sock, selectors.EVENT_READ, self._on_request)
        self.sel.register(lifeline_fd, selectors.EVENT_READ, self._on_lifeline)
        self.sel.register(self._wake_r, selectors.EVENT_READ, self._on_wakeup)

    # -- signals ---------------------------------------------------------------

    def _on_sigchld(self, signum: int, frame: object) -> None:
        pass  # the wakeup fd carries it to the loop

    def _on_stop_signal(self, signum: int, frame: object) -> None:
        self.stopping = True

    # -- the loop --------------------------------------------------------------

    def preload(self, modules: list[str]) -> str | None:
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

    def report(self, message: tuple[Any, ...]) -> None:
        self.outbox.append(_wire.encode(message))

    def flush(self) -> None:
        if not self.outbox or self.host_gone:
            return
        data = b"".join(self.outbox) if len(self.outbox) > 1 else self.outbox[0]
        self.outbox.clear()
        try:
            self.sock.sendall(data)
        except OSError:
            self.host_gone = self.stopping = True

    def run(self) -> None:
        while not self.stopping:
            for key, _ in self.sel.select():
                callback: Callable[[], None] = key.data
                callback()
                if self.stopping:
                    break
            self.flush()
        self.kill_everything()

    # -- event handlers --------------------------------------------------------

    def _on_lifeline(self) -> None:
        try:
            data = os.read(self.lifeline, 64)
        except OSError:
            data = b""
        if not data:
            self.host_gone = self.stopping = True

    def _on_wakeup(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self._wake_r, 4096):
                pass
        self._reap()

    def _on_request(self) -> None:
        try:
            n = self.sock.recv_into(self._recv_buf)
        except OSError:
            n = 0
        if not n:
            self.host_gone = self.stopping = True
            return
        try:
            messages = self.requests.feed(self._recv_view[:n])
        except Exception:
            self.stopping = True  # a corrupt stream: nothing sane can follow
            return
        for message in messages:
            if message[0] == "spawn":
                self._spawn(message[1], message[2], message[3] if len(message) > 3 else None)
            elif message[0] == "prepare":
                self._prepare(message[1], message[2])
            elif message[0] == "discard":
                self._discard(message[1])

    def _spawn(self, req_id: int, req: Mapping[str, Any], standby: int | None = None) -> None:
        if standby is not None and self._go(req_id, standby):
            return
        out_fd = err_fd = None
        captures: dict[int, int] = {}
        try:
            _chdir(req["cwd"])
            out_fd = _open_output(req["stdout"], "stdout", captures)
            err_fd = _open_output(req["stderr"], "stderr", captures)
            control_fd = None
            if req["command"] is not None:
                pid = self._spawn_command(req, out_fd, err_fd)
            elif req["fresh"]:
                pid, control_fd = self._spawn_fresh(req, out_fd, err_fd)
            else:
                pid, control_fd = self._fork(req, out_fd, err_fd)
        except _SpawnFailed as exc:
            self._close_all(captures.values())
            self.report(("spawn_failed", req_id, exc.errno, exc.message))
            return
        except Exception as exc:
            self._close_all(captures.values())
            err = exc.errno if isinstance(exc, OSError) else None
            self.report(("spawn_failed", req_id, err, f"{type(exc).__name__}: {exc}"))
            return
        finally:
            for fd in (out_fd, err_fd):
                if fd is not None:
                    os.close(fd)
        child = _Child(pid, control_fd)
        self.children[pid] = child
        if control_fd is not None:
            self.sel.register(control_fd, selectors.EVENT_READ, lambda: self._read_control(child))
        self.report(("spawned", req_id, pid))
        for stream, fd in captures.items():
            child.captures[stream] = fd
            self.sel.register(
                fd,
                selectors.EVENT_READ,
                lambda s=stream: self._read_output(child, s),
            )

    @staticmethod
    def _close_all(fds: Iterable[int]) -> None:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read_output(self, child: _Child, stream: int, *, drain: bool = False) -> None:
        fd = child.captures.get(stream)
        if fd is None:
            return
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data:
                self.report(("output", child.pid, stream, data))
                if drain:
                    continue
                return
            if data is None and not drain:
                return
            # EOF, or (when draining at the exit) nothing more for now: stop listening.
            self.sel.unregister(fd)
            os.close(fd)
            del child.captures[stream]
            return

    def _spawn_command(self, req: Mapping[str, Any], out_fd: int | None, err_fd: int | None) -> int:
        argv = list(req["command"])
        env = req["env"]
        path = _which(argv[0], env.get("PATH", os.defpath))
        try:
            return _posix_spawn(path, argv, env, out_fd, err_fd)
        except OSError as exc:
            raise _SpawnFailed(
                exc.errno, f"cannot execute {path!r}: {exc.strerror}; check the command"
            ) from None

    def _fork(
        self,
        req: Mapping[str, Any],
        out_fd: int | None,
        err_fd: int | None,
        go_fd: int | None = None,
    ) -> tuple[int, int]:
        control_r, control_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()  # or the child would write our buffer again
        # Blocked across fork: the child must not run our handlers before resetting them.
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _CATCHABLE)
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            os.close(control_r)
            os.close(control_w)
            raise _SpawnFailed(exc.errno, f"fork failed: {exc.strerror}") from None
        if pid == 0:
            _bootstrap.run_forked(self.pid, control_w, req, out_fd, err_fd, go_fd)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        # Also set here, so a killpg from the host can never precede the child's own setpgid.
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        os.close(control_w)
        os.set_blocking(control_r, False)
        return pid, control_r

    def _spawn_fresh(
        self, req: Mapping[str, Any], out_fd: int | None, err_fd: int | None
    ) -> tuple[int, int]:
        control_r, control_w = os.pipe()
        # A memfd, not a pipe: writing a large payload must not block the loop.
        settings_fd = os.memfd_create("nannytree-settings", os.MFD_CLOEXEC)
        try:
            _wire.write_all(settings_fd, pickle.dumps(dict(req), pickle.HIGHEST_PROTOCOL))
            os.lseek(settings_fd, 0, os.SEEK_SET)
            env = dict(req["env"])
            env[_bootstrap.CONTROL_FD_ENV] = str(control_w)
            python_path = env.get("PYTHONPATH")
            env["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + python_path if python_path else "")
            argv = [sys.executable, "-P", "-m", "actors._bootstrap"]
            argv += [str(self.pid), str(settings_fd)]
            os.set_inheritable(control_w, True)
            os.set_inheritable(settings_fd, True)
            try:
                pid = _posix_spawn(sys.executable, argv, env, out_fd, err_fd)
            except OSError as exc:
                os.close(control_r)
                raise _SpawnFailed(
                    exc.errno, f"cannot start {sys.executable!r}: {exc.strerror}"
                ) from None
        finally:
            os.close(control_w)
            os.close(settings_fd)
        os.set_blocking(control_r, False)
        return pid, control_r

    # -- warm standbys: forked ahead, target unpickled, waiting for "go" ----------

    def _prepare(self, sid: int, req: Mapping[str, Any]) -> None:
        out_fd = err_fd = None
        captures: dict[int, int] = {}
        go_r, go_w = os.pipe()
        try:
            _chdir(req["cwd"])
            out_fd = _open_output(req["stdout"], "stdout", captures)
            err_fd = _open_output(req["stderr"], "stderr", captures)
            pid, control_fd = self._fork(req, out_fd, err_fd, go_r)
        except Exception:
            # No standby then: the next spawn forks as usual and reports what fails.
            self._close_all([*captures.values(), go_w])
            self.report(("standby_died", sid))
            return
        finally:
            self._close_all([go_r] + [fd for fd in (out_fd, err_fd) if fd is not None])
        child = _Child(pid, control_fd)
        child.captures = captures
        self.standbys[sid] = (child, go_w)
        self.sel.register(control_fd, selectors.EVENT_READ, lambda: self._read_control(child))

    def _go(self, req_id: int, sid: int) -> bool:
        entry = self.standbys.pop(sid, None)
        if entry is None:
            return False
        child, go_w = entry
        try:
            os.write(go_w, b"g")
        except OSError:
            return False  # it died meanwhile: the reap will say so
        finally:
            os.close(go_w)
        self.children[child.pid] = child
        self.report(("spawned", req_id, child.pid))
        for stream, fd in child.captures.items():
            self.sel.register(
                fd, selectors.EVENT_READ, lambda s=stream: self._read_output(child, s)
            )
        return True

    def _discard(self, sid: int) -> None:
        entry = self.standbys.pop(sid, None)
        if entry is None:
            return
        child, go_w = entry
        os.close(go_w)  # EOF on its go pipe: it exits; SIGKILL makes sure
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)
        self.discarded[child.pid] = child

    def _standby_gone(self, pid: int) -> bool:
        """A standby (or a discarded one) was reaped: clean up; True if it was one."""
        child = self.discarded.pop(pid, None)
        if child is None:
            for sid, (candidate, go_w) in list(self.standbys.items()):
                if candidate.pid == pid:
                    del self.standbys[sid]
                    os.close(go_w)
                    child = candidate
                    self.report(("standby_died", sid))
                    break
        if child is None:
            return False
        self._close_control(child)
        self._close_all(child.captures.values())
        child.captures.clear()
        return True

    def _read_control(self, child: _Child) -> None:
        fd = child.control_fd
        if fd is None:
            return
        try:
            messages, eof = _wire.read_available(fd, child.decoder)
        except Exception:
            messages, eof = [], True  # garbage on the pipe: stop listening
        for message in messages:
            if message[0] == "ready":
                self.report(("ready", child.pid))
            elif message[0] == "error":
                child.error = (message[1], message[2], message[3])
        if eof:
            self._close_control(child)

    def _close_control(self, child: _Child) -> None:
        if child.control_fd is not None:
            self.sel.unregister(child.control_fd)
            os.close(child.control_fd)
            child.control_fd = None

    def _reap(self) -> None:
        # SIGCHLD coalesces: one wakeup may stand for many exits.
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                self._standby_gone(pid)
                continue  # a standby, or an orphan re-parented to us: reaped, not reported
            # Grandchildren never outlive their parent: its group, and those that left it
            # (re-parented to us, the subreaper, before we were told of the exit).
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            self._kill_orphans()
            self._read_control(child)  # the error, if any, was written before the exit
            self._close_control(child)
            for stream in list(child.captures):
                self._read_output(child, stream, drain=True)
            self.report(("exited", pid, os.waitstatus_to_exitcode(status), child.error))

    def _kill_orphans(self) -> None:
        standbys = {c.pid for c, _ in self.standbys.values()} | set(self.discarded)
        for pid in _child_pids(self.pid):
            if pid not in self.children and pid not in standbys:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)  # an escapee that leads its own group

    # -- shutdown --------------------------------------------------------------

    def kill_everything(self) -> None:
        """Kill every child's group, then every process re-parented to us, until none."""
        standbys = [c.pid for c, _ in self.standbys.values()]
        for pid in [*self.children, *standbys]:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        while True:
            for pid, pgid in _children_of(self.pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                if pgid == pid:
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)
            try:
                # Each reaped process has already handed its orphans to us: rescan after.
                pid, _ = os.waitpid(-1, 0)
                while pid:
                    pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
        self.children.clear()
        if not self.host_gone:
            self.flush()


def main(argv: list[str]) -> int:
    sock_fd, lifeline_fd = int(argv[0]), int(argv[1])
    # Escaped descendants re-parent to us, so they can still be found and killed.
    _bootstrap.prctl(_bootstrap.PR_SET_CHILD_SUBREAPER, 1)
    loop = LauncherLoop(sock_fd, lifeline_fd)
    error = loop.preload(argv[2:])
    loop.report(("hello", loop.pid, error))
    loop.flush()
    if error is not None:
        return 1
    gc.freeze()  # fewer copy-on-write faults in forked children
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
