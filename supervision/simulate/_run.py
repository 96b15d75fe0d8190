"""The virtual-time engine: `simulate()` runs one spec against its fault models.

One concept, so one module past the usual length: the simulated supervisor
(`_Node`, NannyActor's mailbox and actions) and the run that drives it
(`_Simulation`: the clock's heap, faults, nodes, scripted calls and accounts)
call into each other on every step. The model it implements is described in
the package's docstring (supervision/simulate/__init__.py). This module
re-exports nothing: the public names are the package's.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from random import Random
from typing import Any

from .._actions import (
    Action,
    Exit,
    PauseChild,
    RemoveChild,
    Reply,
    Report,
    ResumeChild,
    ScheduleRetry,
    StartChild,
    TerminateChild,
    TerminateChildren,
)
from .._core import Supervisor
from .._errors import ChildNotRunning, NannyError, SpecError, StartError, SupervisorNotRunning
from .._events import Event, EventKind
from .._fencing import Fencing
from .._reasons import ExitKind, ExitReason
from ..spec._fields import (
    BRUTAL_KILL,
    INFINITY,
    Restart,
    Strategy,
)
from ..spec._placement import Placement, choose_node
from ..spec._spec import (
    AnySpec,
    ChildSpec,
    SupervisorSpec,
)
from ._defaults import DEFAULT_ROOT_RESTART_DELAY, DEFAULT_SEED
from ._faults import (
    START_FAILURE,
    FaultModel,
    Hang,
    Healthy,
    MemoryGrowth,
)
from ._health import ProbeLoop, health_event, start_delay, step_run, stop_time
from ._keys import added_workers, check_faults
from ._nodes import (
    Cluster,
    NodeDown,
    NodeFault,
    NodeTable,
    NodeUp,
)
from ._ops import FIRST_PID, QUERIES, STOP, Call, CallResult, PidOf
from ._report import (
    Accounts,
    ChildType,
    SimulationResult,
)

_HEALTHY = Healthy()


# -- messages to a simulated supervisor ---------------------------------------------


@dataclass(frozen=True)
class _Init:
    pass


@dataclass(frozen=True)
class _Shutdown:
    pass


@dataclass(frozen=True)
class _ChildExited:
    child_id: str
    incarnation: int
    reason: ExitReason


@dataclass(frozen=True)
class _Retry:
    child_id: str


@dataclass(frozen=True)
class _Call:
    call: Call


@dataclass(frozen=True)
class _Starting:
    """A worker's start under way: what decides it when its delay is over."""

    child_id: str
    incarnation: int
    faults: _Faults
    failure: ExitReason | None
    began: float  # when its process was started (probes and `answers_after` count from it)
    step: ExitReason | None  # a one-shot step: how its run ended


_Message = _Init | _Shutdown | _ChildExited | _Retry | _Call
_AUTOMATIC = (_ChildExited, _Retry)  # the messages whose starts are automatic restarts


# -- one worker's faults, over the whole run ------------------------------------------


class _Faults:
    def __init__(self, model: FaultModel, seed: int, path: str, key: str | None) -> None:
        self.model = model
        self.key = key  # the `faults` key its model came from (None: no model, healthy)
        self.life = Random(f"{seed}/{path}/life")
        self.starts = Random(f"{seed}/{path}/start")
        self.probes = Random(f"{seed}/{path}/probe")  # a Flapping model's draws
        self.attempts = 0
        self.successes = 0

    def start_fails(self) -> bool:
        self.attempts += 1
        model = self.model
        if self.attempts in model.failed_starts:
            return True
        p = model.start_failure_probability
        return p > 0.0 and self.starts.random() < p

    def lifetime(self) -> tuple[float, ExitReason] | None:
        self.successes += 1
        return self.model.lifetime(self.life, self.successes)


class _Process:
    __slots__ = (
        "alive",
        "answers_at",
        "attempts",
        "hung",
        "incarnation",
        "loop",
        "paused",
        "pid",
        "reason",
        "stopping",
        "watchdog_at",
    )

    def __init__(self, incarnation: int, pid: int, answers_at: float = 0.0) -> None:
        self.incarnation = incarnation
        self.pid = pid
        self.alive = True
        self.paused = False
        self.hung = False  # alive but stuck (a Hang fault): ignores SIGTERM
        self.reason: ExitReason | None = None
        self.answers_at = answers_at  # when its service answers probes
        self.loop: ProbeLoop | None = None  # its liveness watch, while one runs
        self.attempts = 0  # liveness attempts so far (a Flapping pattern's index)
        self.stopping = False  # its liveness decided to stop it (reason unhealthy)
        self.watchdog_at: float | None = None  # when its watchdog decides to stop it


# -- the simulated tree ------------------------------------------------------------------


