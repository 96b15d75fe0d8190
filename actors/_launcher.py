"""Host side of the launcher: where every child process of a tree comes from.

`Launcher.start()` starts one single-threaded helper process
(``actors._launcher_main``) that spawns commands with ``posix_spawn``, forks
Python children from its pre-imported state and reaps them. In the host, one
reader thread decodes its reports (the tree's single exit watcher) and one
waiter thread waits on the launcher process itself: its death, not socket EOF,
is what tells the host the launcher is gone. The launcher watches a lifeline
pipe whose write end only the host holds, so a SIGKILLed host takes the whole
tree with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actors import _detach, _wire

__all__ = [
    "ChildError",
    "ChildProcess",
    "LaunchError",
    "Launcher",
    "ProcessExit",
    "SpawnRequest",
]

log = logging.getLogger(__name__)

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HELLO_TIMEOUT = 60.0  # generous: preloading heavy modules can take seconds


@dataclass(frozen=True)
class SpawnRequest:
    """What to start. Exactly one of `command` / `payload`.

    A relative `cwd`, `stdout` or `stderr` is resolved against the host's
    working directory when the request is made. Children read /dev/null on
    stdin; stdout/stderr are the host's unless a file (opened for append) is
    named, or "capture" (the launcher forwards what the child writes; read it
    with ChildProcess.output()).
    """

    command: Sequence[str] | None = None
    payload: bytes | None = None
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    sys_path: Sequence[str] = ()
    argv: Sequence[str] = ()
    fresh_interpreter: bool = False
    stdout: str | None = None
    stderr: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if (self.command is None) == (self.payload is None):
            raise ValueError(f"child {self.name!r}: give exactly one of command or payload")
        if self.command is not None:
            if isinstance(self.command, str | bytes):
                raise ValueError(f"child {self.name!r}: command must be an argv list, not a string")
            if not self.command or not all(isinstance(a, str) for a in self.command):
                raise ValueError(f"child {self.name!r}: command must be a non-empty list of str")
        if self.env is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()
        ):
            raise ValueError(f"child {self.name!r}: env keys and values must be str")


@dataclass(frozen=True)
class ChildError:
    """A Python target that raised."""

    type: str
    message: str
    traceback: str


@dataclass(frozen=True)
class ProcessExit:
    pid: int
    returncode: int  # >= 0 exit code, -N killed by signal N
    error: ChildError | None = None
    launcher_died: bool = False
    stderr: bytes = b""  # what a captured stderr said last (its last OUTPUT_LIMIT bytes)


class LaunchError(Exception):
    """A child could not be started (or the launcher is gone)."""

    def __init__(self, message: str, *, name: str = "", errno: int | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.errno = errno


CAPTURE = "capture"
OUTPUT_LIMIT = 64 * 1024  # bytes kept per captured stream


def _output_target(path: str | None) -> str | None:
    if path is None or path == CAPTURE:
        return path
    return os.path.abspath(path)


def _settings(request: SpawnRequest) -> dict[str, Any]:
    """What the launcher needs of a request, resolved against the host's state now."""
    name = request.name
    return {
        "command": None if request.command is None else list(request.command),
        "payload": request.payload,
        "env": dict(os.environ if request.env is None else request.env),
        "cwd": os.path.abspath(os.getcwd() if request.cwd is None else request.cwd),
        "sys_path": list(request.sys_path),
        "argv": list(request.argv),
        "fresh": request.fresh_interpreter,
        # Relative output paths are the host's, not the child's cwd.
        "stdout": _output_target(request.stdout),
        "stderr": _output_target(request.stderr),
        "name": name,
    }


def _call(callback: Callable[..., object], *args: object) -> None:
    try:
        callback(*args)
    except Exception:
        log.exception("nannytree launcher callback %r failed", callback)


