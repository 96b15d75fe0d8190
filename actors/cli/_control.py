"""The control socket of `nannytree run`: a Unix socket (mode 0600, no TCP) that
answers JSON-lines requests by calling the tree's nannies, and its client.

One request per connection: the client sends one JSON object on one line; the
server answers one JSON object on one line ({"ok": true, ...} or {"ok": false,
"error": "...", "kind": "..."}), or, for {"op": "events"}, one {"event": {...}}
line per event and a final {"end": "..."} line.

A run holds an exclusive flock on `<socket>.lock` for its whole life, so a second
run on the same socket refuses at once, and a socket left by a killed run (its
lock released by the kernel) is detected as stale and replaced.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import select
import selectors
import shlex
import signal
import socket
import stat
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._records import EventRecord

if TYPE_CHECKING:  # the server's side only: a client must not pay for pykka and the nanny
    from supervision import Event

    from .._shell._event_log import EventLog
    from ._status import Target, TreeInspector

MAX_LINE = 64 * 1024  # one request, in bytes
MAX_PATH = 107  # sun_path holds 108 bytes, NUL included
MAX_CLIENTS = 64  # connections served at once; one more is refused with a message
MAX_PENDING = 1 << 20  # bytes of events a `events --follow` client may fall behind
SEND_TIMEOUT = 10.0  # a client that reads nothing for this long is dropped
ACCEPT_BACKOFF = 0.1  # seconds to wait when accept() finds no free descriptor
OP_TIMEOUT = 600.0

Send = Callable[[dict[str, Any]], bool]


class ControlError(Exception):
    """The control socket cannot be set up or reached; the message says what to do."""


class AlreadyRunning(ControlError):
    """Another `nannytree run` serves this socket."""


class NoTree(ControlError):
    """No running tree answers at the socket."""


class Ambiguous(ControlError):
    """Several trees run and the command did not say which (a usage error)."""


# -- where sockets live ------------------------------------------------------------------


def _secure_dir(path: Path, *, create: bool) -> Path | None:
    """`path` as a private directory of ours (0700), created if asked; None if absent."""
    if create:
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    uid = os.getuid()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        raise ControlError(
            f"{path} is not a directory of yours (uid {uid}); remove it, set "
            "XDG_RUNTIME_DIR, or pass --socket PATH"
        )
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def runtime_dir(*, create: bool) -> Path | None:
    """$XDG_RUNTIME_DIR/nannytree if usable, else /tmp/nannytree-<uid>, mode 0700."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg) and os.access(xdg, os.W_OK | os.X_OK):
        return _secure_dir(Path(xdg) / "nannytree", create=create)
    return _secure_dir(Path(f"/tmp/nannytree-{os.getuid()}"), create=create)


def socket_for(tree_id: str) -> Path:
    """The default socket of a tree: <runtime dir>/<tree id>.sock (the dir is created)."""
    base = runtime_dir(create=True)
    assert base is not None
    return base / f"{tree_id}.sock"


def find_socket(tree: str | None = None) -> Path:
    """The socket a client should use: the named tree's, or the only one running."""
    base = runtime_dir(create=False)
    if tree is not None:
        if base is None:
            raise NoTree(f"no tree {tree!r} is running (no runtime directory yet)")
        return base / f"{tree}.sock"
    live = running_sockets()
    if len(live) == 1:
        return live[0]
    if not live:
        where = base if base is not None else "the runtime directory"
        raise NoTree(f"no running tree found in {where}; start one with `nannytree run FILE`")
    names = ", ".join(s.stem for s in live)
    raise Ambiguous(f"several trees are running ({names}); pick one with --tree ID")


