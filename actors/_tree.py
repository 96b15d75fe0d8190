"""The tree handle, and the composition root: the one place that picks the spawner.

`Tree` is the handle a user holds: it starts the root nanny, keeps the event
log readable after the tree ended, and knows why the tree ended. It makes the
tree's `TreeContext` (actors/_shell/_context.py) with the spawner it picked (the
launcher's client by default) and the engine it was given, and installs itself
as the way `NannyActor.start` starts a tree, so the shell never names an adapter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import pykka

from supervision import ExitReason, SupervisorSpec

from ._process._client import LauncherClient
from ._process._port import Spawner
from ._shell._context import TreeContext
from ._shell._event_log import EventLog
from ._shell._nanny import NannyActor, NannyPlugin


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
        if spawner == LauncherClient.start:  # the default: its launcher named after the tree
            spawner = functools.partial(LauncherClient.start, tree=spec.id)
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


def _start_tree(
    spec: SupervisorSpec,
    *,
    plugins: Sequence[NannyPlugin] = (),
    log: EventLog | None = None,
    engine: Any = None,
) -> pykka.ActorRef[NannyActor]:
    return Tree.start(spec, plugins=plugins, log=log, engine=engine).ref


NannyActor.compose(_start_tree)  # NannyActor.start(spec) starts a Tree
