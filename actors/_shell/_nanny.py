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
`Supervisor` (its mailbox, the OTP API it answers, and each action of the core
carried out). What is not that lives beside it: runs of starts
(`_start_runs.py`), runs of stops (`_stop_runs.py`), the tree's resources
(`_context.py`), the actor loop (actors/_runtime/_actor_loop.py).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import pykka
from pykka import messages as pykka_messages

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
    Health,
    NannyError,
    PauseChild,
    RemoveChild,
    Reply,
    Report,
    ResumeChild,
    ScheduleRetry,
    Shutdown,
    SpecError,
    StartChild,
    StartError,
    Supervisor,
    SupervisorSpec,
    TerminateChild,
    TerminateChildren,
    parse_signal,
    signal_name,
)

from .._runtime._actor_loop import Fatal, dead, handle, serving, teardown, tell_quietly
from ._context import TreeContext
from ._event_log import EventLog
from ._messages import (
    ArmExit,
    ChildExited,
    ChildHealth,
    ChildNote,
    ChildStatus,
    InitTree,
    LauncherLost,
    Pause,
    ReadOutput,
    ReloadChild,
    Resume,
    RetryRestart,
    ShutdownTree,
    Signal,
    Start,
    StartDone,
    StartFailed,
    Stop,
)
from ._start_runs import RUN_OF_STARTS, Member, StartRuns
from ._stop_runs import RUN_OF_STOPS, failed_stop, gather_stops, stop_run, warn_if_late
from ._worker import WorkerActor

log = logging.getLogger("nannytree")
REMOTE_TREE_TIMEOUT = 2.0  # seconds a remote subtree's which_tree may take

# Calls answered at once, even while a child is starting: they only read the core.
_READ_ONLY = frozenset(
    {
        "which_children",
        "which_child",
        "which_tree",
        "count_children",
        "get_childspec",
        "which_childspecs",
        "events",
        "event_log",
        "child_nanny",
        "child_status",
    }
)
_LATER = object()  # a call whose answer comes once the core has carried it out


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
    status: str = ""  # a command's last sd_notify STATUS= text, for `nannytree status`


@dataclass(frozen=True)
class ParentLink:
    """How a nested nanny reaches its parent: the parent's ref, its own path, incarnation."""

    ref: pykka.ActorRef[Any]
    name: str
    incarnation: int


@dataclass
class _Starting:
    """The start the core waits for."""

    token: int
    child_id: str
    nested: pykka.ActorRef[NannyActor] | None = None


def _crash_reason(e: BaseException) -> ExitReason:
    return ExitReason(ExitKind.ACTOR_CRASHED, exc_type=type(e).__name__, message=str(e)[:8192])


def _window_reader(core: Supervisor) -> Callable[[], tuple[float, ...]]:
    """Reads `core`'s charged restarts from another thread: the copy is one C-level
    pass over a deque of floats, which holds the GIL throughout."""

    def read() -> tuple[float, ...]:
        try:
            return core.restart_times
        except RuntimeError:  # mutated meanwhile (a runtime without a GIL): none known
            return ()

    return read


