"""asyncio waits take no thread and can be cancelled; events with `async for` (issue 15)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from actors import aio, testing
from supervision import ChildSpec, EventKind, ExitKind, SupervisorSpec


def _spec() -> SupervisorSpec:
    return SupervisorSpec(
        id="root",
        intensity=5,
        children=[ChildSpec(id="a", target=testing.ready_after, args=(0,), ready="notify")],
    )


def test_cancelled_waits_hold_no_thread_and_no_subscription():
    async def main() -> tuple[list[str], int, int]:
        async with aio.AsyncNanny(_spec(), max_workers=1) as nanny:
            log = nanny.tree.log
            before = len(log._subscriptions)
            never = [
                asyncio.create_task(
                    asyncio.wait_for(nanny.wait_for(lambda e: e.detail == "never", 30), 0.2)
                )
                for _ in range(4)
            ]
            for task in never:
                with contextlib.suppress(TimeoutError):
                    await task
            # The pool's only thread is free: with a thread per wait, this would
            # queue behind four 30 s waits, far past the guard.
            ids = [c.id for c in await asyncio.wait_for(nanny.which_children(), 10)]
            return ids, before, len(log._subscriptions)

    ids, before, after = asyncio.run(main())
    assert ids == ["a"]
    assert after == before  # each cancelled wait unsubscribed


def test_wait_for_finds_past_and_future_events_and_times_out():
    async def main() -> None:
        async with aio.AsyncNanny(_spec()) as nanny:
            started = await nanny.wait_for(
                lambda e: e.context is EventKind.CHILD_STARTED and e.offender == "a", 10
            )
            os.kill(started.pid, signal.SIGKILL)
            again = await nanny.wait_for(
                lambda e: e.context is EventKind.CHILD_STARTED and e.pid != started.pid, 10
            )
            assert again.offender == "a"
            try:
                await nanny.wait_for(lambda e: False, 0.1)
            except TimeoutError as e:
                assert "within 0.1s" in str(e)
            else:
                raise AssertionError("no TimeoutError")

    asyncio.run(main())


def test_events_with_async_for_until_the_tree_ends():
    async def main() -> list[tuple[str, str | None]]:
        nanny = await aio.AsyncNanny(_spec()).start()
        seen: list[tuple[str, str | None]] = []

        async def consume() -> None:
            async for event in nanny.watch():
                seen.append((event.context.value, event.offender))

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0)  # let it subscribe
        pid = (await nanny.which_child("a")).pid
        os.kill(pid, signal.SIGKILL)
        await nanny.wait_for(lambda e: e.context is EventKind.CHILD_STARTED and e.pid != pid, 10)
        await nanny.stop()
        await asyncio.wait_for(consumer, 10)  # ends with the tree
        reason = await nanny.finished()
        assert reason is not None and reason.kind is ExitKind.SHUTDOWN
        return seen

    seen = asyncio.run(main())
    assert ("child_exited", "a") in seen and ("child_started", "a") in seen
    assert seen[-1] == ("supervisor_stopped", None)
