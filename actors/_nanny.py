"""NannyActor: one supervisor. Executes the pure decision core's actions on
live actors and processes."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pykka

from supervision import (
    Action,
    AnySpec,
    ChildCounts,
    ChildInfo,
    ChildNotRunning,
    ChildSpec,
    Event,
    EventKind,
    Exit,
    ExitKind,
    ExitReason,
    NannyError,
    Reply,
    Report,
    ScheduleRetry,
    Shutdown,
    StartChild,
    StartError,
    Supervisor,
    SupervisorSpec,
    TerminateChild,
    TerminateChildren,
)

from ._events import EventLog
from ._messages import (
    ChildExited,
    InitTree,
    Pause,
    ReadOutput,
    Resume,
    RetryRestart,
    ShutdownTree,
    Signal,
    Start,
    Started,
    Stop,
)
from ._tree import TreeContext
from ._worker import WorkerActor

log = logging.getLogger("nannytree")


class NannyPlugin:
    """Extends a tree, as dask's NannyPlugin: `setup` once the tree has started
    (in the thread that started it), `teardown` once it has stopped (with the
    tree's exit reason). Override either; pass instances to NannyActor.start(plugins=...)."""

    def setup(self, ref: pykka.ActorRef[NannyActor], log: EventLog) -> None:
        """Called after every child started. Raising stops the tree and fails the start."""

    def teardown(self, log: EventLog, reason: ExitReason | None) -> None:
        """Called after every child stopped. Exceptions are logged, never raised."""


@dataclass(frozen=True)
class TreeNode:
    """One child in which_tree(): its info, its path, and its children if a supervisor."""

    info: ChildInfo
    path: str
    children: tuple[TreeNode, ...] = ()


@dataclass(frozen=True)
class ParentLink:
    """How a nested nanny reaches its parent: the parent's ref, its own path, incarnation."""

    ref: pykka.ActorRef[Any]
    name: str
    incarnation: int


_roots: weakref.WeakSet[NannyActor] = weakref.WeakSet()


def _crash_reason(e: BaseException) -> ExitReason:
    return ExitReason(ExitKind.ACTOR_CRASHED, exc_type=type(e).__name__, message=str(e))


class NannyActor(pykka.ThreadingActor):
    """A supervisor of OS processes, with OTP's strategies, intensity and API.

    `NannyActor.start(spec)` blocks until every child has started (or raises
    SupervisorStartError, with the started ones stopped again); `ref.stop()`
    stops the whole tree in reverse start order. The OTP API is on the proxy:
    `ref.proxy().which_children().get()`.
    """

    use_daemon_thread = True

    def __init__(
        self,
        spec: SupervisorSpec,
        context: TreeContext,
        parent: ParentLink | None = None,
        plugins: Sequence[NannyPlugin] = (),
    ) -> None:
        super().__init__()
        self._spec = spec
        self._context = context
        self._parent = parent.ref if parent is not None else None
        self._incarnation = parent.incarnation if parent is not None else 0
        self._core = Supervisor(spec, parent.name if parent is not None else None)
        assert context.launcher is not None
        self._launcher = context.launcher
        # A root tree ends its context (launcher, memory watch, timer) when it stops.
        self._is_root = parent is None
        self._log = context.log
        self._memory = context.memory
        self._scheduler = context.scheduler
        self._workers: dict[str, pykka.ActorRef[WorkerActor]] = {}
        self._nested: dict[str, pykka.ActorRef[NannyActor]] = {}
        self._nested_incarnations: dict[str, int] = {}
        self._paused: set[tuple[str, int]] = set()
        self._exit_requested = False
        self._init_error: NannyError | None = None
        self._exit_reason: ExitReason | None = None
        self._plugins = list(plugins)
        self._to_log: list[Event] = []
        self._deadline: float | None = None  # set by a parent's ShutdownTree

    @classmethod
    def start(
        cls,
        spec: SupervisorSpec,
        *,
        plugins: Sequence[NannyPlugin] = (),
        log: EventLog | None = None,
    ) -> pykka.ActorRef[NannyActor]:
        """Start a tree and all its children, in order; return its root's ActorRef.

        The OTP-style entry point; `actors.Tree.start(spec)` returns a handle that
        also keeps the event log and the tree's exit reason.
        """
        from ._tree import Tree

        return Tree.start(spec, plugins=plugins, log=log).ref

    @classmethod
    def _start_root(
        cls, spec: SupervisorSpec, context: TreeContext, plugins: Sequence[NannyPlugin]
    ) -> pykka.ActorRef[NannyActor]:
        context.open()
        try:
            ref = super().start(spec, context, None, plugins)
        except BaseException:
            context.end(None)
            raise
        cls._init(ref, plugins, context.log)
        return ref

    @classmethod
    def start_nested(
        cls, spec: SupervisorSpec, context: TreeContext, parent: ParentLink
    ) -> pykka.ActorRef[NannyActor]:
        """A nested supervisor of a running tree, started with all its children."""
        ref = super().start(spec, context, parent)
        cls._init(ref, (), context.log)
        return ref

    @staticmethod
    def _init(
        ref: pykka.ActorRef[NannyActor], plugins: Sequence[NannyPlugin], log: EventLog
    ) -> None:
        try:
            ref.ask(InitTree())
            for plugin in plugins:
                plugin.setup(ref, log)
        except BaseException:
            ref.stop()
            raise

    # -- the OTP API (call through the proxy) ---------------------------------

    def which_children(self) -> list[ChildInfo]:
        """Children in OTP's order: reverse start order."""
        return [self._overlay(info) for info in self._core.which_children()]

    def which_tree(self) -> list[TreeNode]:
        """The whole subtree, in start order: each child with its own children, if any."""
        nodes = []
        for info in self._core.children():
            path = f"{self._core.name}/{info.id}"
            nested = self._nested.get(info.id)
            below: list[TreeNode] = []
            if nested is not None and info.state == "running":
                with contextlib.suppress(pykka.ActorDeadError):
                    below = cast(list[TreeNode], nested.proxy().which_tree().get())
            nodes.append(TreeNode(self._overlay(info), path, tuple(below)))
        return nodes

    def child_nanny(self, key: str) -> pykka.ActorRef[NannyActor]:
        """The ActorRef of a running nested supervisor, to call its API directly."""
        info = self._core.which_child(key)
        nested = self._nested.get(info.id)
        if nested is None or info.state != "running":
            raise ChildNotRunning(self._core.name, info.id, "reach it as a running supervisor")
        return nested

    def which_child(self, key: str | int) -> ChildInfo:
        return self._overlay(self._core.which_child(key))

    def count_children(self) -> ChildCounts:
        return self._core.count_children()

    def get_childspec(self, key: str | int) -> AnySpec:
        return self._core.get_childspec(key)

    def start_child(self, spec_or_args: Any = None) -> ChildInfo:
        """Add a child at the end and start it (simple_one_for_one: extra args)."""
        return self._call(self._core.start_child(spec_or_args, time.monotonic()))  # type: ignore[no-any-return]

    def terminate_child(self, key: str | int) -> None:
        self._call(self._core.terminate_child(key, time.monotonic()))

    def restart_child(self, key: str) -> ChildInfo:
        return self._call(self._core.restart_child(key, time.monotonic()))  # type: ignore[no-any-return]

    def delete_child(self, key: str) -> None:
        self._call(self._core.delete_child(key, time.monotonic()))

    def pause_child(self, key: str) -> None:
        """SIGSTOP the child's process group; it shows as "paused"."""
        info = self._core.which_child(key)
        self._ask_worker(info, Pause(), "pause it")
        self._paused.add((info.id, info.incarnation))

    def resume_child(self, key: str) -> None:
        info = self._core.which_child(key)
        self._ask_worker(info, Resume(), "resume it")
        self._paused.discard((info.id, info.incarnation))

    def signal_child(self, key: str, sig: int) -> None:
        info = self._core.which_child(key)
        self._ask_worker(info, Signal(int(sig)), "send a signal to it")

    def read_output(self, key: str, stream: str = "stderr", previous: bool = False) -> str:
        """The last 64 KiB a child wrote to a captured stream ("stdout" or "stderr").

        Its current process's, or its last one's once it exited; with `previous`,
        the run before that (as `kubectl logs --previous`). Empty unless the spec
        says stdout/stderr="capture".
        """
        if stream not in ("stdout", "stderr"):
            raise ValueError(f'stream must be "stdout" or "stderr", not {stream!r}')
        info = self._core.which_child(key)
        worker = self._workers.get(info.id)
        if worker is None:
            return ""
        return cast(str, worker.ask(ReadOutput(1 if stream == "stdout" else 2, previous)))

    def events(self) -> list[Event]:
        """The tree's lifecycle events, oldest first."""
        return self._log.snapshot()

    def event_log(self) -> EventLog:
        """The tree's live EventLog (thread-safe: wait on it from any thread)."""
        return self._log

    # -- messages ---------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        now = time.monotonic()
        if isinstance(message, ChildExited):
            self._paused = {p for p in self._paused if p[0] != message.child_id}
            self._run(
                self._core.child_exited(message.child_id, message.incarnation, message.reason, now)
            )
        elif isinstance(message, RetryRestart):
            self._run(self._core.retry(message.child_id, now))
        elif isinstance(message, InitTree):
            self._run(self._core.start(now))
            if self._init_error is not None:
                raise self._init_error
        elif isinstance(message, ShutdownTree):
            self._exit_requested = True
            self._deadline = message.deadline
            self._run(self._core.shutdown(now))
            return self._exit_reason
        else:
            raise TypeError(f"nanny {self._core.name!r} got an unknown message {message!r}")
        return None

    def on_start(self) -> None:
        if self._is_root:
            _roots.add(self)

    def on_stop(self) -> None:
        if self._core.mode in ("new", "running"):
            self._exit_requested = True
            self._run(self._core.shutdown(time.monotonic()))
        self._cleanup()

    def on_failure(self, *exc_info: Any) -> None:
        # A bug in the nanny must not orphan its subtree: stop it, report upward.
        try:
            self._stop_all_children()
        finally:
            self._cleanup()
            if not self._exit_requested:
                self._tell_parent(_crash_reason(exc_info[1]))

    # -- executing the core's actions ---------------------------------------------

    def _run(self, actions: list[Action]) -> Reply | None:
        reply: Reply | None = None
        queue = deque(actions)
        while queue:
            action = queue.popleft()
            if isinstance(action, Report):
                self._record(action.event)
            elif isinstance(action, StartChild):
                queue.extend(self._start_child(action.child_id, action.spec))
            elif isinstance(action, TerminateChild):
                reason = self._terminate(action.child_id, action.spec.shutdown)
                queue.extend(self._core.terminated(action.child_id, reason, time.monotonic()))
            elif isinstance(action, TerminateChildren):
                results = self._terminate_many(action.child_ids, action.shutdown)
                queue.extend(self._core.terminated_all(results, time.monotonic()))
            elif isinstance(action, ScheduleRetry):
                if action.delay > 0:
                    self._scheduler.call_later(action.delay, self._retry_later(action.child_id))
                else:
                    self.actor_ref.tell(RetryRestart(action.child_id))
            elif isinstance(action, Reply):
                reply = action
            elif isinstance(action, Exit):
                self._exit(action)
        self._log_events()
        return reply

    def _retry_later(self, child_id: str) -> Callable[[], None]:
        ref = self.actor_ref

        def retry() -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(RetryRestart(child_id))

        return retry

    def _call(self, actions: list[Action]) -> Any:
        reply = self._run(actions)
        if reply is None:
            raise RuntimeError(f"nanny {self._core.name!r}: the call produced no reply")
        if reply.error is not None:
            raise reply.error
        return reply.value

    def _start_child(self, child_id: str, spec: AnySpec) -> list[Action]:
        if isinstance(spec, ChildSpec):
            worker = self._workers.get(child_id)
            if worker is None or not worker.is_alive():
                worker = WorkerActor.start(
                    spec, self._launcher, self.actor_ref, self._core.name, self._memory
                )
                self._workers[child_id] = worker
            try:
                started = cast(Started, worker.ask(Start()))
            except StartError as e:
                return self._core.start_failed(child_id, e.reason, time.monotonic())
            except Exception as e:
                return self._core.start_failed(child_id, _crash_reason(e), time.monotonic())
            return self._core.started(child_id, started.pid, started.incarnation, time.monotonic())
        incarnation = self._nested_incarnations.get(child_id, 0) + 1
        self._nested_incarnations[child_id] = incarnation
        try:
            link = ParentLink(self.actor_ref, f"{self._core.name}/{child_id}", incarnation)
            nested = NannyActor.start_nested(spec, self._context, link)
        except StartError as e:
            return self._core.start_failed(child_id, e.reason, time.monotonic())
        except Exception as e:
            return self._core.start_failed(child_id, _crash_reason(e), time.monotonic())
        self._nested[child_id] = nested
        return self._core.started(child_id, None, incarnation, time.monotonic())

    def _deadline_for(self, shutdown: Shutdown) -> float | None:
        """When a subtree with this shutdown must be gone, within our own deadline."""
        own = None
        if shutdown == "brutal_kill":
            own = time.monotonic()
        elif shutdown != "infinity":
            own = time.monotonic() + float(shutdown)
        if own is None or self._deadline is None:
            return own if own is not None else self._deadline
        return min(own, self._deadline)

    def _terminate(self, child_id: str, shutdown: Shutdown) -> ExitReason:
        try:
            if child_id in self._nested:
                nested = self._nested.pop(child_id)
                reason = cast(
                    ExitReason | None, nested.ask(ShutdownTree(self._deadline_for(shutdown)))
                )
                return reason or ExitReason.shutdown()
            return cast(ExitReason, self._workers[child_id].ask(Stop(self._deadline)))
        except pykka.ActorDeadError:
            return ExitReason.shutdown("already stopped")
        except Exception as e:
            return _crash_reason(e)

    def _terminate_many(
        self, child_ids: tuple[str, ...], shutdown: Shutdown
    ) -> dict[str, ExitReason]:
        # One shared timer (OTP 5.4): every child is asked at once, with one deadline.
        deadline = self._deadline_for(shutdown)
        futures = {}
        for child_id in child_ids:
            if child_id in self._nested:
                message: Any = ShutdownTree(deadline)
                futures[child_id] = self._nested.pop(child_id).ask(message, block=False)
            else:
                futures[child_id] = self._workers[child_id].ask(Stop(deadline), block=False)
        results: dict[str, ExitReason] = {}
        for child_id, future in futures.items():
            try:
                results[child_id] = future.get() or ExitReason.shutdown()
            except pykka.ActorDeadError:
                results[child_id] = ExitReason.shutdown("already stopped")
            except Exception as e:
                results[child_id] = _crash_reason(e)
        return results

    def _exit(self, action: Exit) -> None:
        self._exit_reason = action.reason
        self._stop_workers()
        if action.error is not None:
            self._init_error = action.error
        elif not self._exit_requested:
            self._tell_parent(action.reason)
        self.actor_ref.stop(block=False)  # a no-op when already stopping (in on_stop)

    def _record(self, event: Event) -> None:
        self._log.append(event)
        if event.context is EventKind.CHILD_DELETED and event.offender in self._workers:
            self._workers.pop(event.offender).stop()
        self._to_log.append(event)

    def _log_events(self) -> None:
        # Logged once the actions are carried out: formatting stays off the restart path.
        events, self._to_log = self._to_log, []
        for event in events:
            # A supervisor giving up or a child failing to start is worth a warning; a
            # crash is routine (it is restarted), so INFO: a crash storm must not be
            # a stderr storm. Every event is in the EventLog regardless.
            if event.context in (EventKind.START_FAILED, EventKind.MAX_INTENSITY_REACHED):
                log.warning("%s", event)
            elif event.context is EventKind.CHILD_EXITED and log.isEnabledFor(logging.INFO):
                log.info("%s", event)
            elif log.isEnabledFor(logging.DEBUG):
                log.debug("%s", event)

    # -- helpers ------------------------------------------------------------------------

    def _overlay(self, info: ChildInfo) -> ChildInfo:
        if info.state == "running" and (info.id, info.incarnation) in self._paused:
            return dataclasses.replace(info, state="paused")
        return info

    def _ask_worker(self, info: ChildInfo, message: Any, what: str) -> Any:
        worker = self._workers.get(info.id)
        if info.type != "worker" or worker is None or info.state != "running":
            raise ChildNotRunning(self._core.name, info.id, what)
        return worker.ask(message)

    def _tell_parent(self, reason: ExitReason) -> None:
        if self._parent is None:
            return
        with contextlib.suppress(pykka.ActorDeadError):
            self._parent.tell(ChildExited(self._spec.id, self._incarnation, None, reason))

    def _stop_workers(self) -> None:
        for worker in self._workers.values():
            with contextlib.suppress(pykka.ActorDeadError):
                worker.stop()
        self._workers.clear()

    def _stop_all_children(self) -> None:
        for nested in self._nested.values():
            try:
                nested.ask(ShutdownTree())
            except Exception:
                log.exception("nanny %r: stopping a nested tree failed", self._core.name)
        self._nested.clear()
        self._stop_workers()

    def _cleanup(self) -> None:
        self._stop_workers()
        for plugin in self._plugins:
            try:
                plugin.teardown(self._log, self._exit_reason)
            except Exception:
                log.exception("nanny %r: plugin %r failed in teardown", self._core.name, plugin)
        self._plugins.clear()
        if self._is_root:
            self._context.end(self._exit_reason)
        _roots.discard(self)


@atexit.register
def _stop_roots() -> None:
    # Daemon actor threads would die mid-stop at exit: stop trees politely first.
    for nanny in list(_roots):
        try:
            nanny.actor_ref.stop(timeout=30)
        except Exception:
            log.exception("stopping tree %r at exit failed", nanny._core.name)