class _Node:
    """One simulated supervisor: NannyActor's behaviour in virtual time."""

    def __init__(
        self,
        sim: _Simulation,
        spec: SupervisorSpec,
        prefix: str,
        parent: _Node | None = None,
        child_id: str = "",
        incarnation: int = 0,
        host: str | None = None,
        forms: tuple[str, ...] = ("",),
    ) -> None:
        self.sim = sim
        self.host = host  # the node it runs on (None: the root's host)
        self.lease_from: float | None = None  # when its parent got its start (its lease)
        self.fenced = False  # a remote subtree that stopped itself (lease, cut off)
        self.told = False  # its parent has been told of its node's fault
        self.core = Supervisor(spec, f"{sim.root_name}/{prefix.rstrip('/')}" if prefix else None)
        self.prefix = prefix  # "" for the root, "pool/" below it
        # The `faults` keys its prefix may be written as, most specific first: below a
        # simple_one_for_one supervisor, a child's own id ("pool/w-2/"), then its template's.
        self.forms = forms
        template = spec.children[0].id if spec.strategy is Strategy.SIMPLE_ONE_FOR_ONE else None
        self.template = template
        self.parent = parent
        self.child_id = child_id
        self.incarnation = incarnation
        self.mailbox: deque[_Message] = deque()
        self.queue: deque[Action] = deque()
        self.current: _Message | None = None
        self.waiting = False
        self.dead = False
        self.running = False
        self.procs: dict[str, _Process] = {}
        self.nested: dict[str, _Node] = {}
        self.incarnations: dict[str, int] = {}
        self.paths: dict[str, str] = {}  # child id -> path below the root

    def path(self, child_id: str) -> str:
        path = self.paths.get(child_id)
        if path is None:
            path = self.paths[child_id] = self.prefix + child_id
        return path

    def keys(self, child_id: str) -> tuple[str, ...]:
        """The `faults` keys that may describe `child_id`, most specific first."""
        names = (child_id,) if self.template in (None, child_id) else (child_id, self.template)
        return tuple(form + name for name in names for form in self.forms)

    def named(self, name: str) -> list[str]:
        """The children a key's segment `name` names here: a template's name names every
        child started from it (in start order); any other name, itself."""
        if name == self.template:
            return [c.id for c in self.core.children()]
        return [name]

    # -- the mailbox --------------------------------------------------------------------

    def deliver(self, message: _Message) -> None:
        if self.dead:
            if isinstance(message, _Shutdown):
                self._reply_shutdown(ExitReason.shutdown("already stopped"))
            elif isinstance(message, _Call):
                self.sim.answered(message.call, None, SupervisorNotRunning(self.core.name))
            return
        self.mailbox.append(message)
        self.run()

    def answer(self, actions: list[Action]) -> None:
        """The action we waited for is done; `actions` is the core's answer."""
        self.waiting = False
        self.queue.extend(actions)
        self.run()

    def run(self) -> None:
        if self.running:
            return  # the loop further up the stack carries on
        self.running = True
        try:
            while not self.dead and not self.waiting:
                if self.queue:
                    self._step(self.queue.popleft())
                elif self.current is not None:
                    self._finished(self.current)
                    self.current = None
                elif self.mailbox:
                    self.current = self.mailbox.popleft()
                    self.queue.extend(self._handle(self.current))
                else:
                    return
        finally:
            self.running = False

    def _handle(self, message: _Message) -> list[Action]:
        now = self.sim.now
        if isinstance(message, _ChildExited):
            return self.core.child_exited(
                message.child_id, message.incarnation, message.reason, now
            )
        if isinstance(message, _Retry):
            return self.core.retry(message.child_id, now)
        if isinstance(message, _Init):
            return self.core.start(now)
        if isinstance(message, _Call):
            return self._call(message.call)
        return self.core.shutdown(now)

    def _call(self, c: Call) -> list[Action]:
        now = self.sim.now
        if c.method == STOP:
            self.sim.stop_requested = True
            return self.core.shutdown(now)
        try:
            args = tuple(self._pid(a) if isinstance(a, PidOf) else a for a in c.args)
            if c.method in QUERIES:
                value = getattr(self.core, c.method)(*args)
                self.sim.answered(c, value)
                return []
            return list(getattr(self.core, c.method)(*args, now))
        except NannyError as error:
            self.sim.answered(c, None, error)
            return []

    def _pid(self, arg: PidOf) -> int:
        info = self.core.which_child(arg.child)
        if info.pid is None:
            raise ChildNotRunning(self.core.name, info.id, "take its pid")
        return info.pid

    def _finished(self, message: _Message) -> None:
        """A message is fully handled and the supervisor still runs."""
        parent = self.parent
        if parent is None:
            return
        if isinstance(message, _Init):
            self.lease_from = self.sim.now
            parent.answer(parent.core.started(self.child_id, None, self.incarnation, self.sim.now))
        elif isinstance(message, _Shutdown):  # already stopping: the core had nothing to do
            self._reply_shutdown(ExitReason.shutdown())

    # -- carrying out the core's actions --------------------------------------------

    def _step(self, action: Action) -> None:
        if isinstance(action, Report):
            self.sim.record(self, action.event)
        elif isinstance(action, StartChild):
            self._start(action.child_id, action.spec)
        elif isinstance(action, TerminateChild):
            self._terminate(action.child_id, action.spec)
        elif isinstance(action, TerminateChildren):
            self._terminate_many(action.child_ids)
        elif isinstance(action, ScheduleRetry):
            if action.delay > 0:
                self.sim.at(self.sim.now + action.delay, self.deliver, _Retry(action.child_id))
            else:
                self.mailbox.append(_Retry(action.child_id))
        elif isinstance(action, Exit):
            self._exit(action)
        elif isinstance(action, Reply):
            if isinstance(self.current, _Call):
                self.sim.answered(self.current.call, action.value, action.error)
        elif isinstance(action, PauseChild | ResumeChild):
            proc = self.procs.get(action.child_id)
            if proc is not None:
                proc.paused = isinstance(action, PauseChild)
                proc.loop = None  # a stopped process is not probed; resumed, afresh
                spec = self.core.get_childspec(action.child_id)
                if not proc.paused and proc.alive and isinstance(spec, ChildSpec):
                    self._watch(action.child_id, proc, spec)
        elif isinstance(action, RemoveChild):
            self.procs.pop(action.child_id, None)

    def _start(self, child_id: str, spec: AnySpec) -> None:
        incarnation = self.incarnations.get(child_id, 0) + 1
        self.incarnations[child_id] = incarnation
        path = self.path(child_id)
        if path not in self.sim.specs:  # added by start_child: account for it from now on
            self.sim.specs[path] = spec
            self.sim.accounts.add(path, spec.type)
        if isinstance(spec, SupervisorSpec):
            host = self.host
            if spec.placement is not None and self.sim.nodes is not None:
                placed = self.sim.place(path, spec)
                if isinstance(placed, ExitReason):
                    self.queue.extend(self.core.start_failed(child_id, placed, self.sim.now))
                    return
                host = placed
            prefix = self.prefix + child_id + "/"
            forms = tuple(key + "/" for key in self.keys(child_id))
            node = _Node(self.sim, spec, prefix, self, child_id, incarnation, host, forms)
            self.nested[child_id] = node
            self.waiting = True
            node.deliver(_Init())
            return
        faults = self.sim.faults_of(self, child_id)
        fails = faults.start_fails()
        failure: ExitReason | None = START_FAILURE if fails else None
        step: ExitReason | None = None  # a one-shot step's exit (ready="exited")
        if spec.ready == "exited" and not fails:
            # Its start is its run: it is started when its process exits normally.
            model = faults.model
            hang = model.hang_time(faults.life) if isinstance(model, Hang) else None
            delay, step = step_run(spec, model, faults.lifetime(), hang)
            if not step.is_normal:
                failure = step  # a failed start, with its exit's reason (as live)
            if delay > spec.start_timeout:
                delay, failure = spec.start_timeout, _start_timeout(spec)
        else:
            delay, timed_out = start_delay(spec, faults.model, fails)
            if timed_out:
                delay, failure = spec.start_timeout, _start_timeout(spec)
        starting = _Starting(child_id, incarnation, faults, failure, self.sim.now, step)
        if delay > 0:
            self.waiting = True
            self.sim.at(self.sim.now + delay, self._start_done, starting)
        else:
            self.queue.extend(self._started(starting))

    def _start_done(self, starting: _Starting) -> None:
        self.answer(self._started(starting))

    def _started(self, starting: _Starting) -> list[Action]:
        now = self.sim.now
        child_id, incarnation, faults = starting.child_id, starting.incarnation, starting.faults
        if starting.failure is not None:
            return self.core.start_failed(child_id, starting.failure, now)
        model = faults.model
        proc = _Process(incarnation, self.sim.new_pid(), starting.began + model.answers_after)
        self.procs[child_id] = proc
        spec = self.core.get_childspec(child_id)
        assert isinstance(spec, ChildSpec)
        if starting.step is not None:  # a finished one-shot step: its exit follows its start
            proc.alive, proc.reason = False, starting.step
            self.mailbox.append(_ChildExited(child_id, incarnation, starting.step))
            return self.core.started(child_id, proc.pid, incarnation, now)
        if isinstance(model, MemoryGrowth):
            life = model.time_to_limit(spec.memory_limit)
        elif isinstance(model, Hang):
            life = None
            after = model.hang_time(faults.life)
            if after is not None:
                self.sim.at(now + after, self.hang, (child_id, proc, model))
        else:
            life = faults.lifetime()
        if life is not None:
            self.sim.at(now + life[0], self._process_exit, (child_id, proc, life[1]))
        self._watch(child_id, proc, spec)
        return self.core.started(child_id, proc.pid, incarnation, now)

    # -- liveness -----------------------------------------------------------------------

    def _watch(self, child_id: str, proc: _Process, spec: ChildSpec) -> None:
        """Probe a ready (or resumed) process from its initial delay on, if it has a probe."""
        if spec.liveness is None:
            return
        proc.loop = loop = ProbeLoop(spec.liveness, self.sim.now + spec.liveness.initial_delay)
        self.sim.at(loop.due, self._probe, (child_id, proc, loop))

    def _watched(self, child_id: str, proc: _Process, loop: ProbeLoop) -> bool:
        """Whether `loop` still watches a running process (not stopping, paused, gone)."""
        return (
            not self.dead
            and proc.alive
            and proc.loop is loop
            and self.procs.get(child_id) is proc
            and not proc.stopping
            and (proc.watchdog_at is None or self.sim.now < proc.watchdog_at)
        )

    def _probe(self, args: tuple[str, _Process, ProbeLoop]) -> None:
        child_id, proc, loop = args
        if not self._watched(child_id, proc, loop):
            return
        faults = self.sim.faults_of(self, child_id)
        now = self.sim.now
        ok, took, error = loop.attempt(
            faults.model,
            faults.probes,
            proc.attempts,
            now=now,
            answers_at=proc.answers_at,
            hung=proc.hung,
        )
        proc.attempts += 1
        result = (child_id, proc, loop, now, took, ok, error)
        if took > 0:
            self.sim.at(now + took, self._probed, result)
        else:
            self._probed(result)

    def _probed(self, args: tuple[str, _Process, ProbeLoop, float, float, bool, str]) -> None:
        """An attempt's result: a health event on a change, the stop at the threshold."""
        child_id, proc, loop, began, took, ok, error = args
        if not self._watched(child_id, proc, loop):
            return
        verdict = loop.observe(began, took, ok, error)
        now = self.sim.now
        if verdict is not None:
            event = health_event(
                self.core.name, child_id, verdict, loop, now, proc.pid, proc.incarnation
            )
            if event is not None:
                self.sim.record(self, event)
        if verdict != "stop":
            self.sim.at(max(loop.due, now), self._probe, (child_id, proc, loop))
            return
        # Stopped as by its stop signal and shutdown; reported as unhealthy.
        proc.stopping = True
        self.sim.accounts.set_state(self.path(child_id), "down", now)
        spec = self.core.get_childspec(child_id)
        assert isinstance(spec, ChildSpec)
        delay = stop_time(spec, self.sim.faults_of(self, child_id).model, proc.hung)
        self.sim.at(now + delay, self._process_exit, (child_id, proc, loop.stop_reason()))

    def _process_exit(self, args: tuple[str, _Process, ExitReason]) -> None:
        """A worker's process ends by itself (a fault)."""
        child_id, proc, reason = args
        if self.die(child_id, proc, reason):
            self.exited(child_id, proc)

    def die(self, child_id: str, proc: _Process, reason: ExitReason) -> bool:
        """The process ends with `reason`, if it still runs (not stopped, nor stopping)."""
        if self.dead or not proc.alive or self.procs.get(child_id) is not proc:
            return False
        proc.alive, proc.reason = False, reason
        self.sim.accounts.set_state(self.path(child_id), "down", self.sim.now)
        return True

    def exited(self, child_id: str, proc: _Process) -> None:
        """Tell the supervisor that `proc` (which `die` ended) exited."""
        assert proc.reason is not None
        self.deliver(_ChildExited(child_id, proc.incarnation, proc.reason))

    def hang(self, args: tuple[str, _Process, Hang]) -> None:
        """A process hangs: down for the user; its watchdog or its liveness probe tells
        its supervisor, whichever decides first (its probes fail from now on)."""
        child_id, proc, model = args
        if not proc.alive or proc.hung or self.procs.get(child_id) is not proc:
            return
        proc.hung = True
        self.sim.accounts.set_state(self.path(child_id), "down", self.sim.now)
        spec = self.core.get_childspec(child_id)
        if not isinstance(spec, ChildSpec) or spec.watchdog is None or proc.stopping:
            return
        # The watchdog fires `watchdog` s after the last beat, then stops it as live.
        proc.watchdog_at = self.sim.now + spec.watchdog
        stop = stop_time(spec, model, hung=True)
        reason = ExitReason.watchdog(spec.watchdog)
        self.sim.at(proc.watchdog_at + stop, self._watchdog_exit, (child_id, proc, reason))

    def _watchdog_exit(self, args: tuple[str, _Process, ExitReason]) -> None:
        if not args[1].stopping:  # its liveness probe decided first
            self._process_exit(args)

    def _stop_worker(self, child_id: str, spec: ChildSpec) -> tuple[float, ExitReason]:
        """Begin stopping a worker: how long it takes and the reason it ends with."""
        proc = self.procs.pop(child_id, None)
        if proc is None:
            return 0.0, ExitReason.shutdown("already stopped")
        if not proc.alive:  # it died by itself; its exit is still queued, and will be stale
            assert proc.reason is not None
            return 0.0, proc.reason
        proc.alive = False
        self.sim.accounts.set_state(self.path(child_id), "down", self.sim.now)
        model = self.sim.faults_of(self, child_id).model
        need = model.stop_duration
        if proc.hung and not (isinstance(model, Hang) and model.answers_sigterm):
            need = math.inf  # stuck: only SIGKILL ends it
        shutdown = spec.shutdown
        if shutdown == BRUTAL_KILL:
            return 0.0, ExitReason(ExitKind.SHUTDOWN, signal=9)
        if shutdown == INFINITY or need <= float(shutdown):
            return need, ExitReason.shutdown()
        note = f"ignored SIGTERM for {float(shutdown)}s; killed with SIGKILL"
        return float(shutdown), ExitReason(ExitKind.SHUTDOWN, signal=9, message=note)

    def _terminate(self, child_id: str, spec: AnySpec) -> None:
        if isinstance(spec, SupervisorSpec):
            node = self.nested.pop(child_id)
            self.sim.accounts.set_state(node.prefix.rstrip("/"), "down", self.sim.now)
            self.waiting = True
            node.deliver(_Shutdown())
            return
        delay, reason = self._stop_worker(child_id, spec)
        if delay > 0:
            self.waiting = True
            self.sim.at(self.sim.now + delay, self._terminate_done, (child_id, reason))
        else:
            self.queue.extend(self.core.terminated(child_id, reason, self.sim.now))

    def _terminate_done(self, args: tuple[str, ExitReason]) -> None:
        self.answer(self.core.terminated(args[0], args[1], self.sim.now))

    def _terminate_many(self, child_ids: tuple[str, ...]) -> None:
        """simple_one_for_one's shutdown: every child at once, one shared timer (OTP 5.4)."""
        results: dict[str, ExitReason] = {}
        longest = 0.0
        for child_id in child_ids:
            spec = self.core.get_childspec(child_id)
            if isinstance(spec, SupervisorSpec):  # stopped at once, as a subtree
                self.nested.pop(child_id, None)
                results[child_id] = ExitReason.shutdown()
                continue
            delay, results[child_id] = self._stop_worker(child_id, spec)
            longest = max(longest, delay)
        if longest > 0:
            self.waiting = True
            self.sim.at(self.sim.now + longest, self._terminated_many, results)
        else:
            self.queue.extend(self.core.terminated_all(results, self.sim.now))

    def _terminated_many(self, results: dict[str, ExitReason]) -> None:
        self.answer(self.core.terminated_all(results, self.sim.now))

    def _exit(self, action: Exit) -> None:
        """The supervisor stopped: tell whoever waits for it, or its parent."""
        self.dead = True
        now = self.sim.now
        message, self.current = self.current, None
        if isinstance(message, _Call) and message.call.method == STOP:
            self.sim.answered(message.call, action.reason)
        if self.parent is None:
            self.sim.root_exited(action.reason)
        elif isinstance(message, _Shutdown):
            self._reply_shutdown(action.reason)
        elif isinstance(message, _Init):
            reason = action.error.reason if isinstance(action.error, StartError) else action.reason
            self.parent.answer(self.parent.core.start_failed(self.child_id, reason, now))
        else:  # gave up by itself: an ordinary child exit for the parent
            self.sim.accounts.set_state(self.prefix.rstrip("/"), "down", now)
            self.parent.deliver(_ChildExited(self.child_id, self.incarnation, action.reason))
        for queued in self.mailbox:  # pykka fails pending asks of a stopped actor
            if isinstance(queued, _Shutdown):
                self._reply_shutdown(ExitReason.shutdown("already stopped"))
        for queued in self.mailbox:
            if isinstance(queued, _Call):  # a call on a stopped supervisor: noproc
                self.sim.answered(queued.call, None, SupervisorNotRunning(self.core.name))
        self.mailbox.clear()

    def lose(self) -> None:
        """Its node is gone: it and everything under it stop at once, silently."""
        self.dead = True
        now = self.sim.now
        for proc in self.procs.values():
            proc.alive = False
        for path in self.sim.accounts.children:
            if path.startswith(self.prefix):
                self.sim.accounts.set_state(path, "down", now)
        self.sim.accounts.set_state(self.prefix.rstrip("/"), "down", now)
        for nested in self.nested.values():
            nested.lose()
        self.mailbox.clear()
        self.queue.clear()

    def _reply_shutdown(self, reason: ExitReason) -> None:
        parent = self.parent
        if parent is not None:
            parent.answer(parent.core.terminated(self.child_id, reason, self.sim.now))


