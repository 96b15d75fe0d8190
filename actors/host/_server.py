"""The listening side of `nannytree run`'s control socket (the protocol is told in
actors/cli/_control.py, with its client): bound 0600 in a private folder, one
thread per connection, at most MAX_CLIENTS at once, the caller's credentials
read (SO_PEERCRED) and every request a bounded JSON line. What each request
does is the Controller's (`_controller.py`).

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
import selectors
import socket
import stat
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.cli._control import MAX_LINE, ControlError, answers, check_path, own_dir

MAX_CLIENTS = 64  # connections served at once; one more is refused with a message
SEND_TIMEOUT = 10.0  # a client that reads nothing for this long is dropped
ACCEPT_BACKOFF = 0.1  # seconds to wait when accept() finds no free descriptor

Send = Callable[[dict[str, Any]], bool]


class AlreadyRunning(ControlError):
    """Another `nannytree run` serves this socket."""


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
                own_dir(path.parent, create=True)
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
                    request = parse_request(line)
                except ValueError as e:
                    send({"ok": False, "error": f"bad request: {e}", "kind": "BadRequest"})
                    return
                conn.settimeout(SEND_TIMEOUT)  # a client that stops reading is dropped
                request["_peer"] = {"pid": pid, "uid": uid, "conn": conn}
                handler(request, send)
        except OSError:
            pass
        finally:
            with self._guard:
                self._connections.discard(threading.current_thread())


def parse_request(line: bytes) -> dict[str, Any]:
    """One request line as read (at most MAX_LINE + 1 bytes): the JSON object it holds.

    Raises ValueError (the client gets kind "BadRequest") for anything else.
    """
    if len(line) > MAX_LINE:
        raise ValueError(f"longer than {MAX_LINE} bytes")
    try:
        request = json.loads(line)
    except RecursionError:  # json's C decoder raises it for deep nesting, not ValueError
        raise ValueError("nested too deep") from None
    if not isinstance(request, dict):
        raise ValueError("expected a JSON object")
    return request


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
    if answers(path):
        raise AlreadyRunning(f"something already answers on {path}; pass another --socket")
    path.unlink()
    return True
