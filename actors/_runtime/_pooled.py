"""Actors without a thread each: a mailbox that a shared pool of threads serves.

A pykka ThreadingActor keeps a thread for its whole life, so a tree of 10,000
children was 10,000 threads, and idle threads are not free: with 8,000 of them
in the host, each child's start took 1.1 ms longer and each stop 0.8 ms
(docs/scale.md). A `PooledActor`'s mailbox instead puts the actor on a shared
pool when a message arrives; a pool thread handles its messages one at a time,
in order, and moves on. An actor is never on two threads at once, so its
state is still touched by one thread at a time, as with pykka's own actors.

A handler that waits (a start waiting for its process, a kill for its report)
holds its pool thread: it waits inside `blocking()`, and if others' messages
are then waiting with no free thread, the pool starts one more. So a slow stop
never delays another child, and the number of threads follows the number of
actors busy at the same moment, not the number of actors. Threads beyond a
few retire after a while idle.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pykka

from ._actor_loop import LATER, answer_dead, current, handle, set_up, stop_fatally, teardown
from ._flag import Flag
from ._future import LightFuture

log = logging.getLogger("nannytree")

RUNNABLE = 2  # threads that run Python at once: more only fight over the GIL
KEEP = 2  # pool threads kept however long they are idle
IDLE_RETIRE = 5.0  # seconds an extra pool thread stays idle before it ends
BATCH = 32  # messages one actor handles before the others get a turn

__all__ = ["LATER", "PooledActor", "blocking", "pool_threads"]


class _Pool:
    """Threads that run tasks; more are started while others wait (`blocking`)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._tasks: deque[Callable[[], None]] = deque()
        self._idle: list[threading.Lock] = []  # one waker per idle thread, newest last
        self._threads = 0
        self._blocked = 0
        self._started = 0
        self._local = threading.local()

    @property
    def threads(self) -> int:
        return self._threads

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            self._tasks.append(task)
            if self._idle:
                self._idle.pop().release()
            elif self._threads - self._blocked < RUNNABLE:
                self._spawn()

    @contextlib.contextmanager
    def blocking(self) -> Iterator[None]:
        """Around a wait on a pool thread: others' work gets a thread meanwhile."""
        if getattr(self._local, "pool", None) is not self:
            yield
            return
        with self._lock:
            self._blocked += 1
            if self._tasks and not self._idle and self._threads - self._blocked < RUNNABLE:
                self._spawn()
        try:
            yield
        finally:
            with self._lock:
                self._blocked -= 1

    def _spawn(self) -> None:
        # Called with the lock held.
        self._threads += 1
        self._started += 1
        thread = threading.Thread(
            target=self._serve, name=f"{self._name}-{self._started}", daemon=True
        )
        thread.start()

    def _serve(self) -> None:
        self._local.pool = self
        waker = threading.Lock()
        waker.acquire()
        while True:
            with self._lock:
                task = self._tasks.popleft() if self._tasks else None
                if task is None:
                    self._idle.append(waker)
            if task is not None:
                try:
                    task()
                except BaseException:  # a task must never take a pool thread down
                    log.exception("a task on the %s pool failed", self._name)
                continue
            if waker.acquire(timeout=IDLE_RETIRE):
                continue
            with self._lock:
                if waker in self._idle:  # not woken: still idle
                    self._idle.remove(waker)
                    if self._threads > KEEP:
                        self._threads -= 1
                        return
                    continue
            waker.acquire()  # woken just as the wait ran out: take the wake-up


# Process-wide on purpose (actors/_runtime/__init__.py): every tree's workers share it.
_pool = _Pool("nannytree-worker")


def _after_fork_in_child() -> None:
    # The pool's threads are not in a forked child: start it afresh there.
    global _pool
    _pool = _Pool("nannytree-worker")


os.register_at_fork(after_in_child=_after_fork_in_child)


def blocking() -> contextlib.AbstractContextManager[None]:
    """Around a wait in a pooled actor's handler (a no-op on other threads)."""
    return _pool.blocking()


def pool_threads() -> int:
    """How many threads serve pooled actors now."""
    return _pool.threads


