"""A simulated supervisor (`_Node`): NannyActor's mailbox and the core's actions
carried out in virtual time, one message at a time, as the live shell does.

It runs inside a `_World` (_run.py's `_Simulation`, which drives the clock, the
faults and the nodes) and calls back into it on every step; the messages it takes
and the processes it watches are here too. Nothing here is public.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

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
from .._errors import ChildNotRunning, NannyError, StartError, SupervisorNotRunning
from .._events import Event, EventKind, liveness_events
from .._reasons import ExitKind, ExitReason
from ..spec._fields import (
    BRUTAL_KILL,
    INFINITY,
    Strategy,
)
from ..spec._spec import (
    AnySpec,
    ChildSpec,
    SupervisorSpec,
)
from ._faults import START_FAILURE
from ._health import ProbeLoop, start_delay, step_run, stop_time
from ._messages import (
    _Call,
    _ChildExited,
    _Init,
    _Message,
    _Retry,
    _Shutdown,
    _Starting,
)
from ._nodes import (
    NodeTable,
)
from ._ops import QUERIES, STOP, Call, PidOf
from ._process import (
    _Faults,
    _Process,
)
from ._report import (
    Accounts,
)

# -- the simulated tree ------------------------------------------------------------------


class _Paths(dict[str, str]):
    """A supervisor's child ids -> their paths below the root, each made once: a plain
    dict lookup on the paths that take one per event."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def __missing__(self, child_id: str) -> str:
        path = self[child_id] = self.prefix + child_id
        return path


class _World(Protocol):
    """What a simulated supervisor needs of the run that drives it (_run.py's
    `_Simulation`): the clock and its heap, pids, faults, accounts and the record."""

    now: float
    root_name: str
    stop_requested: bool
    accounts: Accounts
    events: list[Event] | None  # None: not kept (a long run's sweep)
    nodes: NodeTable | None
    specs: dict[str, AnySpec]

    def at(self, time: float, fn: Callable[[Any], None], arg: Any) -> None: ...
    def new_pid(self) -> int: ...
    def faults_of(self, node: _Node, child_id: str) -> _Faults: ...
    def answered(self, c: Call, value: Any, error: NannyError | None = None) -> None: ...
    def place(self, path: str, spec: SupervisorSpec) -> str | ExitReason: ...
    def record(self, node: _Node, event: Event) -> None: ...
    def root_exited(self, reason: ExitReason) -> None: ...


