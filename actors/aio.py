"""asyncio for nannytree: await a tree's calls without blocking the event loop.

pykka's futures block the thread that awaits them; here each call waits in a
small thread pool of the tree's own, so the loop keeps running:

    async with AsyncNanny(spec) as nanny:
        children = await nanny.which_children()
        await nanny.restart_child("job")
    # stopped here; or wait for the tree to end by itself:
    reason = await nanny.finished()
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar

import pykka

from supervision import (
    AnySpec,
    ChildCounts,
    ChildInfo,
    Event,
    EventKind,
    ExitReason,
    SupervisorSpec,
)

from ._events import EventLog
from ._nanny import NannyActor, TreeNode

T = TypeVar("T")


class AsyncNanny:
    """A tree driven from asyncio. Start it with `await start()` or `async with`."""

    def __init__(self, spec: SupervisorSpec, *, max_workers: int = 4) -> None:
        self.spec = spec
        self.ref: pykka.ActorRef[NannyActor] | None = None
        self._log: EventLog | None = None
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix=f"nannytree-{spec.id}")

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    async def _call(self, method: str, *args: Any) -> Any:
        if self.ref is None:
            raise RuntimeError("the tree is not started; await start() first")
        future = getattr(self.ref.proxy(), method)(*args)
        return await self._run(future.get)

    # -- life cycle --

    async def start(self) -> AsyncNanny:
        self.ref = await self._run(NannyActor.start, self.spec)
        self._log = await self._call("event_log")
        return self

    async def stop(self) -> None:
        if self.ref is not None:
            await self._run(self.ref.stop)
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

    async def finished(self) -> ExitReason | None:
        """Wait until the tree has ended (given up, or stopped); its exit reason."""
        if self.ref is None or self._log is None:
            raise RuntimeError("the tree is not started; await start() first")
        if not self.ref.actor_stopped.is_set():
            await self._run(self.ref.actor_stopped.wait)
        for event in reversed(self._log.snapshot()):
            if event.context is EventKind.SUPERVISOR_STOPPED and event.supervisor == self.spec.id:
                return event.reason
        return None

    async def wait_for(self, predicate: Callable[[Event], bool], timeout: float) -> Event:
        """The first event of the tree that matches `predicate`, within `timeout` s."""
        if self._log is None:
            raise RuntimeError("the tree is not started; await start() first")
        return await self._run(self._log.wait_for, predicate, timeout)

    # -- the API --

    async def which_children(self) -> list[ChildInfo]:
        return await self._call("which_children")  # type: ignore[no-any-return]

    async def which_tree(self) -> list[TreeNode]:
        return await self._call("which_tree")  # type: ignore[no-any-return]

    async def which_child(self, key: str | int) -> ChildInfo:
        return await self._call("which_child", key)  # type: ignore[no-any-return]

    async def count_children(self) -> ChildCounts:
        return await self._call("count_children")  # type: ignore[no-any-return]

    async def get_childspec(self, key: str | int) -> AnySpec:
        return await self._call("get_childspec", key)  # type: ignore[no-any-return]

    async def start_child(self, spec_or_args: Any = None) -> ChildInfo:
        return await self._call("start_child", spec_or_args)  # type: ignore[no-any-return]

    async def terminate_child(self, key: str | int) -> None:
        await self._call("terminate_child", key)

    async def restart_child(self, key: str) -> ChildInfo:
        return await self._call("restart_child", key)  # type: ignore[no-any-return]

    async def delete_child(self, key: str) -> None:
        await self._call("delete_child", key)

    async def pause_child(self, key: str) -> None:
        await self._call("pause_child", key)

    async def resume_child(self, key: str) -> None:
        await self._call("resume_child", key)

    async def signal_child(self, key: str, sig: int) -> None:
        await self._call("signal_child", key, sig)

    async def read_output(self, key: str, stream: str = "stderr") -> str:
        return await self._call("read_output", key, stream)  # type: ignore[no-any-return]

    async def events(self) -> list[Event]:
        return await self._call("events")  # type: ignore[no-any-return]