def running_sockets() -> list[Path]:
    """The sockets in the runtime dir that a live run answers on."""
    base = runtime_dir(create=False)
    sockets = sorted(base.glob("*.sock")) if base is not None else []
    return [s for s in sockets if _answers(s)]


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def check_path(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_PATH:
        raise ControlError(
            f"socket path too long ({len(os.fsencode(path))} bytes, at most {MAX_PATH}): "
            f"{path}; pass a shorter --socket"
        )


# -- the listening side ---------------------------------------------------------------------


class ControlSocket:
    """The bound, locked, 0600 socket of one run; serve() answers on a thread."""

    def __init__(self, path: Path, sock: socket.socket, lock_fd: int, stale: bool) -> None:
        self.path = path
        self.replaced_stale = stale
        self._sock = sock
        self._lock_fd = lock_fd
        self._lock_path = _lock_path(path)
        self._closing = threading.Event()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC)
        self._thread: threading.Thread | None = None
        self._connections: set[threading.Thread] = set()
        self._guard = threading.Lock()

    @classmethod
    def bind(cls, path: Path) -> ControlSocket:
        """Lock, replace a stale socket, bind with mode 0600. Raises ControlError."""
        path = Path(os.path.abspath(path))
        check_path(path)
        if not path.parent.is_dir():
            try:  # one missing level is made, private; a missing tree is a mistake
                _secure_dir(path.parent, create=True)
            except (FileNotFoundError, NotADirectoryError):
                raise ControlError(
                    f"the folder {path.parent.parent} does not exist; "
                    "create it or pass another --socket"
                ) from None
        lock_fd = _take_lock(path)
        try:
            stale = _clear_stale(path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            old = os.umask(0o177)  # no window where the socket is open to others
            try:
                sock.bind(str(path))
            except OSError as e:
                sock.close()
                raise ControlError(f"cannot make the socket {path}: {e.strerror or e}") from None
            finally:
                os.umask(old)
            os.chmod(path, 0o600, follow_symlinks=False)
            sock.listen(16)
            sock.setblocking(False)
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(path, sock, lock_fd, stale)

    def serve(self, handler: Callable[[dict[str, Any], Send], None]) -> None:
        """Answer each connection on its own thread with handler(request, send)."""
        # The selector's descriptor is taken here, not on the thread, so that a
        # process short of descriptors fails now, loudly, rather than later, silently.
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ)
        sel.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(
            target=self._accept_loop, args=(sel, handler), name="nannytree-control", daemon=True
        )
        self._thread.start()

    @property
    def closing(self) -> threading.Event:
        return self._closing

    def close(self, linger: float = 2.0) -> None:
        """Stop answering, let streams send their end line, remove the socket and lock."""
        self._closing.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(linger)
        with self._guard:
            connections = list(self._connections)
        for t in connections:
            t.join(linger)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        with contextlib.suppress(FileNotFoundError):
            self._lock_path.unlink()
        self._sock.close()
        os.close(self._lock_fd)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _accept_loop(
        self, sel: selectors.BaseSelector, handler: Callable[[dict[str, Any], Send], None]
    ) -> None:
        with sel:
            while not self._closing.is_set():
                for key, _ in sel.select():
                    if key.fileobj is not self._sock or self._closing.is_set():
                        continue
                    try:
                        conn, _ = self._sock.accept()
                    except BlockingIOError:
                        continue
                    except OSError as e:
                        if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                            # Out of descriptors: the connection waits in the backlog;
                            # try again shortly rather than spin or give up for good.
                            self._closing.wait(ACCEPT_BACKOFF)
                            continue
                        if e.errno == errno.ECONNABORTED:
                            continue
                        raise
                    with self._guard:
                        full = len(self._connections) >= MAX_CLIENTS
                    if full:
                        _refuse(conn)
                        continue
                    t = threading.Thread(
                        target=self._serve_one,
                        args=(conn, handler),
                        name="nannytree-control-conn",
                        daemon=True,
                    )
                    with self._guard:
                        self._connections.add(t)
                    t.start()

    def _serve_one(
        self, conn: socket.socket, handler: Callable[[dict[str, Any], Send], None]
    ) -> None:
        lock = threading.Lock()

        def send(message: dict[str, Any]) -> bool:
            data = (json.dumps(message) + "\n").encode()
            with lock:
                try:
                    conn.sendall(data)
                except OSError:
                    return False
            return True

        try:
            with conn:
                conn.setblocking(True)
                conn.settimeout(10.0)
                pid, uid, _ = struct.unpack(
                    "3i",
                    conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")),
                )
                if uid not in (os.getuid(), 0):
                    send({"ok": False, "error": "not your tree", "kind": "PermissionError"})
                    return
                line = conn.makefile("rb").readline(MAX_LINE + 1)
                try:
                    if len(line) > MAX_LINE:
                        raise ValueError(f"longer than {MAX_LINE} bytes")
                    request = json.loads(line)
                    if not isinstance(request, dict):
                        raise ValueError("expected a JSON object")
                except ValueError as e:
                    send({"ok": False, "error": f"bad request: {e}", "kind": "BadRequest"})
                    return
                conn.settimeout(SEND_TIMEOUT)  # a client that stops reading is dropped
                request["_peer"] = {"pid": pid, "conn": conn}
                handler(request, send)
        except OSError:
            pass
        finally:
            with self._guard:
                self._connections.discard(threading.current_thread())


