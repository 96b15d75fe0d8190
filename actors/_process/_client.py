"""Host side of the launcher: where every child process of a tree comes from.

`LauncherClient.start()` starts the launcher (``actors._launcher._main``: a guardian
process and, under it, the single-threaded launcher that spawns, forks and
reaps every child). In the host, one reader thread decodes its reports (the
tree's single exit watcher) and one waiter thread waits on the guardian: its
exit, not socket EOF, is what tells the host that the launcher and everything
it started are gone. The launcher watches a lifeline pipe whose write end only
the host holds, so a SIGKILLed host takes the whole tree with it.

Every wait on the launcher has a deadline: a launcher that stops answering
makes `spawn` fail after SPAWN_TIMEOUT, never hang. Reports are records of
`actors._launcher._protocol`, decoded as plain data: nothing from the launcher (or the
children behind it) is ever unpickled here. One concept: the launcher's client, both
directions of its one socket (the handles it makes live in `_handle.py`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from supervision import CAPTURE, ExitPlan, signal_name

from .._launcher import _protocol, _wire
from .._launcher._protocol import (
    Arm,
    CancelChain,
    Define,
    Disarm,
    Discard,
    Follow,
    Forget,
    Grant,
    Prepare,
    Spawn,
)
from .._launcher._record import Record
from .._launcher._title import TITLE_ENV
from . import _detach
from ._handle import ChildProcess
from ._port import (
    OUTPUT_LIMIT,
    SPAWN_TIMEOUT,
    ChildHandle,
    LaunchError,
    Note,
    PendingSpawn,
    ProcessExit,
    SpawnRequest,
    Standby,
)
from ._reader import Children, Reader

__all__ = [
    "CAPTURE",
    "OUTPUT_LIMIT",
    "SPAWN_TIMEOUT",
    "ChildProcess",
    "LaunchError",
    "LauncherClient",
    "PendingSpawn",
    "ProcessExit",
    "SpawnRequest",
    "Standby",
]

log = logging.getLogger(__name__)

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_HELLO_TIMEOUT = 60.0  # generous: preloading heavy modules can take seconds
SEND_TIMEOUT = 5.0  # nor one that does not read what we send


# Process-wide on purpose: a fork copies every tree's launcher client, and a fork hook
# cannot be unregistered, so one hook lets go of them all.
_instances: weakref.WeakSet[LauncherClient] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A fork of the host must not hold the lifeline, or the tree would outlive the host.
    for launcher in list(_instances):
        launcher._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class LauncherClient:
    """One launcher process and the two host threads that watch it. Use `start()`."""

    def __init__(self, preload: Sequence[str] = (), tree: str = "") -> None:
        self._preload = list(preload)
        self._tree = tree  # the tree's name, for the launcher's process title
        self._started = threading.Event()
        self._start_error = ""
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._table = Children(self._lock)
        # Identical requests share one template: key -> (id, users); id -> key.
        self._templates: dict[bytes, list[int]] = {}
        self._template_keys: dict[int, bytes] = {}
        # A request object seen before (like children share one, see TreeContext):
        # its template found by identity, without encoding it again.
        self._by_request: dict[int, tuple[SpawnRequest, int]] = {}  # id(request) ->
        self._requests_of: dict[int, list[int]] = {}  # template -> ids of its requests
        self._next_id = 0
        self._dead = False
        self._closing = False
        self._forked = False
        self._hello = threading.Event()
        self._hello_error: str | None = None
        self._pid = 0
        self.returncode: int | None = None
        self._proc: Any = None  # a subprocess.Popen, or a _detach.DetachedProcess
        self._sock, launcher_sock = socket.socketpair()
        # Sends only (the reader blocks on recv): a stopped launcher must not hang a caller.
        seconds = int(SEND_TIMEOUT)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, 0))
        self._lifeline_r, self._lifeline_w = os.pipe()
        self._launcher_sock: socket.socket | None = launcher_sock
        reader = Reader(self._sock, self._table, self._hello_from, self.kill)
        self._reader = threading.Thread(
            target=reader.run, name="nannytree-launcher-reader", daemon=True
        )
        self._waiter = threading.Thread(
            target=self._watch, name="nannytree-launcher-waiter", daemon=True
        )

    # -- start / stop ----------------------------------------------------------

    @classmethod
    def start(cls, *, preload: Sequence[str] = (), tree: str = "") -> LauncherClient:
        """Start a launcher process; `preload` modules are imported in it before any fork;
        `tree` names it in `ps` (nannytree: launcher [tree])."""
        self = cls(preload, tree)
        _instances.add(self)
        self._reader.start()
        self._waiter.start()
        self._started.wait()
        if self._proc is None:
            self._reader.join()
            self._close_fds()
            raise LaunchError(f"cannot start the launcher process: {self._start_error}")
        if not self._hello.wait(_HELLO_TIMEOUT):
            self.close()
            raise LaunchError(f"the launcher process did not start within {_HELLO_TIMEOUT} s")
        if self._hello_error is not None or self._dead:
            self.close()
            raise LaunchError(
                f"the launcher process failed: {self._hello_error or 'it died at start'}"
            )
        return self

    def _watch(self) -> None:
        """The waiter thread: starts the launcher, waits on it (reaping it), cleans up."""
        assert self._launcher_sock is not None
        env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + path if path else "")
        env[TITLE_ENV] = self._tree  # read and dropped at once by the launcher
        argv = [sys.executable, "-P", "-m", "actors._launcher._main"]
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
        self._started.set()
        returncode = proc.wait()
        self._on_launcher_exit(returncode)

    def _on_launcher_exit(self, returncode: int) -> None:
        with self._lock:
            self._dead = True
            self.returncode = returncode
        # The reader drains what the launcher sent before dying, then sees EOF,
        # even if some process still holds the launcher's end of the socket.
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RD)
        self._reader.join()
        with self._lock:
            pending = list(self._table.pending.values())
            self._table.pending.clear()
            unborn = [c for c in self._table.unborn.values() if c is not None]
            self._table.unborn.clear()
            live = list(self._table.live.values())
            self._table.live.clear()
            standbys = list(self._table.standbys.values())
            self._table.standbys.clear()
        for successor in unborn:
            successor._never_born()
        why = self.death()
        for slot in pending:
            slot.error = LaunchError(f"cannot start child {slot.name!r}: {why}", name=slot.name)
            slot._finish()
        for standby in standbys:
            standby._done.set()
        # The guardian has killed everything it could reach; these are the groups we
        # were told about, in case it could not (it was killed itself).
        for child in live:
            with contextlib.suppress(OSError):
                os.killpg(child.pgid, signal.SIGKILL)
        for child in live:
            child._set_exit(
                ProcessExit(child.pid, -signal.SIGKILL, launcher_died=True, stderr=child.output(2))
            )
        self._hello.set()
        self._close_fds()

    def _hello_from(self, pid: int, error: str | None) -> None:
        """(Reader thread.) The launcher said it runs, as `pid` (or why it cannot)."""
        self._pid = pid
        self._hello_error = error
        self._hello.set()

    def death(self) -> str:
        """Why the launcher is gone, in words for a user."""
        code = self.returncode
        if self._closing or self._forked or code is None:
            return "the launcher process is closed (its tree is stopping)"
        if code > 128:
            how = f"was killed by {signal_name(code - 128)}"
        elif code < 0:
            how = f"was killed by {signal_name(-code)}"
        else:
            how = f"exited with status {code}"
        return f"the launcher process {how}; its children were killed with it"

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

    def kill(self) -> None:
        """SIGKILL the launcher process (its guardian then kills every child)."""
        if self._pid:
            with contextlib.suppress(OSError):
                os.kill(self._pid, signal.SIGKILL)

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
        return not (self._dead or self._forked or self._closing)

    @property
    def pid(self) -> int:
        """The launcher's pid (not its guardian's)."""
        return self._pid

    @property
    def guardian_pid(self) -> int:
        return self._proc.pid if self._proc is not None else 0

    def children(self) -> list[ChildProcess]:
        """The children not yet reported exited."""
        with self._lock:
            return list(self._table.live.values())

    # -- requests --------------------------------------------------------------

    def _new_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def _send(self, record: Record, name: str = "") -> None:
        with self._send_lock:
            self._send_locked(record, name)

    def _send_locked(self, record: Record, name: str = "") -> None:
        self._send_frames([record], name)

    def _send_frames(self, records: Sequence[Record], name: str = "") -> None:
        """(Under the send lock.) The records in order, in one send."""
        if not self.alive:
            raise LaunchError(f"cannot reach the launcher: {self.death()}", name=name)
        frame = b"".join(_wire.encode(record.pack()) for record in records)
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            raise LaunchError(
                f"cannot reach the launcher process ({exc.strerror or exc})",
                name=name,
                errno=exc.errno,
            ) from exc

    def define(self, request: SpawnRequest) -> int:
        """Tell the launcher how to start a child; the template's id, for spawn().

        Identical requests (same command or target, env, cwd, ...) share one
        template, so a thousand like children cost the launcher one.
        """
        with self._lock:
            seen = self._by_request.get(id(request))
            if seen is not None and seen[0] is request:
                entry = self._templates.get(self._template_keys.get(seen[1], b""))
                if entry is not None:
                    entry[1] += 1
                    return entry[0]
        template = request.template()
        key = _wire.dumps(template.values())
        # The send lock is held from the lookup to the send, so a spawn that names a
        # shared template can never reach the launcher before its Define.
        with self._send_lock:
            with self._lock:
                entry = self._templates.get(key)
                if entry is not None:
                    entry[1] += 1
                    self._remember(request, entry[0])
                    return entry[0]
                self._next_id += 1
                tid = self._next_id
                self._templates[key] = [tid, 1]
                self._template_keys[tid] = key
                self._remember(request, tid)
            try:
                self._send_locked(Define(tid, template), request.name)
            except BaseException:
                self._drop_template(tid)
                raise
        return tid

    def forget(self, template: int) -> None:
        """A user of the template is done with it; the last one drops it."""
        if self._drop_template(template):
            with contextlib.suppress(LaunchError):
                self._send(Forget(template))

    def _drop_template(self, template: int) -> bool:
        with self._lock:
            key = self._template_keys.get(template)
            entry = self._templates.get(key) if key is not None else None
            if entry is None or key is None:
                return False
            entry[1] -= 1
            if entry[1] > 0:
                return False
            del self._templates[key], self._template_keys[template]
            for ident in self._requests_of.pop(template, ()):
                del self._by_request[ident]
            return True

    def _remember(self, request: SpawnRequest, template: int) -> None:
        """(Under the lock.) `request` is a name of `template` from now on."""
        if id(request) not in self._by_request:
            self._by_request[id(request)] = (request, template)
            self._requests_of.setdefault(template, []).append(id(request))

    def arm(self, child: ChildHandle, budget: int, plan: ExitPlan, standby: int = 0) -> None:
        """Let the launcher restart `child` at once when it exits as `plan` says (from
        `standby`, the worker's own warm standby, if not 0)."""
        with contextlib.suppress(LaunchError):
            self._send(
                Arm(
                    child.pid,
                    budget,
                    plan.restart_on == "any",
                    float(plan.min_uptime),
                    sorted(plan.normal_exit_codes),
                    standby,
                )
            )

    def follow(self, child: ChildHandle, main_pid: int) -> None:
        """The child said MAINPID=`main_pid`: when its process exits, follow that one."""
        with contextlib.suppress(LaunchError):
            self._send(Follow(child.pid, main_pid))

    def reopen_logs(self) -> None:
        """Have the launcher open every child's file anew by its path (after an
        external rotation moved it; docs/logs.md)."""
        with contextlib.suppress(LaunchError):
            self._send(_protocol.Reopen())

    def disarm(self, child: ChildHandle) -> None:
        """Leave `child`'s exit to the host (sent before it is stopped or paused)."""
        with contextlib.suppress(LaunchError):
            self._send(Disarm(child.pid))

    def grant(self, budget: int, granted: int) -> None:
        """The supervisor of `budget` may have had `granted` restarts made ahead in all."""
        with contextlib.suppress(LaunchError):
            self._send(Grant(budget, granted))

    def prepare(self, template: int) -> Standby:
        """Fork a warm standby of a Python child's template ahead of time.

        The standby has the target unpickled (its imports done) and waits for
        spawn(template, standby=s.id). It belongs to the caller: discard() it
        when it is no longer wanted. If it dies, spawn falls back to a plain fork.
        """
        standby = Standby(self._new_id())
        with self._lock:
            self._table.standbys[standby.id] = standby
        self._send(Prepare(standby.id, template))
        return standby

    def discard(self, standby: int) -> None:
        """Kill a standby that prepare() made and spawn() did not use."""
        with self._lock:
            self._table.standbys.pop(standby, None)
        with contextlib.suppress(LaunchError):
            self._send(Discard(standby))

    def spawn(
        self,
        template: int,
        *,
        name: str = "",
        notify: Callable[[ChildHandle, Note], None] | None = None,
        standby: int | None = None,
        timeout: float = SPAWN_TIMEOUT,
    ) -> ChildHandle:
        """Start a child from a template; blocks until the launcher replied. Thread-safe.

        Raises LaunchError when it could not start, or when the launcher did not
        answer within `timeout` seconds (it is hung: the child, if it comes, is killed).
        """
        if threading.current_thread() is self._reader:
            raise RuntimeError("LauncherClient.spawn from a notify callback would deadlock")
        slot = self.submit(template, name=name, notify=notify, standby=standby)
        if not slot.done.wait(timeout):
            self.expire([slot], timeout)
            slot.done.wait()  # failed now, or answered just now
        return slot.result()

    def submit(
        self,
        template: int,
        *,
        name: str = "",
        notify: Callable[[ChildHandle, Note], None] | None = None,
        standby: int | None = None,
        chain: int = 0,
        on_done: Callable[[PendingSpawn], None] | None = None,
    ) -> PendingSpawn:
        """Send a spawn and return at once; `on_done(slot)` runs on the reader thread
        once it is answered (it must only hand the answer on). A spawn of `chain` is
        started only if every spawn of that chain sent before it was (new_chain())."""
        return self.submit_run([(template, name, notify, on_done)], chain=chain, standby=standby)[0]

    def submit_run(
        self,
        spawns: Sequence[
            tuple[
                int,
                str,
                Callable[[ChildHandle, Note], None] | None,
                Callable[[PendingSpawn], None] | None,
            ]
        ],
        *,
        chain: int = 0,
        standby: int | None = None,
    ) -> list[PendingSpawn]:
        """submit() for (template, name, notify, on_done) each, in that order, in one send."""
        slots = [PendingSpawn(name, notify, on_done) for _, name, notify, on_done in spawns]
        first = spawns[0][1] if spawns else ""
        with self._lock:
            if self._dead or self._closing or self._forked:
                raise LaunchError(f"cannot start child {first!r}: {self.death()}", name=first)
            for slot in slots:
                self._next_id += 1
                slot.req = self._next_id
                self._table.pending[slot.req] = slot
        records = [
            Spawn(slot.req, template, standby, chain)
            for slot, (template, *_) in zip(slots, spawns, strict=True)
        ]
        try:
            with self._send_lock:
                self._send_frames(records, first)
        except BaseException:
            with self._lock:
                for slot in slots:
                    self._table.pending.pop(slot.req, None)
            raise
        return slots

    def new_chain(self) -> int:
        """A name for a run of starts (submit(chain=...)): its spawns start in order,
        and none once one of them failed or cancel_chain() was called."""
        return self._new_id()

    def cancel_chain(self, chain: int) -> None:
        """Start nothing more of that run (what it started already stays started)."""
        with contextlib.suppress(LaunchError):
            self._send(CancelChain(chain))

    def expire(self, slots: Sequence[PendingSpawn], waited: float) -> None:
        """The launcher did not answer these spawns in `waited` seconds: it is hung.
        Each still unanswered fails now; a child that comes later is killed."""
        for slot in slots:
            with self._lock:
                late = self._table.pending.pop(slot.req, None)
            if late is None:
                continue
            late.error = LaunchError(
                f"cannot start child {late.name!r}: the launcher process (pid {self._pid}) "
                f"did not answer within {waited:g} s; it is stopped or overloaded",
                name=late.name,
            )
            late._finish()
