"""What a tree's actors share: its spawner, event log, timers, watches and requests.

Every nanny of a tree gets the same `TreeContext`, passed down, instead of private
constructor arguments; the root owns it and closes it last. The composition root
(actors/_tree.py) makes it, with the spawner and the engine it picked.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pykka

from supervision import ExitKind, ExitReason, Relaunches, SupervisorSpec

from .._process._port import LaunchError, Spawner, SpawnRequest
from .._runtime._timer import Scheduler
from ._event_log import EventLog
from ._memory import MemoryWatch
from ._messages import LauncherLost
from ._prober import Prober
from ._sd_notify_watch import NotifyWatcher


class TreeContext:
    """The resources of one tree, shared by all its nannies; closed once, by the root."""

    def __init__(
        self,
        spec: SupervisorSpec,
        log: EventLog | None,
        spawner: Callable[[], Spawner],
        engine: Any = None,
    ) -> None:
        self.spec = spec
        self.engine = engine  # multi-host: runs the subtrees that have a placement
        # Multi-host: the node each remote subtree last ran on (by path), written by its
        # supervisor's nanny; the nodes this tree declared down, never chosen again,
        # added by a RemoteChild before it tells its parent (one set operation each).
        self.previous_nodes: dict[str, str] = {}
        self.nodes_down: set[str] = set()
        # Multi-host: the remote subtrees' stand-ins (RemoteChild refs) by node, so that
        # a node one of them declares down is down for every subtree on it at once.
        self.remote_on: dict[str, set[Any]] = {}
        # Each local supervisor's charged restarts (newest first, on the monotonic
        # clock), by path, as a reader callable from any thread: for metrics, which
        # must not wait on a busy supervisor. Registered by each nanny as it starts.
        self.restart_windows: dict[str, Callable[[], tuple[float, ...]]] = {}
        self.log = EventLog() if log is None else log
        self._new_spawner = spawner
        self.spawner: Spawner | None = None  # the launcher's client, or a fake
        self.memory = MemoryWatch()
        self.scheduler = Scheduler()
        self.notify = NotifyWatcher()  # reads running children's NOTIFY_SOCKETs
        self.prober = Prober()  # runs readiness and liveness probes (docs/health.md)
        # Children built alike share one spawn request, by their spec's shape: the
        # launcher then defines it once (10,000 like children: one encoding, not
        # 10,000). Each with the host's state it was built in.
        self.requests: dict[tuple[Any, ...], tuple[tuple[Any, ...], SpawnRequest]] = {}
        self.root: pykka.ActorRef[Any] | None = None
        self._lock = threading.Lock()
        self._relaunches = Relaunches()
        self._lost: LaunchError | None = None
        self._ended = threading.Event()
        self._reason: ExitReason | None = None
        self._budgets = 0

    def remote_started(self, node: str, ref: Any) -> None:
        """A remote subtree's stand-in now runs on `node` (those that stopped are let go)."""
        with self._lock:
            on = self.remote_on.setdefault(node, set())
            on.difference_update([r for r in on if not r.is_alive()])
            on.add(ref)

    def node_lost(self, node: str) -> list[Any]:
        """`node` is down for this tree: never chosen again. The stand-ins of the remote
        subtrees that ran there, to be told; [] if it was already down."""
        with self._lock:
            if node in self.nodes_down:
                return []
            self.nodes_down.add(node)
            return list(self.remote_on.pop(node, ()))

    def new_budget(self) -> int:
        """An id for one supervisor of the tree, for the launcher's restart budgets."""
        with self._lock:
            self._budgets += 1
            return self._budgets

    def open(self) -> None:
        """Start the launcher (raises LaunchError)."""
        self.spawner = self._new_spawner()

    def current_spawner(self) -> Spawner:
        """The tree's spawner; a new one (a new launcher) if the last one died (raises
        LaunchError)."""
        with self._lock:
            launcher = self.spawner
            if launcher is not None and launcher.alive:
                return launcher
            if self._lost is not None or self._ended.is_set():
                raise self._lost or LaunchError("the tree has ended")
            why = launcher.death() if launcher is not None else "there is no launcher"
            ended = self._relaunches.relaunch(time.monotonic(), why)
            if ended is not None:
                return self._lose(ended.message)
            try:
                self.spawner = self._new_spawner()
            except LaunchError as e:
                return self._lose(f"{why}, and a new one could not be started: {e}")
            return self.spawner

    def _lose(self, message: str) -> Spawner:
        """No launcher any more: tell the root to end the tree, and refuse every spawn."""
        self._lost = LaunchError(message)
        if self.root is not None:
            reason = ExitReason(ExitKind.LAUNCHER_DIED, message=message)
            with contextlib.suppress(pykka.ActorDeadError):
                self.root.tell(LauncherLost(reason))
        raise self._lost

    def end(self, reason: ExitReason | None) -> None:
        """The root stopped with `reason`: release everything, wake the waiters."""
        if self._ended.is_set():
            return
        self._reason = reason
        self.memory.close()
        self.scheduler.close()
        self.notify.close()
        self.prober.close()
        with self._lock:
            launcher = self.spawner
        if launcher is not None:
            launcher.close()
        self._ended.set()

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    @property
    def reason(self) -> ExitReason | None:
        return self._reason

    def wait(self, timeout: float | None = None) -> bool:
        return self._ended.wait(timeout)