class ChildProcess:
    """A started child. Its state is updated by the launcher's reader thread."""

    def __init__(
        self,
        pid: int,
        on_exit: Callable[[ProcessExit], None] | None,
        on_ready: Callable[[], None] | None,
    ) -> None:
        self.pid = pid
        self.pgid = pid
        self._exit: ProcessExit | None = None
        self._ready = False
        self._exited = threading.Event()
        self._ready_or_exited = threading.Event()
        self._on_exit = on_exit
        self._on_ready = on_ready
        self._output: dict[int, bytearray] = {}

    def output(self, stream: int = 2) -> bytes:
        """What a captured stream (1 stdout, 2 stderr) said: its last OUTPUT_LIMIT bytes."""
        return bytes(self._output.get(stream, b""))

    def _append_output(self, stream: int, data: bytes) -> None:
        buf = self._output.setdefault(stream, bytearray())
        buf += data
        if len(buf) > OUTPUT_LIMIT:
            del buf[: len(buf) - OUTPUT_LIMIT]

    def __repr__(self) -> str:
        return f"<ChildProcess pid={self.pid} exit={self._exit}>"

    @property
    def exit(self) -> ProcessExit | None:
        return self._exit

    def wait(self, timeout: float | None = None) -> ProcessExit | None:
        self._exited.wait(timeout)
        return self._exit

    def send_signal(self, sig: int, *, group: bool = True) -> bool:
        """Signal the child's group (or the child alone); False once its exit was reported."""
        if self._exit is not None:
            return False
        try:
            if group:
                os.killpg(self.pgid, sig)
            else:
                os.kill(self.pid, sig)
        except ProcessLookupError:
            return False
        return True

    @property
    def ready(self) -> bool:
        return self._ready

    def wait_ready(self, timeout: float | None) -> bool:
        self._ready_or_exited.wait(timeout)
        return self._ready

    def _set_ready(self) -> None:
        if self._ready or self._exit is not None:
            return
        self._ready = True
        self._ready_or_exited.set()
        if self._on_ready is not None:
            _call(self._on_ready)

    def _set_exit(self, exit: ProcessExit) -> None:
        if self._exit is not None:
            return
        self._exit = exit
        self._exited.set()
        self._ready_or_exited.set()
        if self._on_exit is not None:
            _call(self._on_exit, exit)


class _Pending:
    __slots__ = ("child", "done", "error", "name", "on_exit", "on_ready")

    def __init__(
        self,
        name: str,
        on_exit: Callable[[ProcessExit], None] | None,
        on_ready: Callable[[], None] | None,
    ) -> None:
        self.name = name
        self.on_exit = on_exit
        self.on_ready = on_ready
        self.done = threading.Event()
        self.child: ChildProcess | None = None
        self.error: LaunchError | None = None