def _refuse(conn: socket.socket) -> None:
    """Tell a client over the cap why, without ever blocking the accept loop."""
    with conn:
        conn.setblocking(False)
        message = {
            "ok": False,
            "error": f"too many clients ({MAX_CLIENTS} connected); try again later",
            "kind": "Busy",
        }
        with contextlib.suppress(OSError):
            conn.send((json.dumps(message) + "\n").encode())


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _take_lock(path: Path) -> int:
    """An exclusive flock on <socket>.lock, held while the run lives; our pid inside."""
    lock_path = _lock_path(path)
    while True:
        fd = _open_lock(lock_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise AlreadyRunning(
                f"another `nannytree run` (pid {owner}) is serving {path}; "
                f"control it with `nannytree status --socket {path}`, stop it first, "
                "or pass another --socket"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:  # else the last owner removed it between our open and flock: retry
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)


def _open_lock(lock_path: Path) -> int:
    """The lock file, opened only if it is a plain file of ours: never through a
    symlink (it would truncate the file it points to), never a FIFO or a folder."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(lock_path, flags, 0o600)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ControlError(
                f"{lock_path} is a symlink; remove it or pass another --socket"
            ) from None
        raise ControlError(
            f"cannot open the lock file {lock_path}: {e.strerror or e}; "
            "remove it or pass another --socket"
        ) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        os.close(fd)
        raise ControlError(
            f"{lock_path} is not a plain file of yours; remove it or pass another --socket"
        )
    return fd


def _clear_stale(path: Path) -> bool:
    """Remove a socket left by a run that died (we hold the lock). True if one was."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        raise ControlError(f"{path} exists and is not a socket; remove it or pass another --socket")
    if _answers(path):
        raise AlreadyRunning(f"something already answers on {path}; pass another --socket")
    path.unlink()
    return True


# -- what the server answers ------------------------------------------------------------------


class Controller:
    """Turns control requests into calls on the tree's nannies."""

    def __init__(
        self,
        inspector: TreeInspector,
        log: EventLog,
        info: dict[str, Any],
        request_stop: Callable[[str], None],
        closing: threading.Event,
    ) -> None:
        self.inspector = inspector
        self.log = log
        self.info = info
        self.request_stop = request_stop
        self.closing = closing
        self.fanout = Fanout(log)
        self.reload_source: Callable[[], Any] | None = None

    def close(self) -> None:
        self.fanout.close()

    def handle(self, request: dict[str, Any], send: Send) -> None:
        import pykka

        from supervision import ChildNotFound, NannyError

        op = request.get("op")
        try:
            if op == "events":
                self._events(request, send)
                return
            send({"ok": True, **self._dispatch(str(op), request)})
        except ChildNotFound as e:
            key = request.get("id", e.child)
            send(
                {
                    "ok": False,
                    "error": f"no child {key!r} in tree {self.inspector.spec.id!r}; "
                    "`nannytree status` lists them",
                    "kind": "ChildNotFound",
                }
            )
        except TimeoutError:
            send(
                {
                    "ok": False,
                    "error": "a supervisor is busy starting or stopping children; try again",
                    "kind": "Busy",
                }
            )
        except pykka.ActorDeadError:
            send({"ok": False, "error": "the tree is stopping", "kind": "Stopping"})
        except (NannyError, LookupError, ValueError) as e:
            send({"ok": False, "error": str(e), "kind": type(e).__name__})

    def _dispatch(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        if op == "hello":
            return dict(self.info)
        if op == "status":
            return {**self.info, "tree": self.inspector.snapshot().to_dict()}
        if op == "detail":
            key = request.get("id")
            if not isinstance(key, str):
                raise ValueError("the request needs an id")
            return {"detail": self._detail(self.inspector.find(key))}
        if op == "restart" and request.get("id") == "all":
            return {"message": self._restart_all()}
        if op == "reload":
            return {"message": self._reload()}
        if op == "reload_child":
            key = request.get("id")
            if not isinstance(key, str):
                raise ValueError("the request needs an id")
            return {"message": self._reload_child(self.inspector.find(key))}
        if op == "add":
            return {"message": self._add(request)}
        if op == "logs":
            key = request.get("id")
            if not isinstance(key, str):
                raise ValueError("the request needs an id")
            return self._logs(self.inspector.find(key), request)
        if op == "shutdown":
            self.request_stop(f"`nannytree shutdown` from pid {request['_peer']['pid']}")
            return {"message": f"stopping tree {self.inspector.spec.id!r}"}
        actions = {
            "start": self._start,
            "stop": self._stop,
            "restart": self._restart,
            "pause": self._pause,
            "resume": self._resume,
            "signal": self._signal,
        }
        if op not in actions:
            raise ValueError(f"unknown op {op!r}; expected one of {', '.join(actions)}")
        key = request.get("id")
        if not isinstance(key, str):
            raise ValueError("the request needs an id")
        return {"message": actions[op](self.inspector.find(key), request)}

    def _call(self, target: Target, method: str, *args: Any) -> Any:
        return getattr(target.nanny.proxy(), method)(*args).get(timeout=OP_TIMEOUT)

    def _start(self, t: Target, request: dict[str, Any]) -> str:
        if t.info.state in ("running", "paused"):
            raise ValueError(
                f"{t.path} is already running (pid {t.info.pid}); use `nannytree restart`"
            )
        info = self._call(t, "restart_child", t.child_id)
        return f"started {t.path}" + (f", pid {info.pid}" if info.pid else "")

    def _stop(self, t: Target, request: dict[str, Any]) -> str:
        if request.get("with_dependents") is True:
            return self._stop_with_dependents(t)
        if t.info.state == "stopped":
            return f"{t.path} was not running"
        self._call(t, "terminate_child", t.child_id)
        return f"stopped {t.path}" + (f" (was pid {t.info.pid})" if t.info.pid else "")

    def _stop_with_dependents(self, t: Target) -> str:
        """The child and what depends on it in its group (rest_for_one or one_for_all:
        the siblings started after it, as the core decides), last started first."""
        before = {c.id: c.state for c in self._call(t, "which_children")}
        self._call(t, "terminate_child", t.child_id, True)
        after = {c.id: c.state for c in self._call(t, "which_children")}
        parent = t.path.rpartition("/")[0]
        others = [
            f"{parent}/{cid}"
            for cid, state in before.items()
            if cid != t.child_id and state != "stopped" and after.get(cid) == "stopped"
        ]
        if before.get(t.child_id) == "stopped" and not others:
            return f"{t.path} was not running, nor anything that depends on it"
        more = f" and its dependents: {', '.join(others)}" if others else ""
        return f"stopped {t.path}{more}"

    def _reload_child(self, t: Target) -> str:
        self._worker_only(t, "reload")
        self._call(t, "reload_child", t.child_id)
        return f"reloaded {t.path} (pid {t.info.pid})"

    def _restart(self, t: Target, request: dict[str, Any]) -> str:
        if t.info.state != "stopped":
            self._call(t, "terminate_child", t.child_id)
        info = self._call(t, "restart_child", t.child_id)
        if t.info.pid and info.pid:
            return f"restarted {t.path}: pid {t.info.pid} -> {info.pid}"
        return f"restarted {t.path}" + (f", pid {info.pid}" if info.pid else "")

    def _restart_all(self) -> str:
        """As `supervisorctl restart all`: stop the root's children in reverse start
        order, then start them in order."""
        ref = self.inspector.ref
        if ref is None:
            raise TimeoutError("the tree is starting")
        root = ref.proxy()
        # which_children lists the newest first, as OTP's does: start order is its reverse.
        children = [c.id for c in reversed(root.which_children().get(timeout=OP_TIMEOUT))]
        for child in reversed(children):
            root.terminate_child(child).get(timeout=OP_TIMEOUT)
        for child in children:
            root.restart_child(child).get(timeout=OP_TIMEOUT)
        return f"restarted {len(children)} children of {self.inspector.spec.id}: " + ", ".join(
            children
        )

    def _reload(self) -> str:
        """As `supervisorctl update`: the root's children as the edited file says;
        new ones started, removed ones stopped and deleted, changed ones replaced.
        Children the file did not change keep running, untouched."""
        from supervision import ConfigError

        if self.reload_source is None:
            raise ValueError("this tree was not run from a file; nothing to reload")
        ref = self.inspector.ref
        if ref is None:
            raise TimeoutError("the tree is starting")
        try:
            new = self.reload_source()
        except ConfigError as e:
            raise ValueError(f"the file is not valid, nothing changed: {e}") from None
        old = self.inspector.spec
        if new.id != old.id:
            raise ValueError(f"the file's tree is {new.id!r}, not {old.id!r}; nothing changed")
        root = ref.proxy()
        old_children = {c.id: c for c in old.children}
        new_children = {c.id: c for c in new.children}
        removed = [c for c in old_children if c not in new_children]
        changed = [
            c for c in new_children if c in old_children and new_children[c] != old_children[c]
        ]
        added = [c for c in new_children if c not in old_children]
        for cid in [*removed, *changed]:
            root.terminate_child(cid).get(timeout=OP_TIMEOUT)
            root.delete_child(cid).get(timeout=OP_TIMEOUT)
        for cid in [*changed, *added]:
            root.start_child(new_children[cid]).get(timeout=OP_TIMEOUT)
        self.inspector.replace_spec(new)
        parts = [
            f"{what}: {', '.join(ids)}"
            for what, ids in (("added", added), ("changed", changed), ("removed", removed))
            if ids
        ]
        return "; ".join(parts) if parts else "no change"

    def _add(self, request: dict[str, Any]) -> str:
        """A new child of a simple_one_for_one supervisor, with extra arguments."""
        key = request.get("id")
        extra = request.get("args", [])
        if not isinstance(key, str) or not isinstance(extra, list):
            raise ValueError("the request needs an id and a list of args")
        root_id = self.inspector.spec.id
        if key.strip("/") == root_id:
            nanny, path = self.inspector.ref, root_id
        else:
            t = self.inspector.find(key)
            if t.info.type != "supervisor":
                raise ValueError(f"{t.path} is a worker; add children to a supervisor")
            nanny = t.nanny.proxy().child_nanny(t.child_id).get(timeout=OP_TIMEOUT)
            path = t.path
        if nanny is None:
            raise TimeoutError("the tree is starting")
        info = nanny.proxy().start_child(extra).get(timeout=OP_TIMEOUT)
        return f"added {path}/{info.id}" + (f", pid {info.pid}" if info.pid else "")

    def _worker_only(self, t: Target, what: str) -> None:
        if t.info.type == "supervisor":
            raise ValueError(f"{t.path} is a supervisor; {what} its workers one by one")

    def _pause(self, t: Target, request: dict[str, Any]) -> str:
        self._worker_only(t, "pause")
        self._call(t, "pause_child", t.child_id)
        return f"paused {t.path} (pid {t.info.pid}, SIGSTOP to its process group)"

    def _resume(self, t: Target, request: dict[str, Any]) -> str:
        self._worker_only(t, "resume")
        if t.info.state != "paused":
            raise ValueError(f"{t.path} is not paused (it is {t.info.state}); nothing to resume")
        self._call(t, "resume_child", t.child_id)
        return f"resumed {t.path} (pid {t.info.pid})"

    def _signal(self, t: Target, request: dict[str, Any]) -> str:
        self._worker_only(t, "signal")
        sig = request.get("signal")
        if type(sig) is not int:
            raise ValueError("the request needs a signal number")
        self._call(t, "signal_child", t.child_id, sig)
        return f"sent {signal.Signals(sig).name} to {t.path} (pid {t.info.pid})"

    def _logs(self, t: Target, request: dict[str, Any]) -> dict[str, Any]:
        """The tail of a child's output: its capture buffer, or the file it writes to."""
        self._worker_only(t, "read the output of")
        stream = request.get("stream", "stderr")
        if stream not in ("stdout", "stderr"):
            raise ValueError("stream must be stdout or stderr")
        where = getattr(self._call(t, "get_childspec", t.child_id), stream, None)
        if where == "capture":
            previous = request.get("previous") is True
            text = self._call(t, "read_output", t.child_id, stream, previous)
            return {"message": str(text).rstrip("\n"), "capture": True}
        if request.get("previous") is True:
            raise ValueError(
                f"{t.path} writes to {where or 'the terminal'}: every run appends there, "
                "so --previous is for captured output; read the file"
            )
        if isinstance(where, str):
            return {"message": tail_file(where).rstrip("\n"), "path": where}
        raise ValueError(
            f"{t.path} writes its {stream} to the terminal of `nannytree run "
            f'--child-output inherit`; set {stream} = "capture" or a file in its table'
        )

    def _detail(self, t: Target) -> dict[str, Any]:
        """One child up close: its spec, its process, its last exits and their stderr."""
        from supervision import EventKind

        self._worker_only(t, "show the detail of")
        spec = self._call(t, "get_childspec", t.child_id)
        supervisor, _, child = t.path.rpartition("/")
        exits = [
            EventRecord.from_event(e).to_dict()
            for e in self.log.snapshot()
            if e.offender == child
            and e.supervisor == supervisor
            and e.context in (EventKind.CHILD_EXITED, EventKind.CHILD_TERMINATED)
        ][-5:]
        started = [
            e.time
            for e in self.log.snapshot()
            if e.offender == child
            and e.supervisor == supervisor
            and e.context is EventKind.CHILD_STARTED
        ]
        running = t.info.state in ("running", "paused")
        uptime = time.monotonic() - started[-1] if running and started else None
        outputs = {getattr(spec, s, None) for s in ("stdout", "stderr")} - {None}
        return {
            "path": t.path,
            "state": t.info.state,
            "pid": t.info.pid,
            "restarts": t.info.restarts,
            "restart": t.info.restart.value,
            "uptime": uptime,
            "runs": _runs(spec),
            "output": ", ".join(sorted(str(o) for o in outputs)),
            "status": self._call(t, "child_status", t.child_id),
            "node": t.info.node,
            "exits": exits,
        }

    def _events(self, request: dict[str, Any], send: Send) -> None:
        last = request.get("last", 20)
        last = last if type(last) is int and last >= 0 else 20
        conn: socket.socket = request["_peer"]["conn"]
        follower = self.fanout.follow() if request.get("follow") else None
        try:
            backlog = self.log.snapshot()
            seen = {id(e) for e in backlog[-1000:]}
            for event in backlog[-last:] if last else []:
                if not send({"event": EventRecord.from_event(event).to_dict()}):
                    return
            if follower is None:
                send({"end": "done"})
                return
            while not self.closing.is_set():
                events = follower.take(timeout=0.25)
                if events is None:
                    send({"end": f"too slow: fell {MAX_PENDING} bytes behind", "ok": False})
                    return
                for event in events:
                    if id(event) in seen:
                        continue
                    if not send({"event": EventRecord.from_event(event).to_dict()}):
                        return
                if not events and _peer_gone(conn):
                    return
            for event in follower.take(timeout=0) or []:
                send({"event": EventRecord.from_event(event).to_dict()})
            send({"end": "the tree stopped"})
        finally:
            if follower is not None:
                self.fanout.forget(follower)


def _runs(spec: Any) -> str:
    """What a child runs, in one line."""
    if getattr(spec, "command", None) is not None:
        return shlex.join(spec.command)
    target = getattr(spec, "target", None)
    ref = getattr(target, "ref", None)
    return str(
        ref or f"{getattr(target, '__module__', '')}:{getattr(target, '__qualname__', target)}"
    )


class Follower:
    """One `events --follow` client's pending events, bounded in bytes."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._events: deque[tuple[Event, int]] = deque()
        self._bytes = 0
        self.overflowed = False

    def offer(self, event: Event) -> None:
        size = _event_size(event)
        with self._cond:
            if self.overflowed:
                return
            if self._bytes + size > MAX_PENDING:
                self.overflowed = True  # it cannot keep up: end its stream, say why
            else:
                self._events.append((event, size))
                self._bytes += size
            self._cond.notify()

    def take(self, timeout: float) -> list[Event] | None:
        """The events pending (waiting up to `timeout` for one); None if it fell behind."""
        with self._cond:
            if not self._events and not self.overflowed:
                self._cond.wait(timeout)
            if self.overflowed:
                return None
            events = [e for e, _ in self._events]
            self._events.clear()
            self._bytes = 0
            return events


def _event_size(event: Event) -> int:
    reason = event.reason
    text = len(event.detail) + (len(str(reason)) if reason is not None else 0)
    return 256 + text  # the fixed fields, roughly, plus the texts


class Fanout:
    """One subscription to the event log, shared by every following client, so a
    client costs one thread (its connection's), not two."""

    def __init__(self, log: EventLog) -> None:
        self._lock = threading.Lock()
        self._followers: set[Follower] = set()
        self._unsubscribe = log.subscribe(self._offer)

    def _offer(self, event: Event) -> None:
        with self._lock:
            followers = list(self._followers)
        for follower in followers:
            follower.offer(event)

    def follow(self) -> Follower:
        follower = Follower()
        with self._lock:
            self._followers.add(follower)
        return follower

    def forget(self, follower: Follower) -> None:
        with self._lock:
            self._followers.discard(follower)

    def close(self) -> None:
        self._unsubscribe()


MAX_TAIL = 64 * 1024


def open_log(path: str) -> int:
    """A child's log file for reading: never through a symlink, never a FIFO's block."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path} is not a regular file")
    return fd


def tail_file(path: str, limit: int = MAX_TAIL) -> str:
    """The last `limit` bytes of a log file, from a line start; "" if there is none yet."""
    try:
        fd = open_log(path)
    except FileNotFoundError:
        return ""
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - limit)
        data = os.pread(fd, limit, start)
    finally:
        os.close(fd)
    if start > 0 and b"\n" in data:
        data = data[data.index(b"\n") + 1 :]
    return data.decode(errors="replace")


def _peer_gone(conn: socket.socket) -> bool:
    readable, _, _ = select.select([conn], [], [], 0)
    if not readable:
        return False
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


# -- the client --------------------------------------------------------------------------------


def _connect(path: Path, timeout: float | None) -> socket.socket:
    check_path(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
    except FileNotFoundError:
        s.close()
        raise NoTree(f"no tree is running at {path}; start one with `nannytree run FILE`") from None
    except ConnectionRefusedError:
        s.close()
        raise NoTree(
            f"no tree answers at {path}: the run that made it has ended (a stale socket)"
        ) from None
    except OSError as e:
        s.close()
        raise ControlError(f"cannot connect to {path}: {e.strerror or e}") from None
    return s


def stream(
    path: Path, request: dict[str, Any], timeout: float | None = None
) -> Iterator[dict[str, Any]]:
    """Send one request; yield each JSON line of the answer until the server closes."""
    with _connect(path, timeout) as s:
        s.sendall((json.dumps(request) + "\n").encode())
        with s.makefile("rb") as lines:
            for line in lines:
                yield json.loads(line)


def call(path: Path, request: dict[str, Any], timeout: float | None = OP_TIMEOUT) -> dict[str, Any]:
    """Send one request and return its one answer."""
    for answer in stream(path, request, timeout):
        return answer
    raise ControlError(f"the tree at {path} closed the connection without answering")
