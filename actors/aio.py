"""asyncio for nannytree: await a tree's calls without blocking the event loop.

    async with AsyncNanny(spec) as nanny:
        children = await nanny.which_children()
        await nanny.restart_child("job")
        async for event in nanny.watch():      # the tree's events as they happen
            ...
    # stopped here; or wait for the tree to end by itself:
    reason = await nanny.finished()

A call to a nanny is short and waits in a small thread pool of the tree's own.
Waits for events (`wait_for`, `finished`, `watch`) take no thread at all: a
subscription to the tree's EventLog feeds the loop with `call_soon_threadsafe`,
so they can be cancelled (`asyncio.wait_for(..., 0.2)`) and never hold the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

import pykka

from supervision import (
    UPDATE_SETTLE,
    AnySpec,
    ChildCounts,
    ChildInfo,
    Event,
    EventKind,
    ExitReason,
    SupervisorSpec,
    UpdateOutcome,
)

from ._shell._api import TreeNode
from ._shell._event_log import EventLog
from ._shell._nanny import NannyActor
from ._tree import Tree

T = TypeVar("T")
WATCH_QUEUE = 10_000  # events a slow `async for` may fall behind before losing some


class AsyncNanny:
    """A tree driven from asyncio. Start it with `await start()` or `async with`."""

    def __init__(self, spec: SupervisorSpec, *, max_workers: int = 4) -> None:
        self.spec = spec
        self.tree: Tree | None = None
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix=f"nannytree-{spec.id}")

    @property
    def ref(self) -> pykka.ActorRef[NannyActor] | None:
        return self.tree.ref if self.tree is not None else None

    @property
    def _log(self) -> EventLog:
        if self.tree is None:
            raise RuntimeError("the tree is not started; await start() first")
        return self.tree.log

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    async def _call(self, method: str, *args: Any) -> Any:
        if self.tree is None:
            raise RuntimeError("the tree is not started; await start() first")
        future = getattr(self.tree.nanny, method)(*args)
        return await self._run(future.get)

    # -- life cycle --

    async def start(self) -> AsyncNanny:
        self.tree = await self._run(Tree.start, self.spec)
        return self

    async def stop(self) -> None:
        if self.tree is not None:
            await self._run(self.tree.stop)
        self._pool.shutdown(wait=False)

    async def __aenter__(self) -> AsyncNanny:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- waiting, on the loop --

    def _subscribe(self, log: EventLog) -> tuple[asyncio.Queue[Event], Callable[[], None]]:
        """New events of `log`, delivered to this loop; returns (queue, unsubscribe)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event] = asyncio.Queue(WATCH_QUEUE)

        def put(event: Event) -> None:
            if not queue.full():
                queue.put_nowait(event)

        def deliver(event: Event) -> None:  # on the log's listener thread
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(put, event)

        return queue, log.subscribe(deliver)

    async def wait_for(
        self, predicate: Callable[[Event], bool], timeout: float | None = None
    ) -> Event:
        """The first event of the tree that matches `predicate`, within `timeout` s
        (TimeoutError after). Cancellable; takes no thread while it waits."""
        log = self._log
        queue, unsubscribe = self._subscribe(log)
        try:
            for event in log.snapshot():  # after subscribing: nothing falls between
                if predicate(event):
                    return event

            async def first() -> Event:
                while True:
                    event = await queue.get()
                    if predicate(event):
                        return event

            try:
                return await asyncio.wait_for(first(), timeout)
            except TimeoutError:
                raise TimeoutError(f"no matching event within {timeout}s") from None
        finally:
            unsubscribe()

    async def watch(self, *, backlog: bool = False) -> AsyncIterator[Event]:
        """The tree's events as they happen (after the past ones, with `backlog`),
        until the tree has stopped: `async for event in nanny.watch(): ...`"""
        log = self._log
        queue, unsubscribe = self._subscribe(log)
        try:
            seen = log.snapshot()
            if backlog:
                for event in seen:
                    yield event
            known = {id(e) for e in seen[-1000:]}
            while True:
                event = await queue.get()
                if id(event) in known:
                    continue
                yield event
                if self._is_tree_end(event):
                    return
        finally:
            unsubscribe()

    def _is_tree_end(self, event: Event) -> bool:
        return event.context is EventKind.SUPERVISOR_STOPPED and event.supervisor == self.spec.id

    async def finished(self) -> ExitReason | None:
        """Wait until the tree has ended (given up, or stopped); its exit reason."""
        if self.tree is None:
            raise RuntimeError("the tree is not started; await start() first")
        tree = self.tree
        if not tree.alive:
            return tree.finished()
        queue, unsubscribe = self._subscribe(tree.log)
        try:
            while tree.alive:
                # Woken by the root's last event; the tree's end follows it closely,
                # so a short timeout covers the gap without a thread.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(queue.get(), 0.05)
            return tree.finished()
        finally:
            unsubscribe()

    # -- the API: each call of SupervisorAPI (actors/_shell/_api.py), awaited --
    # (tests/live/test_supervisor_api.py holds each twin to the Protocol's parameters and answer.)

    async def which_children(self) -> list[ChildInfo]:
        return await self._call("which_children")  # type: ignore[no-any-return]

    async def which_child(self, key: str | int) -> ChildInfo:
        return await self._call("which_child", key)  # type: ignore[no-any-return]

    async def which_tree(self) -> list[TreeNode]:
        return await self._call("which_tree")  # type: ignore[no-any-return]

    async def count_children(self) -> ChildCounts:
        return await self._call("count_children")  # type: ignore[no-any-return]

    async def get_childspec(self, key: str | int) -> AnySpec:
        return await self._call("get_childspec", key)  # type: ignore[no-any-return]

    async def which_childspecs(self) -> list[tuple[ChildInfo, AnySpec]]:
        return await self._call("which_childspecs")  # type: ignore[no-any-return]

    async def own_spec(self) -> SupervisorSpec:
        return await self._call("own_spec")  # type: ignore[no-any-return]

    async def child_nanny(self, key: str) -> pykka.ActorRef[Any]:
        return await self._call("child_nanny", key)  # type: ignore[no-any-return]

    async def child_status(self, key: str | int) -> str:
        return await self._call("child_status", key)  # type: ignore[no-any-return]

    async def events(self) -> list[Event]:
        """The tree's events so far (also after it ended)."""
        return self._log.snapshot()

    async def event_log(self) -> EventLog:
        """The tree's live EventLog (also after it ended)."""
        return self._log

    async def start_child(self, spec_or_args: Any = None) -> ChildInfo:
        return await self._call("start_child", spec_or_args)  # type: ignore[no-any-return]

    async def terminate_child(self, key: str | int, with_dependents: bool = False) -> None:
        await self._call("terminate_child", key, with_dependents)

    async def restart_child(self, key: str) -> ChildInfo:
        return await self._call("restart_child", key)  # type: ignore[no-any-return]

    async def delete_child(self, key: str) -> None:
        await self._call("delete_child", key)

    async def reset_restarts(self, key: str | None = None) -> int:
        return await self._call("reset_restarts", key)  # type: ignore[no-any-return]

    async def replace_child(self, key: str, spec: AnySpec, settle: float = 0.0) -> ChildInfo:
        return await self._call("replace_child", key, spec, settle)  # type: ignore[no-any-return]

    async def store_childspec(self, key: str, spec: AnySpec) -> None:
        await self._call("store_childspec", key, spec)

    async def change_settings(self, spec: SupervisorSpec) -> None:
        await self._call("change_settings", spec)

    async def insert_child(
        self, spec: AnySpec, after: str | None, settle: float = 0.0
    ) -> ChildInfo:
        return await self._call("insert_child", spec, after, settle)  # type: ignore[no-any-return]

    async def move_child(self, key: str, after: str | None) -> None:
        await self._call("move_child", key, after)

    async def pause_child(self, key: str) -> None:
        await self._call("pause_child", key)

    async def resume_child(self, key: str) -> None:
        await self._call("resume_child", key)

    async def signal_child(self, key: str, sig: int | str) -> None:
        await self._call("signal_child", key, sig)

    async def reload_child(self, key: str) -> None:
        await self._call("reload_child", key)

    async def read_output(self, key: str, stream: str = "stderr", previous: bool = False) -> str:
        return await self._call("read_output", key, stream, previous)  # type: ignore[no-any-return]

    # -- operating --

    async def update(
        self,
        spec_or_file: SupervisorSpec | str | os.PathLike[str],
        settle: float = UPDATE_SETTLE,
        *,
        vars: Mapping[str, object] | None = None,
    ) -> UpdateOutcome:
        """`Tree.update`, awaited in the tree's pool: bring the running tree to the
        new spec (or file), touching only what it changes."""
        tree = self._started()
        call = functools.partial(tree.update, spec_or_file, settle, vars=vars)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    async def restart_all(self) -> list[str]:
        """`Tree.restart_all`, awaited in the tree's pool; the ids restarted."""
        tree = self._started()
        return await asyncio.get_running_loop().run_in_executor(self._pool, tree.restart_all)

    def _started(self) -> Tree:
        if self.tree is None:
            raise RuntimeError("the tree is not started; await start() first")
        return self.tree