class _Simulation:
    def __init__(
        self,
        spec: SupervisorSpec,
        faults: Mapping[str, FaultModel],
        duration: float,
        seed: int,
        root_restart_delay: float | None,
        keep_events: bool,
        calls: Iterable[Call] = (),
        cluster: Cluster | None = None,
    ) -> None:
        self.spec = spec
        self.cluster = cluster
        self.nodes = NodeTable(cluster) if cluster is not None else None
        self.previous: dict[str, str] = {}  # subtree path -> node of its last incarnation
        self.placements: list[tuple[float, str, str]] = []
        self.calls = sorted(calls, key=lambda c: c.at)  # stable: same time, given order
        self.results: list[CallResult] = []
        self.stop_requested = False
        self.root_name = spec.id
        self.duration = duration
        self.seed = seed
        self.root_restart_delay = root_restart_delay
        self.events: list[Event] | None = [] if keep_events else None
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable[[Any], None], Any]] = []
        self.seq = 0
        self.ended_at: float | None = None
        paths = _paths(spec)
        check_faults(faults, spec, added_workers(self.calls))
        self.models = dict(faults)
        self.specs: dict[str, AnySpec] = {}
        _collect_specs(spec, "", self.specs)
        self.faults: dict[str, _Faults] = {}
        self.accounts = Accounts.for_tree(paths)
        self.root: _Node | None = None
        self.last_pid = FIRST_PID - 1

    def at(self, time: float, fn: Callable[[Any], None], arg: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, self.seq, fn, arg))

    def new_pid(self) -> int:
        self.last_pid += 1
        return self.last_pid

    def faults_of(self, node: _Node, child_id: str) -> _Faults:
        """The faults of worker `child_id` of `node`, drawn from the model of its most
        specific key that `faults` has (`_Node.keys`); healthy if none."""
        path = node.path(child_id)
        faults = self.faults.get(path)
        if faults is None:
            key = next((k for k in node.keys(child_id) if k in self.models), None)
            model = _HEALTHY if key is None else self.models[key]
            faults = self.faults[path] = _Faults(model, self.seed, path, key)
        return faults

    def run(self) -> SimulationResult:
        if self.cluster is not None:
            for fault in self.cluster.schedule(self.seed, self.duration):
                self.at(fault.at, self._node_fault, fault)
        for path, model in self.models.items():
            for when, reason in model.absolute_exits():
                self.at(when, self._kill, (path, reason))
            if isinstance(model, Hang):
                for when in model.at:
                    self.at(when, self._hang, (path, model))
        self._start_root(None)
        for c in self.calls:
            self.at(c.at, self._call, c)
        heap, duration = self.heap, self.duration
        while heap and self.ended_at is None:
            when, _, fn, arg = heap[0]
            if when > duration:
                break
            heapq.heappop(heap)
            self.now = when
            fn(arg)
        children, tree = self.accounts.report(duration)
        return SimulationResult(
            spec=self.spec,
            seed=self.seed,
            duration=duration,
            ended_at=duration if self.ended_at is None else self.ended_at,
            events=self.events if self.events is not None else [],
            children=children,
            tree=tree,
            calls=self.results,
            placements=self.placements,
        )

    def answered(self, c: Call, value: Any, error: NannyError | None = None) -> None:
        self.results.append(CallResult(c, self.now, value, error))

    def _call(self, c: Call) -> None:
        node = self.root
        for name in c.supervisor.split("/") if c.supervisor else ():
            node = node.nested.get(name) if node is not None else None
        if node is None or node.dead:
            name = f"{self.root_name}/{c.supervisor}" if c.supervisor else self.root_name
            self.answered(c, None, SupervisorNotRunning(name))
            return
        node.deliver(_Call(c))

    # -- nodes ---------------------------------------------------------------------------

    def place(self, path: str, spec: SupervisorSpec) -> str | ExitReason:
        """The node a remote subtree starts on (choose_node, as live), or why it cannot."""
        assert self.nodes is not None and spec.placement is not None
        node = choose_node(spec.placement, self.nodes.live(), self.previous.get(path))
        if node is None:
            names = ", ".join(n.id for n in self.nodes.live()) or "none"
            return Placement.unplaceable(
                f"no live node fits placement {spec.placement} (live nodes: {names})"
            )
        if not self.nodes.reachable(node):
            return ExitReason.start_failure(f"node {node!r} is unreachable; cannot start there")
        self.previous[path] = node
        self.placements.append((self.now, path, node))
        return node

    def _subtrees_on(self, node: str) -> list[_Node]:
        """The remote subtrees on `node` (each placed there by its parent) whose parent
        has not been told of a fault there: running, or fenced."""
        found: list[_Node] = []
        stack = [self.root] if self.root is not None else []
        while stack:
            current = stack.pop()
            for nested in current.nested.values():
                if (
                    nested.host == node
                    and current.host != node
                    and (not nested.dead or nested.fenced)
                    and not nested.told
                ):
                    found.append(nested)
                else:
                    stack.append(nested)
        return found

    def _last_renewal(self, subtree: _Node, at: float) -> float:
        assert self.nodes is not None and self.cluster is not None and subtree.host is not None
        since = self.now if subtree.lease_from is None else subtree.lease_from
        return self.nodes.last_renewal(self.cluster.fencing, subtree.host, since, at)

    def _node_fault(self, fault: NodeFault) -> None:
        nodes, cluster = self.nodes, self.cluster
        assert nodes is not None and cluster is not None
        if isinstance(fault, NodeUp):
            nodes.join(fault.node)
        elif isinstance(fault, NodeDown):
            self._node_lost(fault.node, cluster.detection)
        elif fault.node in nodes.alive:
            node, until = fault.node, self.now + fault.duration
            nodes.cut_off[node] = nodes.cut_off.get(node, 0) + 1
            nodes.cuts.setdefault(node, []).append((self.now, until))
            lease = cluster.lease_timeout
            if lease is not None:  # each subtree there fences itself if it lasts
                for subtree in self._subtrees_on(node):
                    fence = self._last_renewal(subtree, self.now) + lease * Fencing.FENCE_AT
                    if fence < until:
                        self.at(max(fence, self.now), self._fence, subtree)
            if fault.duration >= cluster.declared_after:
                self.at(self.now + cluster.declared_after, self._declare, node)
            else:
                self.at(until, self._heal, node)

    def _fence(self, subtree: _Node) -> None:
        """Its lease ran out while cut off: it stopped its children (its parent hears
        of it at the heal, or at its node's declaration)."""
        if not subtree.dead and not subtree.told:
            subtree.lose()
            subtree.fenced = True

    def _heal(self, node: str) -> None:
        assert self.nodes is not None
        left = self.nodes.cut_off.get(node, 0) - 1
        if left > 0:
            self.nodes.cut_off[node] = left
            return
        self.nodes.cut_off.pop(node, None)
        # A fenced subtree's process exited: its death report comes through now.
        reason = ExitReason(ExitKind.REMOTE_CRASH, message="it fenced itself (lease expired)")
        for subtree in self._subtrees_on(node):
            if subtree.fenced:
                self._tell(subtree, reason, self.now)

    def _declare(self, node: str) -> None:
        """A silent node declared dead: its old incarnations stop, if their fence has
        not stopped them yet."""
        self._node_lost(node, 0.0)

    def _node_lost(self, node: str, detection: float) -> None:
        assert self.nodes is not None and self.cluster is not None
        if not self.nodes.declare_dead(node):
            return
        reason = ExitReason(ExitKind.NODE_DOWN, message=f"node {node!r} is dead")
        fencing = self.cluster.fencing
        for subtree in self._subtrees_on(node):
            if not subtree.dead:
                subtree.lose()
            wait = fencing.tell_after(reason, self.now, self._last_renewal(subtree, self.now))
            self._tell(subtree, reason, self.now + max(detection, wait or 0.0))

    def _tell(self, subtree: _Node, reason: ExitReason, at: float) -> None:
        """Its parent hears `reason` at `at` (once)."""
        subtree.told = True
        parent = subtree.parent
        assert parent is not None
        self.at(at, parent.deliver, _ChildExited(subtree.child_id, subtree.incarnation, reason))

    def _start_root(self, _: object) -> None:
        self.root = _Node(self, self.spec, "")
        self.accounts.set_root_running(True, self.now)
        self.root.deliver(_Init())

    def _processes(self, key: str) -> list[tuple[_Node, str, _Process]]:
        """The processes of the workers whose model is the one at `key` (a template's:
        each child started from it), in start order."""
        *parents, name = key.split("/")
        nodes = [self.root] if self.root is not None else []
        for part in parents:
            nodes = [n.nested[c] for n in nodes for c in n.named(part) if c in n.nested]
        found: list[tuple[_Node, str, _Process]] = []
        for node in nodes:
            for child_id in node.named(name):
                proc = node.procs.get(child_id)
                faults = self.faults.get(node.path(child_id))
                if proc is None or faults is None or faults.key != key:
                    continue  # not running, or its own model is another key's
                found.append((node, child_id, proc))
        return found

    def _kill(self, args: tuple[str, ExitReason]) -> None:
        """A scripted absolute exit of the model at `key`: every process of a worker
        whose model it is and that runs now. They end at once; then each supervisor
        hears of its children's, in start order."""
        key, reason = args
        ended = [(n, c, p) for n, c, p in self._processes(key) if n.die(c, p, reason)]
        for node, child_id, proc in ended:
            node.exited(child_id, proc)

    def _hang(self, args: tuple[str, Hang]) -> None:
        """A Hang's absolute time: every process of a worker whose model it is hangs."""
        key, model = args
        for node, child_id, proc in self._processes(key):
            node.hang((child_id, proc, model))

    def root_exited(self, reason: ExitReason) -> None:
        self.accounts.set_root_running(False, self.now)
        self.accounts.root_exits.append((self.now, reason))
        if not self.stop_requested:  # an operator's stop is no give-up
            self.accounts.give_ups.append(self.now)
        if self.root_restart_delay is None or self.stop_requested:
            self.ended_at = self.now
        else:
            self.at(self.now + self.root_restart_delay, self._start_root, None)

    def record(self, node: _Node, event: Event) -> None:
        if self.events is not None:
            self.events.append(event)
        offender = event.offender
        kind = event.context
        path = None
        if offender is not None and kind is not EventKind.STALE_EXIT_IGNORED:
            path = node.path(offender)
        # Automatic restarts only: not a fresh supervisor's starts, nor a call's (start_child).
        automatic = isinstance(node.current, _AUTOMATIC)
        restart = kind is EventKind.CHILD_STARTED and automatic
        finishes = False
        if path is not None and kind is EventKind.CHILD_EXITED:
            spec = self.specs[path]
            reason = event.reason
            finishes = spec.restart is Restart.TEMPORARY or (
                spec.restart is Restart.TRANSIENT and reason is not None and reason.is_normal
            )
        self.accounts.on_event(path, event, restart, finishes)


