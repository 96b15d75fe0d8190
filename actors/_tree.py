"""The tree handle, and the composition root: the one place that picks the spawner.

`Tree` is the handle a user holds: it starts the root nanny, keeps the event
log readable after the tree ended, and knows why the tree ended. It makes the
tree's `TreeContext` (actors/_shell/_context.py) with the spawner it picked (the
launcher's client by default) and the engine it was given, and installs itself
as the way `NannyActor.start` starts a tree, so the shell never names an adapter.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, overload

import pykka

from supervision import (
    UPDATE_SETTLE,
    ConfigError,
    ExitReason,
    SupervisorSpec,
    UpdateOutcome,
    check_settle,
)

from ._operate._restart import restart_all
from ._operate._update import Updater, read_live
from ._process._client import LauncherClient
from ._process._port import Spawner
from ._shell._context import TreeContext
from ._shell._event_log import EventLog
from ._shell._nanny import NannyActor, NannyPlugin


class _Start:
    """`start` on the class makes and starts a tree; on a tree, starts that tree."""

    def __init__(self, make: Any, begin: Callable[[Tree], Tree]) -> None:
        self._make = make
        self._begin = begin
        self.__doc__ = make.__func__.__doc__

    @overload
    def __get__(self, tree: None, cls: type[Tree]) -> _MakeAndStart: ...
    @overload
    def __get__(self, tree: Tree, cls: type[Tree]) -> Callable[[], Tree]: ...
    def __get__(self, tree: Tree | None, cls: type[Tree]) -> Any:
        if tree is None:
            return self._make.__get__(None, cls)
        return functools.partial(self._begin, tree)


class _MakeAndStart(Protocol):
    def __call__(
        self,
        spec: SupervisorSpec,
        *,
        plugins: Sequence[NannyPlugin] = (),
        log: EventLog | None = None,
        spawner: Callable[[], Spawner] = ...,
        engine: Any = None,
    ) -> Tree: ...


class Tree:
    """A running supervision tree: its root nanny, its event log and its end.

        with Tree(spec) as tree:
            tree.nanny.which_children().get()
            reason = tree.wait(timeout=60)   # the tree's exit reason

    `Tree.start(spec)` is the same without `with` (or `tree = Tree(spec)`, then
    `tree.start()`: a tree held while it starts); `stop()` stops the tree in
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
        self._updater = Updater(lambda: self._ref, self.context.log)

    @classmethod
    def _create_and_start(
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
        """Start this tree, made but not started (`Tree(spec)`): every child in spec
        order; return once all have started (or raise). A host that must hold the
        tree while it starts (its metrics read it) makes it first, then starts it."""
        if self._ref is not None:
            raise RuntimeError(f"tree {self.spec.id!r} was already started")
        self._ref = NannyActor._start_root(self.spec, self.context, self._plugins)
        return self

    start = _Start(_create_and_start, _start)
    """`Tree.start(spec, ...)` makes a tree and starts it; `tree.start()` starts one
    made with `Tree(spec, ...)` (RuntimeError if it was started already)."""

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

    # -- operating ----------------------------------------------------------------

    def update(
        self,
        spec_or_file: SupervisorSpec | str | os.PathLike[str],
        settle: float = UPDATE_SETTLE,
        *,
        vars: Mapping[str, object] | None = None,
    ) -> UpdateOutcome:
        """Bring the running tree to `spec_or_file` (a SupervisorSpec, or a TOML tree
        file loaded with `vars`), as `nannytree update` does (docs/update.md): only
        the children it changes, adds or removes are touched, the rest keep running.

        `settle`: seconds a replaced or added worker without a readiness of its own
        must stay up to count as started (0: once its process runs). Returns what
        was done (`applied`, `failed`, `skipped` steps, and the `message`); `spec`
        is then the tree as it runs. Raises UpdateRefused before anything stopped (an
        invalid file, another tree's id, a program or folder that is not there),
        or UpdateFailed once a step failed (its `outcome` says what was done)."""
        settle = check_settle(settle)
        old = self.spec
        if isinstance(spec_or_file, SupervisorSpec):
            new = spec_or_file
        else:
            from ._treefile import load_tree_file

            try:
                new = load_tree_file(os.fspath(spec_or_file), vars=vars)
            except ConfigError as e:
                raise self._updater.refuse(
                    old.id, f"the file is not valid, nothing changed: {e}"
                ) from None
        if new.id != old.id:
            raise self._updater.refuse(
                old.id, f"the new tree is {new.id!r}, not {old.id!r}; nothing changed"
            )
        try:
            outcome, self.spec = self._updater.update(old, new, settle)
        except Exception:
            if self._ref is not None:  # the tree as it now runs, for the next update
                with contextlib.suppress(Exception):
                    self.spec = read_live(self._ref, old, timeout=5.0).spec
            raise
        return outcome

    def restart_all(self) -> list[str]:
        """Restart every child of the root, as `nannytree restart all` does: all
        stopped, last started first, then all started again in start order, each
        from the spec it kept. Their ids, in start order."""
        return restart_all(self.ref)

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
