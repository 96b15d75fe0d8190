"""A tree and what its nannies share: the launcher, the event log, the timers.

`Tree` is the handle a user holds: it starts the root nanny, keeps the event
log readable after the tree ended, and knows why the tree ended. Every nanny of
the tree gets the same `TreeContext`, passed down, instead of private
constructor arguments; the root owns it and closes it last.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pykka

from supervision import ExitReason, SupervisorSpec

from ._events import EventLog
from ._launcher import Launcher
from ._memory import MemoryWatch
from ._timer import Scheduler

if TYPE_CHECKING:
    from ._nanny import NannyActor, NannyPlugin


class TreeContext:
    """The resources of one tree, shared by all its nannies; closed once, by the root."""

    def __init__(
        self, spec: SupervisorSpec, log: EventLog | None = None, engine: Any = None
    ) -> None:
        self.spec = spec
        self.engine = engine  # multi-host: runs the subtrees that have a placement
        self.log = EventLog() if log is None else log
        self.launcher: Launcher | None = None
        self.memory = MemoryWatch()
        self.scheduler = Scheduler()
        self._ended = threading.Event()
        self._reason: ExitReason | None = None

    def open(self) -> None:
        """Start the launcher (raises LaunchError)."""
        self.launcher = Launcher.start()

    def end(self, reason: ExitReason | None) -> None:
        """The root stopped with `reason`: release everything, wake the waiters."""
        if self._ended.is_set():
            return
        self._reason = reason
        self.memory.close()
        self.scheduler.close()
        if self.launcher is not None:
            self.launcher.close()
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
    """

    def __init__(
        self,
        spec: SupervisorSpec,
        *,
        plugins: Sequence[NannyPlugin] = (),
        log: EventLog | None = None,
        engine: Any = None,
    ) -> None:
        if not isinstance(spec, SupervisorSpec):
            raise TypeError(f"a Tree takes a SupervisorSpec, not {type(spec).__name__}")
        self.spec = spec
        self._plugins = list(plugins)
        self.context = TreeContext(spec, log, engine)
        self._ref: pykka.ActorRef[NannyActor] | None = None

    @classmethod
    def start(
        cls,
        spec: SupervisorSpec,
        *,
        plugins: Sequence[NannyPlugin] = (),
        log: EventLog | None = None,
        engine: Any = None,
    ) -> Tree:
        """Start every child in spec order; return once all have started (or raise).

        `engine` (e.g. `actors.ray.RayEngine()`) runs the subtrees with a placement.
        """
        return cls(spec, plugins=plugins, log=log, engine=engine)._start()

    def _start(self) -> Tree:
        from ._nanny import NannyActor  # the nanny imports this module

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