class _Mailbox:
    """A pykka inbox that schedules its actor on the pool when a message arrives."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Any] = deque()
        self._scheduled = True  # until the actor starts: messages wait for on_start
        self._closed = False
        self._actor: PooledActor | None = None
        self._set_up = False  # on_start has run (with the first message: no task of its own)

    def put(self, envelope: Any, /) -> None:
        with self._lock:
            closed = self._closed
            if not closed:
                self._queue.append(envelope)
                if self._scheduled:
                    return
                self._scheduled = True
        if closed:
            answer_dead(envelope)
            return
        _pool.submit(self._run)

    def get(self) -> Any:
        with self._lock:
            return self._queue.popleft()

    def empty(self) -> bool:
        with self._lock:
            return not self._queue

    def put_back(self, envelopes: list[Any]) -> None:
        """Messages held while the actor finished something: first again, in order."""
        with self._lock:
            self._queue.extendleft(reversed(envelopes))
            if self._scheduled or self._closed:
                return
            self._scheduled = True
        _pool.submit(self._run)

    def start(self, actor: PooledActor) -> None:
        # on_start runs on the pool right before the first message, not as a task of
        # its own: a tree's start makes thousands of actors, each told at once.
        self._actor = actor
        with self._lock:
            if not self._queue:
                self._scheduled = False
                return
        _pool.submit(self._run)

    def _run(self) -> None:
        actor = self._actor
        assert actor is not None
        if not self._set_up:
            self._set_up = True
            set_up(actor, actor.on_fatal)
        for _ in range(BATCH):
            if actor.actor_stopped.is_set():
                self._close(actor)
                return
            with self._lock:
                if not self._queue:
                    self._scheduled = False
                    return
                envelope = self._queue.popleft()
            try:
                actor._handle_envelope(envelope)
            except BaseException:  # a bug past pykka's own handling: never wedge the mailbox
                log.exception("actor %s failed handling %r", actor, envelope.message)
        if actor.actor_stopped.is_set():
            self._close(actor)
            return
        _pool.submit(self._run)  # the others' turn; this actor's messages stay in order

    def _close(self, actor: PooledActor) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        held, actor._held = actor._held or [], None
        teardown(actor, held)


class PooledActor(pykka.Actor):
    """A pykka actor served by the shared pool instead of a thread of its own.

    A handler that waits (for a process, a reply) does so inside `blocking()`,
    which lets the pool start another thread if others' messages are waiting.

    A handler that must wait for another message to answer (a stop waits for
    the exit) need not hold a thread: it keeps `take_reply()` and returns
    `LATER`; until it calls `release_held()`, messages it `holds` are set aside.
    """

    _reply: pykka.Future[Any] | None = None
    _held: list[Any] | None = None

    actor_inbox: _Mailbox

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # pykka's actor_stopped, shared with the ref, as a Flag: no Event per actor.
        stopped = Flag()
        self.actor_stopped = self.actor_ref.actor_stopped = stopped  # type: ignore[assignment]
        self._above = current()  # told Fatal if a handler fails with a BaseException

    @staticmethod
    def _create_actor_inbox() -> Any:
        return _Mailbox()

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        return LightFuture()

    def _start_actor_loop(self) -> None:
        self.actor_inbox.start(self)

    def holds(self, message: Any) -> bool:
        """Whether a message waits until `release_held()`; ask only while holding."""
        return False

    def take_reply(self) -> pykka.Future[Any] | None:
        """The current message's reply, to be set later (the handler returns LATER)."""
        reply, self._reply = self._reply, None
        return reply

    def hold(self) -> None:
        """From now on, messages `holds` accepts wait for `release_held()`."""
        self._held = []

    def release_held(self) -> None:
        held, self._held = self._held, None
        if held:
            self.actor_inbox.put_back(held)

    def _handle_envelope(self, envelope: Any) -> None:
        if self._held is not None and self.holds(envelope.message):
            self._held.append(envelope)
            return
        self._reply = envelope.reply_to
        handle(self, envelope, LATER, self.on_fatal)

    def on_fatal(self, error: BaseException) -> None:
        """A BaseException in a handler (pykka: stop every actor): stop, tell the actor above."""
        stop_fatally(self, self._above, error)