_instances: weakref.WeakSet[Launcher] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A fork of the host must not hold the lifeline, or the tree would outlive the host.
    for launcher in list(_instances):
        launcher._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class Launcher:
    """One launcher process and the two host threads that watch it. Use `start()`."""

    def __init__(self, preload: Sequence[str] = ()) -> None:
        self._preload = list(preload)
        self._started = threading.Event()
        self._start_error = ""
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._children: dict[int, ChildProcess] = {}
        self._next_id = 0
        self._dead = False
        self._closing = False
        self._forked = False
        self._hello = threading.Event()
        self._hello_error: str | None = None
        self._pid = 0
        self._proc: Any = None  # a subprocess.Popen, or a _detach.DetachedProcess
        self._sock, launcher_sock = socket.socketpair()
        self._lifeline_r, self._lifeline_w = os.pipe()
        self._launcher_sock: socket.socket | None = launcher_sock
        self._reader = threading.Thread(
            target=self._read_loop, name="nannytree-launcher-reader", daemon=True
        )
        self._waiter = threading.Thread(
            target=self._watch, name="nannytree-launcher-waiter", daemon=True
        )

    # -- start / stop ----------------------------------------------------------

    @classmethod
    def start(cls, *, preload: Sequence[str] = ()) -> Launcher:
        """Start a launcher process; `preload` modules are imported in it before any fork."""
        self = cls(preload)
        _instances.add(self)
        self._reader.start()
        self._waiter.start()
        self._started.wait()
        if self._proc is None:
            self._reader.join()
            self._close_fds()
            raise LaunchError(f"cannot start the launcher: {self._start_error}")
        if not self._hello.wait(_HELLO_TIMEOUT):
            self.close()
            raise LaunchError(f"the launcher did not start within {_HELLO_TIMEOUT} s")
        if self._hello_error is not None or self._dead:
            self.close()
            raise LaunchError(f"the launcher failed: {self._hello_error or 'it died at start'}")
        return self

    def _watch(self) -> None:
        """The waiter thread: starts the launcher, waits on it (reaping it), cleans up."""
        assert self._launcher_sock is not None
        env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + path if path else "")
        argv = [sys.executable, "-P", "-m", "actors._launcher_main"]
        argv += [str(self._launcher_sock.fileno()), str(self._lifeline_r), *self._preload]
        try:
            proc: Any
            if _detach.wanted():  # inside a Ray actor: out of Ray's reach (see _detach)
                fds = (self._launcher_sock.fileno(), self._lifeline_r)
                proc = _detach.DetachedProcess(argv, fds, env)
            else:
                proc = subprocess.Popen(
                    argv,
                    pass_fds=(self._launcher_sock.fileno(), self._lifeline_r),
                    stdin=subprocess.DEVNULL,
                    env=env,
                    # Its own group: a terminal's Ctrl-C goes to the host, which stops the tree.
                    process_group=0,
                )
        except Exception as exc:
            self._start_error = f"{type(exc).__name__}: {exc}"
            self._dead = True
            self._started.set()
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            return
        finally:
            self._launcher_sock.close()
            self._launcher_sock = None
            os.close(self._lifeline_r)
        self._proc = proc
        self._pid = proc.pid
        self._started.set()
        returncode = proc.wait()
        self._on_launcher_exit(returncode)

    def _on_launcher_exit(self, returncode: int) -> None:
        with self._lock:
            self._dead = True
        # The reader drains what the launcher sent before dying, then sees EOF,
        # even if some process still holds the launcher's end of the socket.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RD)
        self._reader.join()
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            live = list(self._children.values())
            self._children.clear()
        for slot in pending:
            slot.error = LaunchError(
                f"cannot start child {slot.name!r}: the launcher died (status {returncode}); "
                "start a new Launcher",
                name=slot.name,
            )
            slot.done.set()
        # Commands have no PDEATHSIG: their groups are killed from here.
        for child in live:
            with contextlib.suppress(OSError):
                os.killpg(child.pgid, signal.SIGKILL)
        for child in live:
            child._set_exit(
                ProcessExit(child.pid, -signal.SIGKILL, launcher_died=True, stderr=child.output(2))
            )
        self._hello.set()
        self._close_fds()

    def close(self, timeout: float = 5.0) -> None:
        """Kill every child and the launcher, join the threads, close the fds. Idempotent."""
        if self._forked:
            return
        with self._lock:
            self._closing = True
        self._close_lifeline()  # EOF: the launcher kills everything and exits
        current = threading.current_thread()
        if current is self._waiter or current is self._reader or not self._waiter.is_alive():
            return  # from a callback, the waiter finishes the job (and closes the fds)
        self._waiter.join(timeout)
        if self._waiter.is_alive() and self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            self._waiter.join(timeout)

    def _close_lifeline(self) -> None:
        with self._lock:
            fd, self._lifeline_w = self._lifeline_w, -1
        if fd >= 0:
            os.close(fd)

    def _close_fds(self) -> None:
        """Once the reader is done; the send lock keeps a concurrent spawn off a reused fd."""
        self._close_lifeline()
        with self._send_lock:
            self._sock.close()

    def _forget_after_fork(self) -> None:
        # Only the forking thread exists here: no locks (another thread may have held them).
        self._forked = True
        fd, self._lifeline_w = self._lifeline_w, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._sock.close()

    @property
    def alive(self) -> bool:
        return not (self._dead or self._forked)

    @property
    def pid(self) -> int:
        return self._pid

    def children(self) -> list[ChildProcess]:
        """The children not yet reported exited."""
        with self._lock:
            return list(self._children.values())

    # -- spawning --------------------------------------------------------------

    def prepare(self, request: SpawnRequest) -> int:
        """Fork a warm standby for `request` ahead of time; returns its id at once.

        The standby has the target unpickled (its imports done) and waits for
        spawn(request, standby=id). It belongs to the caller: discard() it when
        it is no longer wanted. If it dies, spawn falls back to a plain fork.
        """
        if request.payload is None or request.fresh_interpreter:
            raise ValueError(f"child {request.name!r}: only a forked Python child has a standby")
        with self._lock:
            sid = self._next_id
            self._next_id += 1
        self._send(("prepare", sid, _settings(request)))
        return sid

    def discard(self, standby: int) -> None:
        """Kill a standby that prepare() made and spawn() did not use."""
        self._send(("discard", standby))

    def _send(self, message: tuple[Any, ...]) -> None:
        frame = _wire.encode(message)
        with contextlib.suppress(OSError), self._send_lock:
            self._sock.sendall(frame)

    def spawn(
        self,
        request: SpawnRequest,
        *,
        on_exit: Callable[[ProcessExit], None] | None = None,
        on_ready: Callable[[], None] | None = None,
        standby: int | None = None,
    ) -> ChildProcess:
        """Start a child; blocks until the launcher replied. Thread-safe.

        `on_exit` / `on_ready` run once, in the reader thread, after the
        ChildProcess was updated: keep them cheap.
        """
        name = request.name
        if threading.current_thread() is self._reader:
            raise RuntimeError("Launcher.spawn from an on_exit/on_ready callback would deadlock")
        settings = _settings(request)
        slot = _Pending(name, on_exit, on_ready)
        with self._lock:
            if self._dead or self._closing or self._forked:
                raise LaunchError(
                    f"cannot start child {name!r}: the launcher is dead or closed; "
                    "start a new Launcher",
                    name=name,
                )
            req_id = self._next_id
            self._next_id += 1
            self._pending[req_id] = slot
        try:
            frame = _wire.encode(("spawn", req_id, settings, standby))
            with self._send_lock:
                self._sock.sendall(frame)
        except OSError as exc:
            with self._lock:
                self._pending.pop(req_id, None)
            raise LaunchError(
                f"cannot start child {name!r}: the launcher is unreachable ({exc})",
                name=name,
                errno=exc.errno,
            ) from exc
        except BaseException:
            with self._lock:
                self._pending.pop(req_id, None)
            raise
        slot.done.wait()
        if slot.error is not None:
            raise slot.error
        assert slot.child is not None
        return slot.child

    # -- the reader thread -----------------------------------------------------

    def _read_loop(self) -> None:
        decoder = _wire.Decoder()
        buf = bytearray(1 << 18)
        view = memoryview(buf)
        while True:
            try:
                n = self._sock.recv_into(buf)
            except OSError:
                return
            if not n:
                return
            try:
                messages = decoder.feed(view[:n])
            except Exception:
                log.exception("nannytree launcher: corrupt report stream")
                return
            for message in messages:
                try:
                    self._dispatch(message)
                except Exception:
                    log.exception("nannytree launcher: cannot handle report %r", message[:2])

    def _dispatch(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "exited":
            _, pid, returncode, error = message
            with self._lock:
                child = self._children.pop(pid, None)
            if child is not None:
                child._set_exit(
                    ProcessExit(
                        pid,
                        returncode,
                        None if error is None else ChildError(*error),
                        stderr=child.output(2),
                    )
                )
        elif kind == "output":
            _, pid, stream, data = message
            with self._lock:
                child = self._children.get(pid)
            if child is not None:
                child._append_output(stream, data)
        elif kind == "ready":
            with self._lock:
                child = self._children.get(message[1])
            if child is not None:
                child._set_ready()
        elif kind == "spawned":
            _, req_id, pid = message
            with self._lock:
                slot = self._pending.pop(req_id, None)
                if slot is not None:
                    slot.child = ChildProcess(pid, slot.on_exit, slot.on_ready)
                    self._children[pid] = slot.child
            if slot is None:
                # Its requester is gone: nobody would ever stop it.
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                return
            slot.done.set()
        elif kind == "spawn_failed":
            _, req_id, err, text = message
            with self._lock:
                slot = self._pending.pop(req_id, None)
            if slot is not None:
                slot.error = LaunchError(
                    f"cannot start child {slot.name!r}: {text}", name=slot.name, errno=err
                )
                slot.done.set()
        elif kind == "standby_died":
            pass  # the next spawn that names it falls back to a plain fork
        elif kind == "hello":
            self._hello_error = message[2]
            self._hello.set()
