"""RemoteHost: the far side of a remote subtree, and its fence.

It runs in the remote process (a Ray actor, or a thread of the fake engine) and
runs a complete local tree there, started by the `start_tree` its engine hands
it, so nothing here imports the tree. A watchdog fences it: it stops its tree
when its lease is not renewed in time (supervision.Fencing), when its parent
process changes (a Ray worker whose raylet died), or when its engine says its
node was declared dead. docs/multihost.md section 6.

A fence must be over before the parent may start a new incarnation elsewhere:
the whole lease after the last renewal (section 5). So its orderly stop is
bounded by the time left until then, less SWEEP; an engine whose `on_fenced`
ends the process (`exit_fast`, Ray) skips it once that time is up (a host that
thaws after a freeze), and the launcher kills what is left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from supervision import ChildNotRunning, ExitReason, Fencing, NannyError, SupervisorSpec

from ._port import CALL_TIMEOUT, FORWARDED, RemoteApiError

log = logging.getLogger("nannytree")

# Seconds a launcher takes to kill what is left once its host process is gone
# (actors/_launcher/_main.py, HOST_GONE_GRACE): a fence leaves that much of its time.
SWEEP = 0.5


class LocalTree(Protocol):
    """What the far side needs of the tree `start_tree` returns (an actors.Tree)."""

    @property
    def nanny(self) -> Any: ...

    @property
    def log(self) -> Any: ...

    def finished(self) -> ExitReason | None: ...

    def wait(self, timeout: float | None = None) -> ExitReason | None: ...

    def stop(self, timeout: float | None = None) -> ExitReason | None: ...


class RemoteHost:
    """A complete local tree for one remote subtree incarnation, and its fence.

    The engine calls `start`, then parks `wait_exit`; `api`, `shutdown`,
    `renew_lease`, `ping`, `liveness` and `wait_events` are control calls.
    `start_tree(spec)` starts the tree, every child in order, and raises as a local
    start does.
    """

    def __init__(
        self,
        spec: SupervisorSpec,
        incarnation: int,
        *,
        start_tree: Callable[[SupervisorSpec], LocalTree],
        lease_timeout: float | None = None,
        watch_parent: bool = True,
        clock: Callable[[], float] = time.monotonic,
        on_fenced: Callable[[], None] | None = None,
        exit_fast: bool = False,
        node_dead: Callable[[], bool] | None = None,
    ) -> None:
        # The remote tree is a root here: its own launcher, its own event log.
        self.spec = dataclasses.replace(spec, placement=None)
        self.incarnation = incarnation
        self.lease_timeout = lease_timeout
        self._start_tree = start_tree
        self._fencing = Fencing(lease_timeout)
        self._clock = clock
        self._last_renewal = clock()
        self._ppid = os.getppid() if watch_parent else None
        self._tree: LocalTree | None = None
        self._ended = threading.Event()
        self._stop_watch = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self.killed = False
        self.fenced = ""  # why it fenced itself
        self.fence_complete = False  # every child stopped within the fence's time
        self._fence_lock = threading.Lock()
        self._on_fenced = on_fenced  # Ray: the process exits, and its death is the report
        self._exit_fast = exit_fast  # on_fenced ends the process and with it every child
        self._node_dead = node_dead  # the engine: was our node declared dead?
        self._watchdog: threading.Thread | None = None

    def start(self) -> int:
        """Start the tree; raises as a local start does. Our pid."""
        self._tree = self._start_tree(self.spec)
        self._watchdog = threading.Thread(
            target=self._watch, name=f"nannytree-fence-{self.spec.id}", daemon=True
        )
        self._watchdog.start()
        if self._ppid is not None:
            threading.Thread(
                target=self._watch_parent, name=f"nannytree-parent-{self.spec.id}", daemon=True
            ).start()
        return os.getpid()

    # -- looking ----------------------------------------------------------------

    @property
    def tree(self) -> LocalTree | None:
        """The local tree, once started."""
        return self._tree

    @property
    def alive(self) -> bool:
        return self._tree is not None and not self._ended.is_set()

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    @property
    def exit_reason(self) -> ExitReason | None:
        return None if self._tree is None else self._tree.finished()

    def on_end(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)
        if self._ended.is_set():
            listener()

    # -- calls --------------------------------------------------------------------

    def wait_exit(self, timeout: float | None = None) -> ExitReason | None:
        """Parked: the tree's exit reason once it ended by itself.

        A fenced incarnation never answers: it is not a give-up, and the parent learns
        of it from the engine (its node's death, or its process's).
        """
        self._ended.wait(timeout)
        if self.fenced and timeout is None:
            threading.Event().wait()  # never returns: the process exits (see on_fenced)
        return self.exit_reason

    def api(self, method: str, *args: Any) -> Any:
        if method not in FORWARDED:
            raise ValueError(f"{method!r} is not an API call a remote subtree forwards")
        if self._tree is None or self._ended.is_set():
            raise ChildNotRunning(self.spec.id, self.spec.id, f"call {method}: it has ended")
        try:
            return getattr(self._tree.nanny, method)(*args).get(timeout=CALL_TIMEOUT)
        except NannyError as e:
            raise RemoteApiError.wrap(e) from None

    def shutdown(self) -> ExitReason | None:
        """The orderly stop: children in reverse order, each by its own spec."""
        if self._tree is not None:
            self._tree.stop()
        self._finish()
        return self.exit_reason

    def renew_lease(self, sent: float | None = None) -> None:
        """A renewal the parent sent at wall-clock `sent`: counted unless it came after
        the parent stopped counting on it (supervision.Fencing.renewal_counts)."""
        if self.fenced:
            return
        if self._fencing.renewal_counts(sent, time.time()):
            self._last_renewal = self._clock()
        else:
            log.warning("a lease renewal sent at %.3f came too late; not counted", sent)

    def ping(self) -> int:
        return os.getpid()

    def wait_events(self, since: int, timeout: float) -> tuple[list[Any], int, float]:
        """Long poll: the tree's events from index `since` (waiting up to `timeout`),
        the next index, and our clock now (the parent maps the times onto its own)."""
        if self._tree is None:
            return [], since, time.monotonic()
        events, index = self._tree.log.since(since, timeout)
        return events, index, time.monotonic()

    def liveness(self, timeout: float) -> bool:
        """The opt-in liveness check: the remote supervisor itself answers a read-only
        call within `timeout` (the process and the node answering is not enough)."""
        if self._tree is None or self._ended.is_set():
            return True  # ending: its exit is on its way
        self._tree.nanny.count_children().get(timeout=timeout)
        return True

    def kill(self) -> None:
        """The fake's "process death": the tree stops; nobody is told politely."""
        self.killed = True
        self.shutdown()

    # -- the fence ------------------------------------------------------------------

    def _finish(self) -> None:
        if self._ended.is_set():
            return
        self._ended.set()
        self._stop_watch.set()
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):
                listener()

    def _ended_by_itself(self, period: float) -> bool:
        assert self._tree is not None
        try:
            self._tree.wait(period)
        except TimeoutError:
            return False
        return True

    def _watch(self) -> None:
        lease = self.lease_timeout
        period = 0.2 if lease is None else min(0.2, lease / 5)
        while not self._stop_watch.is_set():
            if self._ended_by_itself(period):
                self._finish()  # the parked wait_exit returns
                return
            why = self._fence_reason()
            if why:
                self.fence(why)
                return

    def _watch_parent(self) -> None:
        """Fence the moment the parent process (the raylet) exits, not at the
        watchdog's next look: Ray's worker quits within about a second of its
        raylet's death, and the fence's acknowledgement must be out before."""
        assert self._ppid is not None
        try:
            fd = os.pidfd_open(self._ppid)
        except OSError:
            return  # gone already (the watchdog's ppid check fences), or no pidfd
        try:
            if os.getppid() != self._ppid:
                return  # the pid may be another process's now: the watchdog fences
            while not self._stop_watch.is_set():
                if select.select([fd], [], [], 1.0)[0]:
                    self.fence("its parent process (the raylet) is gone")
                    return
        finally:
            os.close(fd)

    def _fence_reason(self) -> str:
        if self._ppid is not None and os.getppid() != self._ppid:
            return "its parent process (the raylet) is gone"
        if self._fencing.lease_expired(self._clock(), self._last_renewal):
            return f"its lease was not renewed within {self.lease_timeout}s"
        if self._node_dead is not None:
            try:
                dead = self._node_dead()
            except Exception:
                dead = False  # no word from the engine: the lease decides
            if dead:
                return "its node was declared dead"
        return ""

    def fence_budget(self) -> float:
        """Seconds left for an orderly stop before the parent may start a new
        incarnation elsewhere (0: none; without a lease the parent may at once)."""
        if self.lease_timeout is None:
            return 0.0
        return max(0.0, self._last_renewal + self.lease_timeout - SWEEP - self._clock())

    def fence(self, why: str) -> None:
        """Stop every child now: this incarnation may be replaced (docs/multihost.md
        section 5). Then `on_fenced`; a fenced incarnation never answers wait_exit."""
        with self._fence_lock:
            if self.fenced or self._ended.is_set():
                return
            self.fenced = why
        self._stop_watch.set()
        budget = self.fence_budget() if self._exit_fast else None
        log.warning(
            "remote subtree %r fences itself: %s (%s)",
            self.spec.id,
            why,
            "stopping its children" if budget is None else f"{budget:.1f}s to stop its children",
        )
        if self._tree is not None and (budget is None or budget > 0):
            with contextlib.suppress(Exception):  # pykka's Timeout: the exit kills the rest
                self._tree.stop(timeout=budget)
        self.fence_complete = self._tree is None or self._tree.finished() is not None
        self._finish()
        if self._on_fenced is not None:
            self._on_fenced()