# -- the spec tree ---------------------------------------------------------------------


def _paths(spec: SupervisorSpec, prefix: str = "") -> dict[str, ChildType]:
    paths: dict[str, ChildType] = {}
    if spec.strategy is Strategy.SIMPLE_ONE_FOR_ONE:
        return paths
    for child in spec.children:
        path = prefix + child.id
        paths[path] = child.type
        if isinstance(child, SupervisorSpec):
            paths.update(_paths(child, path + "/"))
    return paths


def _collect_specs(spec: SupervisorSpec, prefix: str, out: dict[str, AnySpec]) -> None:
    for child in spec.children:
        out[prefix + child.id] = child
        if isinstance(child, SupervisorSpec):
            _collect_specs(child, prefix + child.id + "/", out)


def _start_timeout(spec: ChildSpec) -> ExitReason:
    return ExitReason(
        ExitKind.START_TIMEOUT,
        message=f"not ready within start_timeout={spec.start_timeout}s "
        f"(ready={spec.ready!r}); make it ready sooner or raise start_timeout",
    )


# -- the API ------------------------------------------------------------------------


def simulate(
    spec: SupervisorSpec,
    faults: Mapping[str, FaultModel] | None = None,
    *,
    duration: float,
    seed: int = DEFAULT_SEED,
    root_restart_delay: float | None = DEFAULT_ROOT_RESTART_DELAY,
    keep_events: bool = True,
    calls: Iterable[Call] = (),
    cluster: Cluster | None = None,
) -> SimulationResult:
    """Run `spec` for `duration` virtual seconds against `faults`; report what happened.

    - `faults`: a fault model per worker path ("web", "pool/w1"); below a
      simple_one_for_one supervisor, by its template ("pool/w": each child) or
      a child's id ("pool/w-2"); workers without one never fail.
    - `seed`: the same seed gives the same run; each worker draws from its
      own random streams, so specs compared on one seed share their faults
      as far as the runs allow.
    - `root_restart_delay`: None (default) ends the run when the root gives
      up; seconds > 0 start it again after that delay.
    - `keep_events`: False drops the event list (the reports are the same),
      for long runs.
    - `calls`: API calls at virtual times (`call(5.0, "pause_child", "web")`;
      a pid as `pid_of("w-2")`); their outcomes, in the order they were
      answered, are `result.calls`. Workers have pids (from 1000, in start order).
    - `cluster`: nodes for the subtrees with a `placement` (placed by
      `choose_node`, as live) and node faults (`NodeDown`, `Unreachable`,
      `NodeUp`, `NodeFailures`); `result.placements` says where each incarnation
      ran. Without one, placements are ignored (as a live tree without an engine).
    """
    if not isinstance(spec, SupervisorSpec):
        raise SpecError(None, "spec", spec, "simulate() takes a SupervisorSpec")
    if isinstance(duration, bool) or not isinstance(duration, int | float):
        raise SpecError(spec.id, "duration", duration, "expected virtual seconds > 0")
    if not (math.isfinite(duration) and duration > 0):
        raise SpecError(spec.id, "duration", duration, "expected virtual seconds > 0")
    if root_restart_delay is not None and not (
        isinstance(root_restart_delay, int | float)
        and math.isfinite(root_restart_delay)
        and root_restart_delay > 0
    ):
        raise SpecError(
            spec.id,
            "root_restart_delay",
            root_restart_delay,
            "expected None (the run ends at a give-up) or seconds > 0",
        )
    call_list = list(calls)
    for c in call_list:
        if not isinstance(c, Call):
            raise SpecError(spec.id, "calls", c, 'expected Call records, e.g. call(5.0, "stop")')
    if cluster is not None and not isinstance(cluster, Cluster):
        raise SpecError(spec.id, "cluster", cluster, "expected a Cluster (nodes and node faults)")
    sim = _Simulation(
        spec,
        faults or {},
        float(duration),
        seed,
        root_restart_delay,
        keep_events,
        call_list,
        cluster,
    )
    return sim.run()
