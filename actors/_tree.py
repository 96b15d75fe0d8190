"""A tree and what its nannies share: the launcher, the event log, the timers.

`Tree` is the handle a user holds: it starts the root nanny, keeps the event
log readable after the tree ended, and knows why the tree ended. Every nanny of
the tree gets the same `TreeContext`, passed down, instead of private
constructor arguments; the root owns it and closes it last.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pykka

from supervision import ExitKind, ExitReason, Relaunches, SupervisorSpec

from ._process._client import LauncherClient
from ._process._port import LaunchError, Spawner, SpawnRequest
from ._runtime._timer import Scheduler
from ._shell._event_log import EventLog
from ._shell._memory import MemoryWatch
from ._shell._messages import LauncherLost
from ._shell._sd_notify_watch import NotifyWatcher

if TYPE_CHECKING:
    from ._shell._nanny import NannyActor, NannyPlugin


class TreeContext:
    """The resources of one tree, shared by all its nannies; closed once, by the root."""

    def __init__(
        self,
        spec: SupervisorSpec,
        log: EventLog | None = None,
        spawner: Callable[[], Spawner] = LauncherClient.start,
        engine: Any = None,
    ) -> None:
        self.spec = spec
        self.engine = engine  # multi-host: runs the subtrees that have a placement
        # Multi-host: the node each remote subtree last ran on (by path), written by its
        # supervisor's nanny; the nodes this tree declared down, never chosen again,
        # added by a RemoteChild before it tells its parent (one set operation each).
        self.previous_nodes: dict[str, str] = {}
        self.nodes_down: set[str] = set()
        self.log = EventLog() if log is None else log
        self._new_spawner = spawner
        self.launcher: Spawner | None = None
        self.memory = MemoryWatch()
        self.scheduler = Scheduler()
        self.notify = NotifyWatcher()  # reads running children's NOTIFY_SOCKETs
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
        self._groups = 0

    def new_group(self) -> int:
        """An id for one supervisor of the tree, for the launcher's restart budgets."""
        with self._lock:
            self._groups += 1
            return self._groups

    def open(self) -> None:
        """Start the launcher (raises LaunchError)."""
        self.launcher = self._new_spawner()

    def current_launcher(self) -> Spawner:
        """The tree's launcher; a new one if the last one died (raises LaunchError)."""
        with self._lock:
            launcher = self.launcher
            if launcher is not None and launcher.alive:
                return launcher
            if self._lost is not None or self._ended.is_set():
                raise self._lost or LaunchError("the tree has ended")
            why = launcher.death() if launcher is not None else "there is no launcher"
            ended = self._relaunches.relaunch(time.monotonic(), why)
            if ended is not None:
                return self._lose(ended.message)
            try:
                self.launcher = self._new_spawner()
            except LaunchError as e:
                return self._lose(f"{why}, and a new one could not be started: {e}")
            return self.launcher

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
        with self._lock:
            launcher = self.launcher
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


class Tree:
    """A running supervision tree: its root nanny, its event log and its end.

        with Tree(spec) as tree:
            tree.nanny.which_children().get()
            reason = tree.wait(timeout=60)   # the tree's exit reason

    `Tree.start(spec)` is the same without `with`; `stop()` stops the tree in
    reverse start order. The event log stays readable after the tree ended.
    `spawner` says where child processes come from: a launcher process (the
    default), or a fake in tests of the actors themselves.
    """

    def __init__(
        self,
        spec: SupervisorSpec,
        *,
        plugins: Sequence[NannyPlugin] = (),
        log: EventLog | None = None,
        spawner: Callable[[], Spawner] = LauncherClient.start,
        engine: Any = None,
    ) -> None:
        if not isinstance(spec, SupervisorSpec):
            raise TypeError(f"a Tree takes a SupervisorSpec, not {type(spec).__name__}")
        self.spec = spec
        self._plugins = list(plugins)
        self.context = TreeContext(spec, log, spawner, engine)
        self._ref: pykka.ActorRef[NannyActor] | None = None

    @classmethod
    def start(
        cls,
        spec: SupervisorSpec,
        *,
        plugins: Sequence[NannyPlugin] = (),
        log: EventLog | None = None,
        spawner: Callable[[], Spawner] = LauncherClient.start,
        engine: Any = None,
    ) -> Tree:
        """Start every child in spec order; return once all have started (or raise).

        `engine` (e.g. `actors.ray.RayEngine()`) runs the subtrees with a placement.
        """
        return cls(spec, plugins=plugins, log=log, spawner=spawner, engine=engine)._start()

    def _start(self) -> Tree:
        from ._shell._nanny import NannyActor  # the nanny imports this module

        if self._ref is not None:
            raise RuntimeError(f"tree {self.spec.id!r} was already started")
        self._ref = NannyActor._start_root(self.spec, self.context, self._plugins)
        return self

    def __enter__(self) -> Tree:
        return self._start() if self._ref is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- looking ----------------------------------------------------------------

    @property
    def ref(self) -> pykka.ActorRef[NannyActor]:
        """The root nanny's ActorRef."""
        if self._ref is None:
            raise RuntimeError(f"tree {self.spec.id!r} is not started; use Tree.start(spec)")
        return self._ref

    @property
    def nanny(self) -> Any:
        """The root nanny's pykka proxy: `tree.nanny.which_children().get()`."""
        return self.ref.proxy()

    @property
    def log(self) -> EventLog:
        """The tree's EventLog; readable during and after the tree's life."""
        return self.context.log

    def events(self) -> list[Any]:
        """The tree's events so far, oldest first (also after it ended)."""
        return self.context.log.snapshot()

    def finished(self) -> ExitReason | None:
        """The tree's exit reason once it has ended (given up, or stopped); else None."""
        return self.context.reason if self.context.ended else None

    @property
    def alive(self) -> bool:
        return self._ref is not None and not self.context.ended

    def wait(self, timeout: float | None = None) -> ExitReason | None:
        """Wait until the tree has ended; its exit reason. TimeoutError after `timeout` s."""
        if not self.context.wait(timeout):
            raise TimeoutError(f"tree {self.spec.id!r} still running after {timeout}s")
        return self.context.reason

    def stop(self, timeout: float | None = None) -> ExitReason | None:
        """Stop the tree (reverse start order, each child per its shutdown); its reason."""
        if self._ref is not None:
            self._ref.stop(timeout=timeout)
            self.context.wait(timeout)
        return self.context.reason
