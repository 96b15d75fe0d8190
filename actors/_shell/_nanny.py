"""NannyActor: one supervisor. Executes the pure decision core's actions on
live actors and processes.

A nanny never blocks on a child's start: it tells the worker (or nested nanny)
to start, and goes on reading its mailbox. While the core waits for that
answer, read-only calls (which_children, which_tree, ...) are answered at once
from the core's state (the child shows "starting"); every other message waits
in a deferred queue, in order, until the core is idle again, so the core sees
its inputs one at a time, as OTP's gen_server does. Stops are asked and waited
for: each is bounded by the child's shutdown, and a stop that the launcher
cannot confirm is confirmed by the OS (see WorkerActor).

One concept, as OTP's supervisor.erl is one module: the actor that runs one
`Supervisor`: its mailbox, the API it answers (`SupervisorAPI`, `_api.py`), each
action of the core carried out (`_run`), and its life cycle. Each other concern
is an object it owns: its children's actors (`_children.py`), its starts
(`_start_runs.py`), its stops (`_stop_runs.py`), what it lets its launcher do
ahead (`_ahead.py`), what it observes (`_observe.py`). Beside it: the tree's
resources (`_context.py`), the actor loop (actors/_runtime/_actor_loop.py).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pykka
from pykka import messages as pykka_messages

from supervision import (
    Action,
    Exit,
    ExitKind,
    ExitReason,
    NannyError,
    PauseChild,
    RemoveChild,
    Reply,
    Report,
    ResumeChild,
    ScheduleRetry,
    StartChild,
    Supervisor,
    SupervisorSpec,
    TerminateChild,
    TerminateChildren,
)

from .._runtime._actor_loop import Fatal, dead, handle, serving, teardown, tell_quietly
from ._ahead import AheadLedger
from ._api import READ_ONLY, SupervisorAPI
from ._api import TreeNode as TreeNode
from ._calls import SupervisorCalls
from ._children import ChildActors, crash_reason
from ._context import TreeContext
from ._event_log import EventLog
from ._messages import (
    ChildExited,
    ChildHealth,
    ChildNote,
    ChildStatus,
    InitTree,
    LauncherLost,
    RetryRestart,
    ShutdownTree,
    StartDone,
    StartFailed,
)
from ._observe import Observations, window_reader
from ._start_runs import ParentLink, Starts
from ._stop_runs import Stops

log = logging.getLogger("nannytree")

_LATER = object()  # a call whose answer comes once the core has carried it out


class NannyPlugin:
    """Extends a tree, as dask's NannyPlugin: `setup` once the tree has started
    (in the thread that started it), `teardown` once it has stopped (with the
    tree's exit reason). Override either; pass instances to NannyActor.start(plugins=...)."""

    def setup(self, ref: pykka.ActorRef[NannyActor], log: EventLog) -> None:
        """Called after every child started. Raising stops the tree and fails the start."""

    def teardown(self, log: EventLog, reason: ExitReason | None) -> None:
        """Called after every child stopped. Exceptions are logged, never raised."""


@dataclass
class _Life:
    """A nanny's life cycle: how its init is answered, and how it ends."""

    plugins: list[NannyPlugin] = field(default_factory=list)
    on_idle: Callable[[], None] | None = None  # init: answer once idle
    init_reply: Callable[[ExitReason, NannyError | None], None] | None = None
    exit_requested: bool = False  # its parent (or the tree's stop) asked it to end
    exit_reason: ExitReason | None = None


class NannyActor(SupervisorCalls, pykka.ThreadingActor):
    """A supervisor of OS processes, with OTP's strategies, intensity and API.

    `NannyActor.start(spec)` blocks until every child has started (or raises
    SupervisorStartError, with the started ones stopped again); `ref.stop()`
    stops the whole tree in reverse start order. The API (`SupervisorAPI`) is on
    the proxy: `ref.proxy().which_children().get()`.
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
        self._context = context
        # None: the root, which ends its context when it stops.
        self._parent = parent.ref if parent is not None else None
        self._incarnation = parent.incarnation if parent is not None else 0
        self._core = Supervisor(spec, parent.name if parent is not None else None)
        context.restart_windows[self._core.name] = window_reader(self._core)
        self._life = _Life(list(plugins))
        self._children = ChildActors(context, self._core.name)
        self._ahead = AheadLedger(self._core, context)
        self._starts = Starts(
            self._core, context, self._children, self._ahead, self.actor_ref, self.start_nested
        )
        self._stops = Stops(self._core, self._children, self._starts.next_token)
        self._observe = Observations(self._core, self._children, context.log)
        self._deferred: deque[Any] = deque()  # envelopes that wait for the core to be idle
        self._call: Any = None  # reply future of the call being carried out

    @classmethod
    def start(
        cls,
        spec: SupervisorSpec,
        *,
        plugins: Sequence[NannyPlugin] = (),
        log: EventLog | None = None,
        engine: Any = None,
    ) -> pykka.ActorRef[NannyActor]:
        """Start a tree and all its children, in order; return its root's ActorRef.

        The OTP-style entry point; `actors.Tree.start(spec)` returns a handle that
        also keeps the event log and the tree's exit reason. `engine` (e.g.
        `actors.ray.RayEngine()`) runs the subtrees that have a placement on other nodes.
        """
        start_tree = NannyActor._start_tree
        if start_tree is None:
            raise RuntimeError("import actors first: it composes how a tree starts")
        return start_tree(spec, plugins=plugins, log=log, engine=engine)

    # How a tree starts, installed by the composition root (actors/_tree.py), which
    # picks the spawner and the engine: the shell names no adapter.
    _start_tree: ClassVar[Callable[..., pykka.ActorRef[NannyActor]] | None] = None

    @staticmethod
    def compose(start_tree: Callable[..., pykka.ActorRef[NannyActor]]) -> None:
        """(The composition root.) How `NannyActor.start` starts a whole tree."""
        NannyActor._start_tree = start_tree

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
        context.root = ref
        try:
            ref.ask(InitTree(0))
            for plugin in plugins:
                plugin.setup(ref, context.log)
        except BaseException:
            ref.stop()
            raise
        return ref

    @classmethod
    def start_nested(
        cls, spec: SupervisorSpec, context: TreeContext, parent: ParentLink
    ) -> pykka.ActorRef[NannyActor]:
        """A nested supervisor's actor; it starts its children when told InitTree."""
        return super().start(spec, context, parent)

    # -- the mailbox ------------------------------------------------------------

    def _actor_loop_running(self) -> None:
        # pykka's loop, with one change: while the core waits for a start, only
        # answers and read-only calls are handled; the rest waits, in order.
        while not self.actor_stopped.is_set():
            if self._deferred and self._starts.pending is None:
                envelope = self._deferred.popleft()
            else:
                envelope = self.actor_inbox.get()
            if self._starts.pending is not None and not _answers_now(envelope.message):
                self._deferred.append(envelope)
                continue
            self._handle_envelope(envelope)

    def _handle_envelope(self, envelope: Any) -> None:
        message = envelope.message
        if isinstance(message, Fatal):
            with serving(self):  # a restart it causes makes actors below this one
                self._fatal_below(envelope)
            return
        mutating = isinstance(message, InitTree) or (
            isinstance(message, pykka_messages.ProxyCall) and message.attr_path[-1] not in READ_ONLY
        )
        if mutating and envelope.reply_to is not None:
            self._call = envelope.reply_to
        # pykka's loop body (actors/_runtime/_actor_loop.py); _LATER: when the core replies
        if handle(self, envelope, _LATER, self.on_fatal) and self._call is envelope.reply_to:
            self._call = None

    def _actor_loop_teardown(self) -> None:
        teardown(self, self._deferred)
        self._deferred.clear()
        call, self._call = self._call, None
        if call is not None:
            dead(call)

    def on_receive(self, message: Any) -> Any:
        now = time.monotonic()
        # The one place where the children's answers and exits reach the core.
        if isinstance(message, StartDone | StartFailed):
            self._on_answer(message, now)
        elif isinstance(message, ChildExited):
            self._ahead.count_ahead(message.respawned_by)
            worker = self._children.workers.get(message.child_id)
            if message.ahead and worker is not None:
                self._starts.born(message.child_id, message.ahead, worker)  # its next start
            self._observe.exited(message)  # before the core's answer: its status goes too
            exited = (message.child_id, message.incarnation, message.reason, now)
            self._run(self._core.child_exited(*exited, uptime=message.uptime))
        elif isinstance(message, ChildNote):
            self._ahead.count_ahead(message.respawned_by)
            if not self._starts.hold_note(message):
                self._observe.note(message, now)
        elif isinstance(message, ChildHealth):
            self._observe.health(message, now)
        elif isinstance(message, ChildStatus):
            self._observe.status(message)
        elif isinstance(message, RetryRestart):
            self._run(self._core.retry(message.child_id, now))
        elif isinstance(message, InitTree):
            return self._init(message, now)
        elif isinstance(message, ShutdownTree):
            self._life.exit_requested = True
            self._stops.deadline = message.deadline
            self._run(self._core.shutdown(now))
            return self._life.exit_reason
        elif isinstance(message, LauncherLost):
            if self._core.mode == "running":
                self._run(self._core.shutdown(now, message.reason))
        else:
            raise TypeError(f"nanny {self._core.name!r} got an unknown message {message!r}")
        return None

    def _on_answer(self, message: StartDone | StartFailed, now: float) -> None:
        ended = message.ended if isinstance(message, StartDone) else None
        if ended is not None:  # a one-shot step's exit, with its start's answer
            self._ahead.count_ahead(ended.respawned_by)
            self._observe.exited(ended)
        actions = self._starts.answer(message, now)
        if actions is not None:  # else a start sent ahead, kept until the core asks
            self._run(actions)

    # -- the life cycle -----------------------------------------------------------

    def _init(self, message: InitTree, now: float) -> Any:
        parent = self._parent
        life = self._life
        if parent is None:  # the root: asked by Tree.start; answered when all started
            call = self._call

            def answer_root(reason: ExitReason, error: NannyError | None) -> None:
                if error is not None:
                    call.set_exception(exc_info=(type(error), error, None))
                else:
                    call.set(None)
                self._call = None

            life.on_idle = lambda: answer_root(ExitReason.shutdown(), None)
            life.init_reply = answer_root
        else:
            child_id, token, incarnation = self._core.spec.id, message.token, self._incarnation

            def answer_parent(reason: ExitReason, error: NannyError | None) -> None:
                failure = getattr(error, "reason", reason)
                tell_quietly(parent, StartFailed(child_id, token, failure))

            life.on_idle = lambda: tell_quietly(
                parent, StartDone(child_id, token, None, incarnation)
            )
            life.init_reply = answer_parent
        self._run(self._core.start(now, settle=message.settle))
        return _LATER if parent is None else None

    def on_start(self) -> None:
        if self._parent is None:  # the tree's own exit hook: interpreter exit is process-wide
            atexit.register(self._stop_at_exit)

    def on_stop(self) -> None:
        if self._core.mode in ("new", "running"):
            self._life.exit_requested = True
            self._run(self._core.shutdown(time.monotonic()))
        self._cleanup()

    def on_failure(self, *exc_info: Any) -> None:
        # A bug in the nanny must not orphan its subtree: stop it, report upward.
        if self._life.exit_reason is None:  # a root's tree ends saying why
            self._life.exit_reason = crash_reason(exc_info[1])
        try:
            self._stop_all_children()
        finally:
            self._cleanup()
            if not self._life.exit_requested:
                self._tell_parent(crash_reason(exc_info[1]))

    def on_fatal(self, error: BaseException) -> None:
        """A BaseException in the nanny's own handler, where pykka would stop every
        actor of the process: its subtree stops now, and its tree through the root."""
        where = f"nanny {self._core.name!r}"
        if self._parent is not None:
            self._life.exit_requested = True  # its parent hears Fatal, not ChildExited
            tell_quietly(self._parent, Fatal(error, self.actor_ref, where))
        self._end_tree(error, where, own=True)

    def _fatal_below(self, envelope: Any) -> None:
        """An actor below failed with a BaseException: up to the root, which ends the tree."""
        fatal: Fatal = envelope.message
        workers = self._children.workers
        child = next((c for c, w in workers.items() if w is fatal.ref), None)
        if child is not None:
            fatal = dataclasses.replace(fatal, where=f"the worker of {self._core.name}/{child}")
            pending = self._starts.pending
            if pending is not None and pending.child_id == child:  # it died in its start
                failed = StartFailed(child, pending.token, crash_reason(fatal.error))
                self._on_answer(failed, time.monotonic())
        if self._parent is not None:
            tell_quietly(self._parent, fatal)
        elif self._starts.pending is not None:  # the core waits for a start: end once answered
            envelope.message = fatal
            self._deferred.append(envelope)
        else:
            self._end_tree(fatal.error, fatal.where, own=False)

    def _end_tree(self, error: BaseException, where: str, *, own: bool) -> None:
        """Stop this nanny's subtree, and end, with a reason that names the failure: in
        order when the core can take it now, else (its own failure) at once."""
        reason = ExitReason(
            ExitKind.ACTOR_CRASHED,
            exc_type=type(error).__name__,
            message=f"{where} failed with {type(error).__name__}: {error}"[:8192],
        )
        if self._core.mode in ("new", "running") and self._starts.pending is None:
            try:
                self._run(self._core.shutdown(time.monotonic(), reason))
                return
            except Exception:
                log.exception("nanny %r cannot stop its children in order", self._core.name)
        elif not own:
            return  # stopping already
        if not self.actor_stopped.is_set():
            self._life.exit_reason = reason
            pykka.ActorRegistry.unregister(self.actor_ref)
            self.actor_stopped.set()
            self.on_failure(type(error), error, error.__traceback__)

    def _stop_at_exit(self) -> None:
        # Daemon actor threads would die mid-stop at exit: stop the tree politely first.
        try:
            self.actor_ref.stop(timeout=30)
        except Exception:
            log.exception("stopping tree %r at exit failed", self._core.name)

    def _exit(self, action: Exit) -> None:
        life = self._life
        life.exit_reason = action.reason
        self._children.stop_workers()
        init_reply, life.init_reply = life.init_reply, None
        life.on_idle = None
        if init_reply is not None:
            init_reply(action.reason, action.error)
        elif not life.exit_requested:
            self._tell_parent(action.reason)
        self.actor_ref.stop(block=False)  # a no-op when already stopping (in on_stop)

    def _tell_parent(self, reason: ExitReason) -> None:
        if self._parent is None:
            return
        exited = ChildExited(self._core.spec.id, self._incarnation, None, reason)
        with contextlib.suppress(pykka.ActorDeadError):
            self._parent.tell(exited)

    def _stop_all_children(self) -> None:
        self._starts.end_runs()
        self._stops.stop_nested()
        self._starts.abandon()
        self._children.stop_workers()

    def _cleanup(self) -> None:
        self._stop_all_children()
        for plugin in self._life.plugins:
            try:
                plugin.teardown(self._observe.log, self._life.exit_reason)
            except Exception:
                log.exception("nanny %r: plugin %r failed in teardown", self._core.name, plugin)
        self._life.plugins.clear()
        if self._parent is None:
            self._context.end(self._life.exit_reason)
            atexit.unregister(self._stop_at_exit)

    # -- executing the core's actions ---------------------------------------------

    def _run(self, actions: list[Action]) -> None:
        queue = deque(actions)
        while queue:
            action = queue.popleft()
            if isinstance(action, Report):
                self._observe.record(action.event)
            elif isinstance(action, StartChild):
                queue.extend(self._starts.start(action.child_id, action.spec, action.settle))
            elif isinstance(action, TerminateChild):
                self._ahead.grant()
                reason, when = self._stops.terminate_in_turn(action.child_id, action.spec.shutdown)
                queue.extend(self._core.terminated(action.child_id, reason, when))
            elif isinstance(action, TerminateChildren):
                self._ahead.grant()  # shutting down: no restart ahead of the stops
                results = self._stops.terminate_many(action.child_ids, action.shutdown)
                queue.extend(self._core.terminated_all(results, time.monotonic()))
            elif isinstance(action, ScheduleRetry):
                retry = RetryRestart(action.child_id)
                if action.delay > 0:
                    later = functools.partial(tell_quietly, self.actor_ref, retry)
                    self._context.scheduler.call_later(action.delay, later)
                else:
                    self.actor_ref.tell(retry)
            elif isinstance(action, PauseChild | ResumeChild):
                self._children.pause(action.child_id, paused=isinstance(action, PauseChild))
            elif isinstance(action, RemoveChild):
                self._children.remove(action.child_id)
            elif isinstance(action, Reply):
                self._reply(action)
            elif isinstance(action, Exit):
                self._exit(action)
        self._starts.end_runs_if_idle()
        self._observe.log_events()
        self._stops.check_idle()
        self._ahead.grant()
        life = self._life
        if self._starts.pending is None and not self._core.busy and life.on_idle is not None:
            on_idle, life.on_idle = life.on_idle, None
            life.init_reply = None
            on_idle()

    def _reply(self, reply: Reply) -> None:
        call, self._call = self._call, None
        if call is None:
            return
        if reply.error is not None:
            call.set_exception(exc_info=(type(reply.error), reply.error, None))
        else:
            call.set(reply.value)

    def _call_core(self, actions: list[Action]) -> Any:
        """Carry out an API call's actions: a Reply action answers the caller, now or
        once the start it waits for is done."""
        call = self._call
        self._run(actions)
        if call is not None and self._call is call and self._starts.pending is None:
            self._call = None
            error = RuntimeError(f"nanny {self._core.name!r}: the call produced no reply")
            call.set_exception(exc_info=(RuntimeError, error, None))
        return _LATER


# mypy checks here that NannyActor answers every call of the API, as it declares.
_ANSWERS_THE_API: type[SupervisorAPI] = NannyActor


def _answers_now(message: Any) -> bool:
    """Whether a message is handled even while the core waits for a start."""
    if isinstance(message, StartDone | StartFailed | ChildNote | ChildStatus | ChildHealth | Fatal):
        return True  # answers, what a child said, a failure below: never held behind a start
    if isinstance(message, pykka_messages.ProxyCall | pykka_messages.ProxyGetAttr):
        return message.attr_path[-1] in READ_ONLY
    return False