class _Node:
    """One simulated supervisor: NannyActor's behaviour in virtual time."""

    def __init__(
        self,
        sim: _World,
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
        self.paths = _Paths(prefix)  # child id -> path below the root
        self.faults: dict[str, _Faults] = {}  # child id -> its faults (the run's, by path)

    def path(self, child_id: str) -> str:
        return self.paths[child_id]

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
            queue, mailbox, record = self.queue, self.mailbox, self.sim.record
            while not self.dead and not self.waiting:
                if queue:
                    action = queue.popleft()
                    if type(action) is Report:  # two actions in three: no dispatch for them
                        record(self, action.event)
                    elif type(action) is StartChild:  # the next most common: a restart's start
                        self._start(action.child_id, action.spec)
                    else:
                        self._step(action)
                elif self.current is not None:
                    if type(self.current) in _FINISHING:  # nothing to do after the others
                        self._finished(self.current)
                    self.current = None
                elif mailbox:
                    message = self.current = mailbox.popleft()
                    if type(message) is _ChildExited:  # most messages: _handle's first case
                        queue.extend(
                            self.core.child_exited(
                                message.child_id, message.incarnation, message.reason, self.sim.now
                            )
                        )
                    else:
                        queue.extend(self._handle(message))
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
        path = self.paths[child_id]
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
        faults = self.faults.get(child_id) or self._faults(child_id)
        fails = faults.may_fail_start and faults.start_fails()
        failure: ExitReason | None = START_FAILURE if fails else None
        step: ExitReason | None = None  # a one-shot step's exit (ready="exited")
        ready = spec.ready
        if ready == "started":  # the default: start_delay's model start, with no timeout
            delay = faults.combo.start_duration
        elif ready == "exited" and not fails:
            # Its start is its run: it is started when its process exits normally.
            hang = faults.hang_time()
            leak = faults.memory_limit_time(spec.memory_limit)
            delay, step = step_run(spec, faults.combo, faults.drawn_lifetime(), leak, hang)
            if not step.is_normal:
                failure = step  # a failed start, with its exit's reason (as live)
            if delay > spec.start_timeout:
                delay, failure = spec.start_timeout, _start_timeout(spec)
        else:
            delay, timed_out = start_delay(spec, faults.combo, fails)
            if timed_out:
                delay, failure = spec.start_timeout, _start_timeout(spec)
        now = self.sim.now
        if delay > 0:
            self.waiting = True
            starting = _Starting(child_id, spec, incarnation, faults, failure, now, step)
            self.sim.at(now + delay, self._start_done, starting)
        else:  # decided at once (most starts): no record of it
            started = self._started(child_id, spec, incarnation, faults, failure, now, step)
            self.queue.extend(started)

    def _faults(self, child_id: str) -> _Faults:
        faults = self.faults[child_id] = self.sim.faults_of(self, child_id)
        return faults

    def _start_done(self, s: _Starting) -> None:
        started = self._started(
            s.child_id, s.spec, s.incarnation, s.faults, s.failure, s.began, s.step
        )
        self.answer(started)

    def _started(
        self,
        child_id: str,
        spec: ChildSpec,
        incarnation: int,
        faults: _Faults,
        failure: ExitReason | None,
        began: float,  # when its process was started (probes and `answers_after` count from it)
        step: ExitReason | None,  # a one-shot step: how its run ended
    ) -> list[Action]:
        """A worker's start is decided: the core hears it. `spec` is the one its
        StartChild carried: the core, waiting for this answer, cannot have changed it."""
        now = self.sim.now
        if failure is not None:
            return self.core.start_failed(child_id, failure, now)
        proc = _Process(incarnation, self.sim.new_pid(), began + faults.combo.answers_after)
        self.procs[child_id] = proc
        if step is not None:  # a finished one-shot step: its exit follows its start
            proc.alive, proc.reason = False, step
            self.mailbox.append(_ChildExited(child_id, incarnation, step))
            return self.core.started(child_id, proc.pid, incarnation, now)
        single = faults.single_life
        if single is not None:  # faults.lifetime's first case, inlined: most starts
            faults.successes += 1
            life = single[0].lifetime(single[1].life, faults.successes)
        else:
            life = faults.lifetime(spec.memory_limit)
        after = faults.hang_time() if faults.hangs else None
        if after is not None and (life is None or after < life[0]):
            self.sim.at(now + after, self.hang, (child_id, proc))
        if life is not None:
            proc.child_id, proc.end = child_id, life[1]  # its end's record: the process
            self.sim.at(now + life[0], self._life_ends, proc)
        if spec.liveness is not None:
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
        faults = self.faults.get(child_id) or self._faults(child_id)
        now = self.sim.now
        ok, took, error = loop.attempt(
            faults.probe_passes,
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
        if verdict is not None and self.sim.events is not None:  # no count needs them
            for event in liveness_events(
                verdict,
                loop.health(),
                time=now,
                supervisor=self.core.name,
                child_id=child_id,
                pid=proc.pid,
                incarnation=proc.incarnation,
            ):
                self.sim.record(self, event)
        if verdict != "stop":
            self.sim.at(max(loop.due, now), self._probe, (child_id, proc, loop))
            return
        # Stopped as by its stop signal and shutdown; reported as unhealthy.
        proc.stopping = True
        self.sim.accounts.set_state(self.path(child_id), "down", now)
        spec = self.core.get_childspec(child_id)
        assert isinstance(spec, ChildSpec)
        delay = stop_time(spec, self.sim.faults_of(self, child_id).combo, proc.hung)
        self.sim.at(now + delay, self._process_exit, (child_id, proc, loop.stop_reason()))

    def _process_exit(self, args: tuple[str, _Process, ExitReason]) -> None:
        """A worker's process ends by itself (a fault)."""
        child_id, proc, reason = args
        if self.die(child_id, proc, reason):
            self.exited(child_id, proc)

    def _life_ends(self, proc: _Process) -> None:
        """A process reaches the end its models drew (`proc.end`), unless it hung before:
        a hung process does nothing, not even crash, until it is stopped."""
        child_id, reason = proc.child_id, proc.end
        assert reason is not None
        # _process_exit, die, exited and deliver inlined: once per crash.
        if proc.hung or self.dead or not proc.alive or self.procs.get(child_id) is not proc:
            return
        proc.alive, proc.reason = False, reason
        self.sim.accounts.set_state(self.paths[child_id], "down", self.sim.now)
        self.mailbox.append(_ChildExited(child_id, proc.incarnation, reason))
        self.run()

    def die(self, child_id: str, proc: _Process, reason: ExitReason) -> bool:
        """The process ends with `reason`, if it still runs (not stopped, nor stopping)."""
        if self.dead or not proc.alive or self.procs.get(child_id) is not proc:
            return False
        proc.alive, proc.reason = False, reason
        self.sim.accounts.set_state(self.paths[child_id], "down", self.sim.now)
        return True

    def exited(self, child_id: str, proc: _Process) -> None:
        """Tell the supervisor that `proc` (which `die` ended) exited."""
        assert proc.reason is not None
        self.deliver(_ChildExited(child_id, proc.incarnation, proc.reason))

    def hang(self, args: tuple[str, _Process]) -> None:
        """A process hangs: down for the user; its watchdog or its liveness probe tells
        its supervisor, whichever decides first (its probes fail from now on)."""
        child_id, proc = args
        if not proc.alive or proc.hung or self.procs.get(child_id) is not proc:
            return
        proc.hung = True
        self.sim.accounts.set_state(self.path(child_id), "hung", self.sim.now)
        if self.sim.events is not None:
            hung = Event(
                time=self.sim.now,
                supervisor=self.core.name,
                context=EventKind.CHILD_HUNG,
                offender=child_id,
                pid=proc.pid,
                incarnation=proc.incarnation,
                detail="it stopped answering (a Hang fault)",
            )
            self.sim.record(self, hung)
        spec = self.core.get_childspec(child_id)
        if not isinstance(spec, ChildSpec) or spec.watchdog is None or proc.stopping:
            return
        # The watchdog fires `watchdog` s after the last beat, then stops it as live.
        proc.watchdog_at = self.sim.now + spec.watchdog
        stop = stop_time(spec, self.sim.faults_of(self, child_id).combo, hung=True)
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
        model = self.sim.faults_of(self, child_id).combo
        need = model.stop_duration
        if proc.hung and not model.answers_sigterm:
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


_FINISHING = (_Init, _Shutdown)  # the messages `_finished` has something to do after


def _start_timeout(spec: ChildSpec) -> ExitReason:
    return ExitReason(
        ExitKind.START_TIMEOUT,
        message=f"not ready within start_timeout={spec.start_timeout}s "
        f"(ready={spec.ready!r}); make it ready sooner or raise start_timeout",
    )