def signal_number(sig: int | str, child: str) -> int:
    """A signal given as a number or a name ("HUP", "SIGHUP"); SpecError otherwise."""
    try:
        return parse_signal(sig)
    except ValueError:
        raise SpecError(
            child,
            "signal",
            sig,
            "expected a signal name such as 'HUP' or 'SIGTERM', or its number",
        ) from None


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
        context.restart_windows[self._core.name] = _window_reader(self._core)
        # A root tree ends its context (launcher, memory watch, timer) when it stops.
        self._is_root = parent is None
        self._log = context.log
        self._workers: dict[str, pykka.ActorRef[WorkerActor]] = {}
        self._worker_specs: dict[str, ChildSpec] = {}  # the spec each worker was made with
        self._nested: dict[str, pykka.ActorRef[Any]] = {}  # a NannyActor or a RemoteChild
        self._nested_incarnations: dict[str, int] = {}
        self._exit_requested = False
        self._exit_reason: ExitReason | None = None
        self._plugins = list(plugins)
        self._to_log: list[Event] = []
        self._deadline: float | None = None  # set by a parent's ShutdownTree
        self._tokens = 0
        self._starting: _Starting | None = None  # the start the core waits for
        self._deferred: deque[Any] = deque()  # envelopes that wait for the core to be idle
        self._call: Any = None  # reply future of the call being carried out
        self._on_idle: Callable[[], None] | None = None  # init: answer once idle
        self._init_reply: Callable[[ExitReason, NannyError | None], None] | None = None
        # Restarts decided ahead (exit plans): what the launcher may do on its own.
        self._budget = context.new_budget()
        self._grant_to: object | None = None  # the spawner our grants went to
        self._used_seen = 0  # its restarts ahead of a decision that we accounted for
        self._granted = -1
        self._remote: dict[str, Any] = {}  # multi-host: child id -> its RemoteStatus
        self._statuses: dict[str, str] = {}  # child id -> its last sd_notify STATUS=
        # child id -> (incarnation, what its liveness probe says): shown while current.
        self._health: dict[str, tuple[int, Health]] = {}
        # Children of a run of stops already stopped (why, and when), until the core
        # asks for them.
        self._stopped_ahead: dict[str, tuple[ExitReason, float]] = {}
        # Starts of a run sent ahead of the core's questions, in its order.
        self._runs = StartRuns(context.scheduler.call_later)

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

    # -- the OTP API (call through the proxy) ---------------------------------

    def which_children(self) -> list[ChildInfo]:
        """Children in OTP's order: reverse start order."""
        infos = self._core.which_children()
        if self._remote:
            infos = [self._remote_view(i) for i in infos]
        return [self._with_health(i) for i in infos] if self._health else infos

    def which_tree(self) -> list[TreeNode]:
        """The whole subtree, in start order: each child with its own children, if any."""
        nodes = []
        for info in self._core.children():
            path = f"{self._core.name}/{info.id}"
            nested = self._nested.get(info.id)
            below: list[TreeNode] = []
            if nested is not None and info.state == "running":
                # A remote subtree's far side may be frozen: it is shown without its
                # children rather than holding this nanny (and every caller) up.
                timeout = REMOTE_TREE_TIMEOUT if info.id in self._remote else None
                with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout, NannyError):
                    below = cast(list[TreeNode], nested.proxy().which_tree().get(timeout=timeout))
            status = self._statuses.get(info.id, "")
            view = self._with_health(self._remote_view(info))
            nodes.append(TreeNode(view, path, tuple(below), status))
        return nodes

    def child_nanny(self, key: str) -> pykka.ActorRef[Any]:
        """The ActorRef of a running nested supervisor, to call its API directly."""
        info = self._core.which_child(key)
        nested = self._nested.get(info.id)
        if nested is None or info.state != "running":
            raise ChildNotRunning(self._core.name, info.id, "reach it as a running supervisor")
        return nested

    def which_child(self, key: str | int) -> ChildInfo:
        return self._remote_view(self._core.which_child(key))

    def count_children(self) -> ChildCounts:
        return self._core.count_children()

    def get_childspec(self, key: str | int) -> AnySpec:
        return self._core.get_childspec(key)

    def which_childspecs(self) -> list[tuple[ChildInfo, AnySpec]]:
        """Each child's info and the spec it holds now, in start order, in one call
        (what an update diffs the file against: docs/update.md)."""
        return [(info, self._core.get_childspec(info.id)) for info in self._core.children()]

    def start_child(self, spec_or_args: Any = None) -> Any:
        """Add a child at the end and start it (simple_one_for_one: extra args)."""
        return self._call_core(self._core.start_child(spec_or_args, time.monotonic()))

    def terminate_child(self, key: str | int, with_dependents: bool = False) -> Any:
        """Stop a child (its spec is kept); `with_dependents`: in a rest_for_one or
        one_for_all supervisor, the children started after it first (reverse order)."""
        return self._call_core(
            self._core.terminate_child(key, time.monotonic(), with_dependents=with_dependents)
        )

    def restart_child(self, key: str) -> Any:
        return self._call_core(self._core.restart_child(key, time.monotonic()))

    def delete_child(self, key: str) -> Any:
        return self._call_core(self._core.delete_child(key, time.monotonic()))

    def reset_restarts(self, key: str | None = None) -> Any:
        """Empty this supervisor's intensity window (`key` None) or the restart_limit
        window of child `key` (a "failed" one becomes "stopped"); returns how many
        restarts were in it. Raises NoRestartLimit for a child without one."""
        return self._call_core(self._core.reset_restarts(key, time.monotonic()))

    # Beyond OTP, for an update in place (docs/update.md).

    def replace_child(self, key: str, spec: AnySpec, settle: float = 0.0) -> Any:
        """Stop the child, give it `spec` at the same place, start it (answers as
        restart_child; a failed start leaves it stopped with the new spec).

        `settle` seconds: a worker without readiness counts as started only once it
        has stayed up that long, so one that exits at once fails the start (and stays
        stopped) instead of crash-looping into the intensity. `nannytree update`
        passes its `--settle` (1 s by default).
        """
        return self._call_core(self._core.replace_child(key, spec, time.monotonic(), settle=settle))

    def store_childspec(self, key: str, spec: AnySpec) -> Any:
        """Keep `spec` for a nested supervisor (or a stopped worker), touching nothing."""
        return self._call_core(self._core.store_childspec(key, spec, time.monotonic()))

    def own_spec(self) -> SupervisorSpec:
        """The spec this supervisor runs with now: its settings as last changed in
        place (`change_settings`); its children as it started (which_childspecs has
        them as they run)."""
        return self._core.spec

    def change_settings(self, spec: SupervisorSpec) -> Any:
        """Take `spec`'s intensity, period, auto_shutdown and max_children in place,
        the children running on (OTP's code_change); the strategy stays. A lower
        intensity lowers the launcher's restarts ahead at once (`_run` grants)."""
        return self._call_core(self._core.change_settings(spec, time.monotonic()))

    def insert_child(self, spec: AnySpec, after: str | None, settle: float = 0.0) -> Any:
        """start_child, placed right after the child `after` (None: first); `settle`
        as for replace_child (a failed start adds nothing)."""
        return self._call_core(
            self._core.insert_child(spec, after, time.monotonic(), settle=settle)
        )

    def move_child(self, key: str, after: str | None) -> Any:
        """Move a child in the start order, right after `after` (None: first)."""
        return self._call_core(self._core.move_child(key, after, time.monotonic()))

    def pause_child(self, key: str) -> Any:
        """SIGSTOP the child's process group; it shows as "paused"."""
        return self._call_core(self._core.pause_child(key, time.monotonic()))

    def resume_child(self, key: str) -> Any:
        actions = self._core.resume_child(key, time.monotonic())
        result = self._call_core(actions)
        self._arm(self._core.which_child(key).id)
        return result

    def signal_child(self, key: str, sig: int | str) -> None:
        """Send `sig` (a number, or a name such as "HUP") to the child's process group."""
        info = self._core.which_child(key)
        number = signal_number(sig, info.id)
        self._ask_worker(info, Signal(number), "send a signal to it")
        self._note_event(EventKind.CHILD_SIGNALLED, info, signal_name(number))

    def reload_child(self, key: str) -> None:
        """Reload a child in place as its spec's `reload` says: the check, then the signal.

        Raises ReloadRefused (no reload in the spec, or the check failed: why),
        ChildNotRunning.
        """
        info = self._core.which_child(key)
        sig = self._ask_worker(info, ReloadChild(), "reload it")
        self._note_event(EventKind.CHILD_RELOADED, info, signal_name(sig))

    def read_output(self, key: str, stream: str = "stderr", previous: bool = False) -> str:
        """The last 64 KiB a child wrote to a stream ("stdout" or "stderr").

        Its current process's, or its last one's once it exited; with `previous`,
        the run before that (as `kubectl logs --previous`). Kept for a stream the
        spec says "capture" for, for stderr (the launcher tees it, unless the
        child writes to a terminal), and for a stream a LogLine readiness reads.
        """
        if stream not in ("stdout", "stderr"):
            raise ValueError(f'stream must be "stdout" or "stderr", not {stream!r}')
        info = self._core.which_child(key)
        worker = self._workers.get(info.id)
        if worker is None:
            return ""
        return cast(str, worker.ask(ReadOutput(1 if stream == "stdout" else 2, previous)))

    def child_status(self, key: str | int) -> str:
        """A command's last sd_notify STATUS= text ("" if it sent none), as
        `systemctl status` shows it. Answered at once, even during a start."""
        return self._statuses.get(self._core.which_child(key).id, "")

    def events(self) -> list[Event]:
        """The tree's lifecycle events, oldest first."""
        return self._log.snapshot()

    def event_log(self) -> EventLog:
        """The tree's live EventLog (thread-safe: wait on it from any thread)."""
        return self._log

    # -- the mailbox ------------------------------------------------------------

    def _actor_loop_running(self) -> None:
        # pykka's loop, with one change: while the core waits for a start, only
        # answers and read-only calls are handled; the rest waits, in order.
        while not self.actor_stopped.is_set():
            if self._deferred and self._starting is None:
                envelope = self._deferred.popleft()
            else:
                envelope = self.actor_inbox.get()
            if self._starting is not None and not _answers_now(envelope.message):
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
            isinstance(message, pykka_messages.ProxyCall)
            and message.attr_path[-1] not in _READ_ONLY
        )
        if mutating and envelope.reply_to is not None:
            self._call = envelope.reply_to
        # pykka's loop body (actors/_runtime/_actor_loop.py); a call answered _LATER is
        # answered when the core replies.
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
        if isinstance(message, StartDone):
            return self._on_started(message, now)
        if isinstance(message, StartFailed):
            return self._on_start_failed(message, now)
        if isinstance(message, ChildExited):
            self._count_ahead(message.respawned_by)
            worker = self._workers.get(message.child_id)
            if message.ahead and worker is not None:
                self._runs.born(message.child_id, message.ahead, worker)  # its next start
            self._run(
                self._core.child_exited(
                    message.child_id,
                    message.incarnation,
                    message.reason,
                    now,
                    uptime=message.uptime,
                )
            )
        elif isinstance(message, ChildNote):
            self._count_ahead(message.respawned_by)
            if not self._runs.hold_note(message):
                self._note(message, now)
        elif isinstance(message, ChildHealth):
            self._on_health(message, now)
        elif isinstance(message, ChildStatus):
            self._statuses[message.child_id] = message.status
        elif isinstance(message, RetryRestart):
            self._run(self._core.retry(message.child_id, now))
        elif isinstance(message, InitTree):
            return self._init(message, now)
        elif isinstance(message, ShutdownTree):
            self._exit_requested = True
            self._deadline = message.deadline
            self._run(self._core.shutdown(now))
            return self._exit_reason
        elif isinstance(message, LauncherLost):
            if self._core.mode == "running":
                self._run(self._core.shutdown(now, message.reason))
        else:
            raise TypeError(f"nanny {self._core.name!r} got an unknown message {message!r}")
        return None

    def _init(self, message: InitTree, now: float) -> Any:
        parent = self._parent
        if parent is None:  # the root: asked by Tree.start; answered when all started
            call = self._call

            def answer_root(reason: ExitReason, error: NannyError | None) -> None:
                if error is not None:
                    call.set_exception(exc_info=(type(error), error, None))
                else:
                    call.set(None)
                self._call = None

            self._on_idle = lambda: answer_root(ExitReason.shutdown(), None)
            self._init_reply = answer_root
        else:
            child_id, token, incarnation = self._spec.id, message.token, self._incarnation

            def answer_parent(reason: ExitReason, error: NannyError | None) -> None:
                failure = getattr(error, "reason", reason)
                tell_quietly(parent, StartFailed(child_id, token, failure))

            self._on_idle = lambda: tell_quietly(
                parent, StartDone(child_id, token, None, incarnation)
            )
            self._init_reply = answer_parent
        self._run(self._core.start(now, settle=message.settle))
        return _LATER if parent is None else None

    def on_start(self) -> None:
        if self._is_root:  # the tree's own exit hook: interpreter exit is process-wide
            atexit.register(self._stop_at_exit)

    def on_stop(self) -> None:
        if self._core.mode in ("new", "running"):
            self._exit_requested = True
            self._run(self._core.shutdown(time.monotonic()))
        self._cleanup()

    def on_failure(self, *exc_info: Any) -> None:
        # A bug in the nanny must not orphan its subtree: stop it, report upward.
        if self._exit_reason is None:  # a root's tree ends saying why
            self._exit_reason = _crash_reason(exc_info[1])
        try:
            self._stop_all_children()
        finally:
            self._cleanup()
            if not self._exit_requested:
                self._tell_parent(_crash_reason(exc_info[1]))

    def on_fatal(self, error: BaseException) -> None:
        """A BaseException in the nanny's own handler, where pykka would stop every
        actor of the process: its subtree stops now, and its tree through the root."""
        where = f"nanny {self._core.name!r}"
        if self._parent is not None:
            self._exit_requested = True  # its parent hears Fatal, not ChildExited
            tell_quietly(self._parent, Fatal(error, self.actor_ref, where))
        self._end_tree(error, where, own=True)

    def _fatal_below(self, envelope: Any) -> None:
        """An actor below failed with a BaseException: up to the root, which ends the tree."""
        fatal: Fatal = envelope.message
        child = next((c for c, w in self._workers.items() if w is fatal.ref), None)
        if child is not None:
            fatal = dataclasses.replace(fatal, where=f"the worker of {self._core.name}/{child}")
            starting = self._starting
            if starting is not None and starting.child_id == child:  # it died in its start
                failed = StartFailed(child, starting.token, _crash_reason(fatal.error))
                self._on_start_failed(failed, time.monotonic())
        if self._parent is not None:
            tell_quietly(self._parent, fatal)
        elif self._starting is not None:  # the core waits for a start: end once it is answered
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
        if self._core.mode in ("new", "running") and self._starting is None:
            try:
                self._run(self._core.shutdown(time.monotonic(), reason))
                return
            except Exception:
                log.exception("nanny %r cannot stop its children in order", self._core.name)
        elif not own:
            return  # stopping already
        if not self.actor_stopped.is_set():
            self._exit_reason = reason
            pykka.ActorRegistry.unregister(self.actor_ref)
            self.actor_stopped.set()
            self.on_failure(type(error), error, error.__traceback__)

    def _stop_at_exit(self) -> None:
        # Daemon actor threads would die mid-stop at exit: stop the tree politely first.
        try:
            self.actor_ref.stop(timeout=30)
        except Exception:
            log.exception("stopping tree %r at exit failed", self._core.name)

    # -- executing the core's actions ---------------------------------------------

    def _run(self, actions: list[Action]) -> None:
        queue = deque(actions)
        while queue:
            action = queue.popleft()
            if isinstance(action, Report):
                self._record(action.event)
            elif isinstance(action, StartChild):
                queue.extend(self._start_child(action.child_id, action.spec, action.settle))
            elif isinstance(action, TerminateChild):
                self._grant()
                reason, when = self._terminate_in_turn(action.child_id, action.spec.shutdown)
                queue.extend(self._core.terminated(action.child_id, reason, when))
            elif isinstance(action, TerminateChildren):
                self._grant()  # shutting down: no restart ahead of the stops
                results = self._terminate_many(action.child_ids, action.shutdown)
                queue.extend(self._core.terminated_all(results, time.monotonic()))
            elif isinstance(action, ScheduleRetry):
                if action.delay > 0:
                    self._context.scheduler.call_later(
                        action.delay, self._retry_later(action.child_id)
                    )
                else:
                    self.actor_ref.tell(RetryRestart(action.child_id))
            elif isinstance(action, PauseChild | ResumeChild):
                self._pause_worker(
                    action.child_id, Pause() if isinstance(action, PauseChild) else Resume()
                )
            elif isinstance(action, RemoveChild):
                worker = self._workers.pop(action.child_id, None)
                self._worker_specs.pop(action.child_id, None)
                if worker is not None:
                    worker.stop()
            elif isinstance(action, Reply):
                self._reply(action)
            elif isinstance(action, Exit):
                self._exit(action)
        if self._starting is None:
            self._runs.end()
        self._log_events()
        if self._stopped_ahead and not self._core.busy:
            log.error("nanny %r stopped %s ahead, unasked", self._core.name, self._stopped_ahead)
            self._stopped_ahead.clear()
        self._grant()
        if self._starting is None and not self._core.busy and self._on_idle is not None:
            on_idle, self._on_idle = self._on_idle, None
            self._init_reply = None
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
        if call is not None and self._call is call and self._starting is None:
            self._call = None
            error = RuntimeError(f"nanny {self._core.name!r}: the call produced no reply")
            call.set_exception(exc_info=(RuntimeError, error, None))
        return _LATER

    def _retry_later(self, child_id: str) -> Callable[[], None]:
        ref = self.actor_ref

        def retry() -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(RetryRestart(child_id))

        return retry

    def _next_token(self) -> int:
        self._tokens += 1
        return self._tokens

    def _start_child(self, child_id: str, spec: AnySpec, settle: float = 0.0) -> list[Action]:
        """Tell the child to start; the core gets its answer as a message (StartDone),
        or now (the actions that follow) when it was started ahead in a run."""
        ahead = self._runs.take(child_id)
        if ahead is not None:
            self._starting = _Starting(ahead.token, child_id)
            self._send_ahead()
            if ahead.answer is None:
                return []
            self._starting = None
            for note in ahead.notes:  # what it said before its start counted
                self.actor_ref.tell(note)
            return self._answered(ahead.answer, time.monotonic())
        token = self._next_token()
        self._starting = _Starting(token, child_id)
        if isinstance(spec, ChildSpec):
            worker, arm = self._worker_for(child_id, spec), self._exit_plan(child_id)
            if settle > 0:  # an operator's start, alone: no run of starts waits on it
                worker.tell(Start(token, arm, settle=settle))
            elif not self._send_ahead(Member(child_id, worker, token, arm)):
                worker.tell(Start(token, arm))
            return []
        incarnation = self._nested_incarnations.get(child_id, 0) + 1
        self._nested_incarnations[child_id] = incarnation
        link = ParentLink(self.actor_ref, f"{self._core.name}/{child_id}", incarnation)
        if spec.placement is not None and self._context.engine is not None:
            return self._start_remote(child_id, spec, link, incarnation)
        try:
            nested = NannyActor.start_nested(spec, self._context, link)
        except Exception as e:
            self._starting = None
            return self._core.start_failed(child_id, _crash_reason(e), time.monotonic())
        self._starting.nested = nested
        nested.tell(InitTree(token, settle))
        return []

    def _worker_for(self, child_id: str, spec: ChildSpec) -> pykka.ActorRef[WorkerActor]:
        worker = self._workers.get(child_id)
        if worker is not None and self._worker_specs.get(child_id) is not spec:
            worker.stop()  # replace_child gave the child a new spec: a worker of it
            worker = None
        if worker is None or not worker.is_alive():
            worker = WorkerActor.start(spec, self._context, self.actor_ref, self._core.name)
            self._workers[child_id] = worker
            self._worker_specs[child_id] = spec
        return worker

    def _send_ahead(self, head: Member | None = None) -> bool:
        """Send the starts the core's plan asks for next (after `head`, the start it
        asks for now, which begins a new run) ahead of its questions. False if
        `head` is not sent (it starts on its own)."""
        runs = self._runs
        if head is None and (not runs.active or len(runs.ahead) > RUN_OF_STARTS // 2):
            return False
        known = len(runs.ahead)
        upcoming = self._core.next_starts(RUN_OF_STARTS)
        if head is None and upcoming[:known] != tuple(runs.ahead):
            return False  # not the plan the run was sent for: the next take() undoes it
        members = [head] if head is not None else []
        for child_id in upcoming[known:]:
            spec = self._core.get_childspec(child_id)
            if not isinstance(spec, ChildSpec):
                break
            arm = self._exit_plan(child_id, ahead=True)
            members.append(
                Member(child_id, self._worker_for(child_id, spec), self._next_token(), arm)
            )
        if len(members) < (2 if head is not None else 1):
            return False
        return runs.send(members, new_chain=head is not None) > 0

    def _start_remote(
        self, child_id: str, spec: SupervisorSpec, link: ParentLink, incarnation: int
    ) -> list[Action]:
        """Multi-host: a RemoteChild plays the nested nanny for a subtree on another node."""
        from ._remote_child import start_remote

        try:
            remote, self._remote[child_id] = start_remote(spec, self._context, link)
        except StartError as e:
            reason = e.reason
        except Exception as e:
            reason = _crash_reason(e)
        else:
            self._starting = None
            self._nested[child_id] = remote
            return self._core.started(child_id, None, incarnation, time.monotonic())
        self._starting = None
        return self._core.start_failed(child_id, reason, time.monotonic())

    @classmethod
    def start_nested(
        cls, spec: SupervisorSpec, context: TreeContext, parent: ParentLink
    ) -> pykka.ActorRef[NannyActor]:
        """A nested supervisor's actor; it starts its children when told InitTree."""
        return super().start(spec, context, parent)

    def _answer(self, child_id: str, token: int) -> _Starting | None:
        starting = self._starting
        if starting is None or starting.token != token or starting.child_id != child_id:
            return None  # an answer nobody waits for any more
        self._starting = None
        return starting

    def _on_started(self, message: StartDone, now: float) -> None:
        starting = self._answer(message.child_id, message.token)
        if starting is None:
            self._runs.keep(message)  # a start sent ahead: the core asks for it later
            return
        if starting.nested is not None:
            self._nested[message.child_id] = starting.nested
        self._run(self._answered(message, now))

    def _on_start_failed(self, message: StartFailed, now: float) -> None:
        if self._answer(message.child_id, message.token) is None:
            self._runs.keep(message)
            return
        self._run(self._answered(message, now))

    def _answered(self, message: StartDone | StartFailed, now: float) -> list[Action]:
        if isinstance(message, StartDone):
            return self._core.started(message.child_id, message.pid, message.incarnation, now)
        return self._core.start_failed(message.child_id, message.reason, now)

    def _exit_plan(self, child_id: str, *, ahead: bool = False) -> ArmExit | None:
        """What the child's next exit will mean, when the core can say it ahead."""
        plan = self._core.exit_plan(child_id, ahead=ahead)
        return None if plan is None else ArmExit(plan, self._budget)

    def _arm(self, child_id: str) -> None:
        """Tell a running child's worker what its next exit means (after a resume)."""
        worker = self._workers.get(child_id)
        arm = self._exit_plan(child_id)
        if worker is not None and arm is not None:
            worker.tell(arm)

    def _count_ahead(self, respawned_by: object | None) -> None:
        """A restart the launcher made ahead of a decision spent one of its grant."""
        if respawned_by is not None and respawned_by is self._grant_to:
            self._used_seen += 1

    def _grant(self) -> None:
        """Keep the launcher's budget for restarts ahead of a decision as the core says."""
        launcher = self._context.spawner
        if launcher is None or not launcher.alive:
            return
        if launcher is not self._grant_to:
            self._grant_to, self._used_seen, self._granted = launcher, 0, -1
        granted = self._core.grant(time.monotonic(), self._used_seen, self._granted)
        if granted is not None:
            self._granted = granted
            launcher.grant(self._budget, granted)

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
                token = self._next_token()
                reason = cast(
                    ExitReason | None,
                    nested.ask(ShutdownTree(token, self._deadline_for(shutdown))),
                )
                return reason or ExitReason.shutdown()
            worker = self._workers[child_id]
            reason = cast(ExitReason, worker.ask(Stop(self._next_token(), self._deadline)))
            warn_if_late(self._core.name, child_id, reason)
            return reason
        except Exception as e:
            return failed_stop(e)

    def _terminate_in_turn(self, child_id: str, shutdown: Shutdown) -> tuple[ExitReason, float]:
        """Stop a worker's child, and the worker children the core stops right after
        it, one after the other on this thread: a stop signal goes out once the
        process before has exited (OTP's order), with no round trip through a worker
        or the core between two of them (docs/scale.md, "A run of stops")."""
        if child_id in self._stopped_ahead:
            return self._stopped_ahead.pop(child_id)
        if child_id not in self._workers or child_id in self._nested:
            return self._terminate(child_id, shutdown), time.monotonic()
        run = [child_id]
        for next_id in self._core.next_terminations(RUN_OF_STOPS - 1):
            if next_id not in self._workers or next_id in self._nested:
                break
            run.append(next_id)
        stopped = stop_run({c: self._workers[c] for c in run}, self._deadline, self._core.name)
        self._stopped_ahead.update(stopped)
        return self._stopped_ahead.pop(child_id)

    def _terminate_many(
        self, child_ids: tuple[str, ...], shutdown: Shutdown
    ) -> dict[str, ExitReason]:
        # One shared timer (OTP 5.4): every child is asked at once, with one deadline.
        deadline = self._deadline_for(shutdown)
        futures = {}
        for child_id in child_ids:
            token = self._next_token()
            if child_id in self._nested:
                message: Any = ShutdownTree(token, deadline)
                futures[child_id] = self._nested.pop(child_id).ask(message, block=False)
            else:
                futures[child_id] = self._workers[child_id].ask(Stop(token, deadline), block=False)
        return gather_stops(futures, self._core.name, shutdown)

    def _exit(self, action: Exit) -> None:
        self._exit_reason = action.reason
        self._stop_workers()
        init_reply, self._init_reply = self._init_reply, None
        self._on_idle = None
        if init_reply is not None:
            init_reply(action.reason, action.error)
        elif not self._exit_requested:
            self._tell_parent(action.reason)
        self.actor_ref.stop(block=False)  # a no-op when already stopping (in on_stop)

    def _record(self, event: Event) -> None:
        self._log.append(event)
        self._to_log.append(event)

    def _note_event(self, kind: EventKind, info: ChildInfo, detail: str) -> None:
        self._record(
            Event(
                time=time.monotonic(),
                supervisor=self._core.name,
                context=kind,
                offender=info.id,
                pid=info.pid,
                incarnation=info.incarnation,
                detail=detail,
            )
        )
        self._log_events()

    def _with_health(self, info: ChildInfo) -> ChildInfo:
        """`info` with what its current process's liveness probe says, if it has one."""
        held = self._health.get(info.id)
        if held is None or info.state != "running":
            return info
        incarnation, health = held
        if incarnation != info.incarnation:
            health = Health("unknown", threshold=health.threshold)
        return dataclasses.replace(info, health=health)

    def _on_health(self, message: ChildHealth, now: float) -> None:
        self._health[message.child_id] = (message.incarnation, message.health)
        if message.verdict not in ("healthy", "unhealthy"):
            return  # one more failure in a row, or the last: its exit tells
        kind = (
            EventKind.CHILD_HEALTHY if message.verdict == "healthy" else EventKind.CHILD_UNHEALTHY
        )
        self._record(
            Event(
                time=now,
                supervisor=self._core.name,
                context=kind,
                offender=message.child_id,
                pid=message.pid,
                incarnation=message.incarnation,
                detail=str(message.health),
            )
        )
        self._log_events()

    def _note(self, message: ChildNote, now: float) -> None:
        if message.main_pid:
            self._core.main_pid_changed(message.child_id, message.incarnation, message.main_pid)
        self._record(
            Event(
                time=now,
                supervisor=self._core.name,
                context=EventKind.CHILD_NOTE,
                offender=message.child_id,
                pid=message.pid,
                incarnation=message.incarnation,
                detail=message.detail,
            )
        )
        self._log_events()

    def _log_events(self) -> None:
        # Logged once the actions are carried out: formatting stays off the restart path.
        events, self._to_log = self._to_log, []
        for event in events:
            # A supervisor giving up or a child failing to start is worth a warning; a
            # crash is routine (it is restarted), so INFO: a crash storm must not be
            # a stderr storm. Every event is in the EventLog regardless.
            if event.context in (
                EventKind.START_FAILED,
                EventKind.MAX_INTENSITY_REACHED,
                EventKind.CHILD_NOTE,
                EventKind.CHILD_FAILED,
            ):
                log.warning("%s", event)
            elif event.context is EventKind.CHILD_EXITED and log.isEnabledFor(logging.INFO):
                log.info("%s", event)
            elif log.isEnabledFor(logging.DEBUG):
                log.debug("%s", event)

    # -- helpers ------------------------------------------------------------------------

    def _pause_worker(self, child_id: str, message: Pause | Resume) -> None:
        # SIGSTOP/SIGCONT; a process that just died has its exit on the way: nothing to do.
        with contextlib.suppress(ChildNotRunning, pykka.ActorDeadError):
            self._workers[child_id].ask(message)

    def _remote_view(self, info: ChildInfo) -> ChildInfo:
        """A remote subtree as its RemoteChild knows it: node, remote pid, unreachable."""
        remote = self._remote.get(info.id) if info.type == "supervisor" else None
        if remote is None or info.state not in ("running", "stopping"):
            return info
        state = "unreachable" if remote.unreachable else info.state
        view: ChildInfo = dataclasses.replace(
            info,
            state=state,
            node=remote.node,
            pid=remote.pid,
            since=remote.unreachable_since if remote.unreachable else None,
        )
        return view

    def _ask_worker(self, info: ChildInfo, message: Any, what: str) -> Any:
        worker = self._workers.get(info.id)
        if info.type != "worker" or worker is None or info.state not in ("running", "paused"):
            raise ChildNotRunning(self._core.name, info.id, what)
        return worker.ask(message)

    def _tell_parent(self, reason: ExitReason) -> None:
        if self._parent is None:
            return
        with contextlib.suppress(pykka.ActorDeadError):
            self._parent.tell(ChildExited(self._spec.id, self._incarnation, None, reason))

    def _stop_workers(self) -> None:
        # All at once (their processes are already stopped): a thousand workers
        # must not cost a thousand round trips one after the other.
        futures = [worker.stop(block=False) for worker in self._workers.values()]
        self._workers.clear()
        for future in futures:
            with contextlib.suppress(pykka.ActorDeadError):
                future.get()

    def _stop_all_children(self) -> None:
        self._runs.end()
        for nested in self._nested.values():
            try:
                nested.ask(ShutdownTree(self._next_token()))
            except pykka.ActorDeadError:
                pass  # it gave up (or stopped) first: nothing left to stop
            except Exception:
                log.exception("nanny %r: stopping a nested tree failed", self._core.name)
        self._nested.clear()
        starting, self._starting = self._starting, None
        if starting is not None and starting.nested is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                starting.nested.stop()
        self._stop_workers()

    def _cleanup(self) -> None:
        self._stop_all_children()
        for plugin in self._plugins:
            try:
                plugin.teardown(self._log, self._exit_reason)
            except Exception:
                log.exception("nanny %r: plugin %r failed in teardown", self._core.name, plugin)
        self._plugins.clear()
        if self._is_root:
            self._context.end(self._exit_reason)
            atexit.unregister(self._stop_at_exit)


def _answers_now(message: Any) -> bool:
    """Whether a message is handled even while the core waits for a start."""
    if isinstance(message, StartDone | StartFailed | ChildNote | ChildStatus | ChildHealth | Fatal):
        return True  # answers, what a child said, a failure below: never held behind a start
    if isinstance(message, pykka_messages.ProxyCall | pykka_messages.ProxyGetAttr):
        return message.attr_path[-1] in _READ_ONLY
    return False
