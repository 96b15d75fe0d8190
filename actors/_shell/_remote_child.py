"""RemoteChild: the parent's stand-in for a subtree on another node.

RemoteChild is a pykka actor in the parent's process that plays, for a remote
subtree, the role a nested NannyActor plays for a local one: the parent asks it
ShutdownTree(deadline); it tells the parent ChildExited once; its proxy forwards
the OTP API. Every engine call happens in its thread, with a timeout, never in
the parent nanny's (`_remote_calls.py`: a call it does not forward raises
NotForwarded). One RemoteChild per incarnation: a late message of an old
incarnation reaches a stopped actor (or a stale incarnation) and restarts nothing.

State machine (docs/multihost.md section 4): running -> unreachable (a failed
call, nothing charged) -> running again when a probe answers; -> exiting when the
engine says dead (REMOTE_CRASH, NODE_DOWN), when `supervision.Fencing` declares
the node down or the remote unresponsive, or when the remote tree ended by itself
(crosses as `shutdown`). An exit whose incarnation may still run is told to the
parent only once `Fencing` allows (section 5): once the incarnation is confirmed
gone, or its lease has run out and it has fenced itself, so that its restart
never runs beside it. The same holds for a stop the parent asks for. A start
that no live node can take fails "unplaceable" (`Placement.unplaceable`): the
core keeps the restart pending instead of charging it (section 2).
The far side is actors/_remote/_host.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from supervision import (
    Event,
    EventKind,
    ExitKind,
    ExitReason,
    Fencing,
    Placement,
    StartError,
    SupervisorSpec,
    choose_node,
    unknown_nodes,
)

from .._remote._port import (
    CALL_TIMEOUT,
    Engine,
    Outcome,
    RemoteDead,
    RemoteStartError,
)
from .._runtime._actor_loop import ThreadedActor
from .._runtime._timer import Scheduler
from ._api import SupervisorAPI
from ._messages import ChildExited, ShutdownTree
from ._remote_calls import RemoteCalls

log = logging.getLogger("nannytree")

START_TIMEOUT = 120.0  # a fresh node may set up a runtime_env first
PROBE_FIRST = 0.1  # Ray's own task_actor_unavailable_retry_delay_base_ms
PROBE_MAX = 2.0
CONFIRM_MAX = 0.5  # between two questions whether an exiting incarnation is gone
EVENT_POLL = 5.0  # seconds a long poll for the remote tree's events waits
# A stopped incarnation that could not be confirmed gone waits as a killed one does.
_KILLED = ExitReason(ExitKind.REMOTE_UNRESPONSIVE, message="stopped by its parent; killed")


class RemoteStatus:
    """What the parent nanny shows of a remote child: its node, pid, reachability.

    `unreachable_since` (time.monotonic(), the tree's clock) is when it stopped
    answering, None while it answers; it stays set while an exit waits for the
    old incarnation to be gone (it is never shown as running then).
    """

    def __init__(self, node: str, pid: int | None) -> None:
        self.node = node
        self.pid = pid
        self.unreachable_since: float | None = None

    @property
    def unreachable(self) -> bool:
        return self.unreachable_since is not None


@dataclass(frozen=True)
class _Outcome:
    incarnation: int
    outcome: Outcome


@dataclass(frozen=True)
class _Probe:
    delay: float


@dataclass(frozen=True)
class _Renew:
    pass


@dataclass(frozen=True)
class _Renewed:
    """A periodic renewal's answer: when it returned, or why it failed (and when it
    was sent: the far side has not answered since)."""

    returned: float | None = None
    sent: float = 0.0
    dead: ExitReason | None = None
    failure: str = ""


@dataclass(frozen=True)
class _Ping:
    pass


@dataclass(frozen=True)
class _Pong:
    dead: ExitReason | None = None  # the engine says the remote process is dead
    failure: str = ""  # no answer in time: why


@dataclass(frozen=True)
class _Declare:
    reason: ExitReason


@dataclass(frozen=True)
class _NodeLost:
    """Another remote subtree of the tree declared this one's node down."""

    node: str
    reason: ExitReason


@dataclass(frozen=True)
class _Confirm:
    """Ask whether the killed incarnation is gone yet (then its exit is told)."""

    delay: float


def start_remote(
    spec: SupervisorSpec, context: Any, link: Any
) -> tuple[pykka.ActorRef[RemoteChild], RemoteStatus]:
    """Place `spec` on a node of the tree's engine and start it there; raises StartError.

    The tree remembers where each remote subtree ran (`context.previous_nodes`, by
    path) and the nodes it declared down (`context.nodes_down`: never chosen again,
    as a Ray node that comes back has a new id, even while the engine still lists it).
    """
    engine: Engine = context.engine
    supervisor = link.name.rsplit("/", 1)[0]
    assert spec.placement is not None
    nodes: dict[str, str] = context.previous_nodes
    down: set[str] = context.nodes_down

    def node_lost(lost: str, reason: ExitReason) -> None:
        # Every subtree on the node is told at once (its own exit still waits for
        # its own fence); this one too, which is exiting already and lets it pass.
        for other in context.node_lost(lost):
            with contextlib.suppress(pykka.ActorDeadError):
                other.tell(_NodeLost(lost, reason))

    try:
        live = [n for n in engine.nodes() if n.id not in down]
    except Exception as e:
        raise StartError(supervisor, spec.id, ExitReason.start_failure(f"{e}")) from e
    node = choose_node(spec.placement, live, nodes.get(link.name))
    if link.name not in nodes:  # its first start: a misspelt node name is said, once
        _note_unknown_nodes(spec, supervisor, live, node, context.log, engine)
    if node is None:
        names = ", ".join(n.name or n.id for n in live) or "none"
        message = f"no live node fits placement {spec.placement} (live nodes: {names})"
        raise StartError(supervisor, spec.id, Placement.unplaceable(message))
    name = f"nannytree:{link.name}#{link.incarnation}"
    try:
        handle = engine.spawn(
            spec, node, link.incarnation, name, engine.lease_timeout, START_TIMEOUT
        )
    except Exception as e:
        if not _listed(engine, node):  # it left between the choice and the start
            why = e.reason if isinstance(e, RemoteStartError) else f"{type(e).__name__}: {e}"
            message = f"node {node!r} left before the start there ({why})"
            raise StartError(supervisor, spec.id, Placement.unplaceable(message)) from e
        if isinstance(e, RemoteStartError):
            raise StartError(supervisor, spec.id, e.reason) from e
        raise
    nodes[link.name] = node
    try:
        pid = engine.call(handle, "ping", timeout=CALL_TIMEOUT)
    except Exception:
        pid = None
    status = RemoteStatus(node, pid)
    ref = RemoteChild.start(
        spec, engine, handle, link, status, context.scheduler, node_lost, context.log
    )
    context.remote_started(node, ref)
    return ref, status


def _note_unknown_nodes(
    spec: SupervisorSpec,
    supervisor: str,
    live: list[Any],
    chosen: str | None,
    log_: Any,
    engine: Any,
) -> None:
    """A child_note (and a warning) for each node the placement names that no live node
    has: "prefer" would fall back without a word, "pinned" wait as pending."""
    assert spec.placement is not None
    notes = unknown_nodes(spec.placement, live)
    if not notes:
        return
    namer = getattr(engine, "node_name", None)
    where = "pending until one does" if chosen is None else f"placed on {chosen}"
    if chosen is not None and namer is not None:
        with contextlib.suppress(Exception):
            where = f"placed on {namer(chosen)}"
    for note in notes:
        detail = f"{note}; {where}"
        log.warning("remote subtree %s/%s: %s", supervisor, spec.id, detail)
        if log_ is not None:
            log_.append(
                Event(
                    time=time.monotonic(),
                    supervisor=supervisor,
                    context=EventKind.CHILD_NOTE,
                    offender=spec.id,
                    detail=detail,
                )
            )


def _next_tick(every: float) -> float:
    """Seconds to the next multiple of `every` on the monotonic clock: every remote
    subtree of the process renews its lease at the same instants, so the subtrees of
    one lost node run out of lease, and are told down, together."""
    return every - time.monotonic() % every


def _listed(engine: Engine, node: str) -> bool:
    """Whether the engine lists `node` as alive (True when it cannot say)."""
    try:
        return any(n.id == node for n in engine.nodes())
    except Exception:
        return True


class RemoteChild(RemoteCalls, ThreadedActor):
    """The parent's stand-in for one incarnation of a remote subtree."""

    use_daemon_thread = True

    def __init__(
        self,
        spec: SupervisorSpec,
        engine: Engine,
        handle: Any,
        link: Any,
        status: RemoteStatus,
        scheduler: Scheduler,
        node_down: Callable[[str, ExitReason], None] = lambda node, reason: None,
        log: Any = None,
    ) -> None:
        super().__init__()
        self._spec = spec
        self._engine = engine
        self._handle = handle
        self._parent = link.ref
        self._name = link.name
        self._supervisor = link.name.rsplit("/", 1)[0]
        self._incarnation = link.incarnation
        self.status = status
        self._node_down = node_down  # the tree's: never placed there again, all told
        self._scheduler = scheduler  # the tree's timers
        self._state = "running"  # running, unreachable, exiting, stopped
        # Opt-in (off by default): a hung remote supervisor is invisible to the engine;
        # it is asked this often to answer within this long (remote_unresponsive).
        self._liveness = engine.liveness_timeout
        self._fencing = Fencing(engine.lease_timeout, engine.unreachable_timeout, self._liveness)
        self._renew_every = self._fencing.renew_every
        self._last_renewal: float | None = time.monotonic() if self._renew_every else None
        self._pinging = False
        self._renewing = False
        self._killed = False
        self._exiting: ExitReason | None = None  # the exit it will tell
        # Beyond the port: an engine whose far side can say its fence is complete.
        self._fence_confirmed: Callable[[Any], bool] | None = getattr(
            engine, "fence_confirmed", None
        )
        self._log = log  # the parent tree's event log: the remote events join it
        self._forwarding = threading.Event()

    # -- lifecycle ---------------------------------------------------------------

    def on_start(self) -> None:
        self._park()
        if self._renew_every:
            self._later(_next_tick(self._renew_every), _Renew())
        if self._liveness:
            self._later(self._liveness, _Ping())
        if self._log is not None:
            self._forwarding.set()
            threading.Thread(
                target=self._forward_events, name=f"nannytree-events-{self._name}", daemon=True
            ).start()

    def on_stop(self) -> None:
        # The tree's scheduler cancels nothing: a timer that fires later tells a
        # stopped actor, and is dropped.
        self._forwarding.clear()
        if self._state in ("running", "unreachable", "exiting"):
            self._state = "stopped"
            self._kill()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Outcome):
            self._on_outcome(message)
        elif isinstance(message, ShutdownTree):
            return self._stop_remote(message.deadline)
        elif isinstance(message, _Probe):
            self._probe(message.delay)
        elif isinstance(message, _Renew):
            self._renew()
        elif isinstance(message, _Renewed):
            self._on_renewed(message)
        elif isinstance(message, _Declare):
            self._tell_exit(message.reason)
        elif isinstance(message, _Confirm):
            self._confirm(message)
        elif isinstance(message, _NodeLost):
            self._on_node_lost(message)
        elif isinstance(message, _Ping):
            self._ping()
        elif isinstance(message, _Pong):
            self._on_pong(message)
        else:
            raise TypeError(f"remote child {self._name!r} got an unknown message {message!r}")
        return None

    # -- the state machine -------------------------------------------------------------

    def _park(self) -> None:
        ref, incarnation = self.actor_ref, self._incarnation

        def deliver(outcome: Outcome) -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(_Outcome(incarnation, outcome))

        self._engine.wait_exit(self._handle, deliver)

    def _on_outcome(self, message: _Outcome) -> None:
        outcome = message.outcome
        if message.incarnation != self._incarnation:
            log.debug("remote child %r: late %s ignored", self._name, outcome)
            return
        if self._state == "exiting":  # the death report of a killed incarnation: gone
            if outcome.kind == "dead" and outcome.reason is not None:
                self._confirmed(outcome.reason)
            return
        if self._state not in ("running", "unreachable"):
            log.debug("remote child %r: late %s ignored", self._name, outcome)
            return
        if outcome.kind == "unreachable":
            self._unreachable(outcome.message)
            return
        if outcome.kind == "exited":
            reason = ExitReason.shutdown(f"the remote supervisor ended: {outcome.reason}")
        else:
            assert outcome.reason is not None
            reason = outcome.reason
        self._exit(reason)

    def _unreachable(self, why: str, since: float | None = None) -> None:
        """Not answering since `since` (the failed call's sending time; now if None):
        the bounds that count silence (Fencing.verdict) count from there."""
        if self._state == "running":
            log.info("remote child %r unreachable: %s", self._name, why)
            self._state = "unreachable"
            self.status.unreachable_since = time.monotonic() if since is None else since
            self._later(PROBE_FIRST, _Probe(PROBE_FIRST))

    def _probe(self, delay: float) -> None:
        if self._state != "unreachable":
            return
        node = self.status.node
        since = self.status.unreachable_since
        assert since is not None
        listed = _listed(self._engine, node)  # no word: only the bounds may declare it
        if self._fenced():
            # Its far side says it stopped every child (it lost its raylet, or its lease
            # ran out) while we cannot reach it: this incarnation is over, a new one is
            # safe at once, and not on that node, which the engine may still list for
            # a while (Ray's default health check takes about 65 s): node_down.
            reason = ExitReason(
                ExitKind.NODE_DOWN,
                message=f"its node {node} is cut off; its far side fenced itself, "
                "every child stopped",
            )
            self._state, self._exiting = "exiting", reason
            self._node_down(node, reason)
            self._tell_exit(reason)
            return
        verdict = self._fencing.verdict(time.monotonic(), node, since, listed=listed)
        if verdict is not None:
            self._exit(verdict)
            return
        try:
            self._engine.call(self._handle, "ping", timeout=min(PROBE_MAX, 1.0))
        except RemoteDead as e:
            self._exit(e.reason)
            return
        except Exception:
            next_delay = min(PROBE_MAX, delay * 2)
            self._later(next_delay, _Probe(next_delay))
            return
        # A false alarm: nothing was charged; renew the lease at once, park a new wait.
        self._state = "running"
        self.status.unreachable_since = None
        self._renew_once()
        if self._state == "running":
            self._park()

    def _renew(self) -> None:
        every = self._renew_every
        if self._state not in ("running", "unreachable") or not every:
            return
        # Not while unreachable: a renewal stuck on the way could reach the far side
        # late and stretch its lease past the parent's bound; the probe renews on
        # the first answer. On a thread: a far side that does not answer would hold
        # this actor for the call's timeout, and with it the liveness verdict.
        if self._state == "running" and not self._renewing:
            self._renewing = True
            ref, engine, handle = self.actor_ref, self._engine, self._handle

            def renew() -> None:
                sent = time.monotonic()
                try:
                    engine.call(handle, "renew_lease", time.time(), timeout=every)
                    answer = _Renewed(returned=time.monotonic())
                except RemoteDead as e:
                    answer = _Renewed(sent=sent, dead=e.reason)
                except Exception as e:
                    answer = _Renewed(sent=sent, failure=f"{type(e).__name__}: {e}")
                with contextlib.suppress(pykka.ActorDeadError):
                    ref.tell(answer)

            threading.Thread(
                target=renew, name=f"nannytree-lease-{self._name}", daemon=True
            ).start()
        self._later(_next_tick(every), _Renew())

    def _on_renewed(self, message: _Renewed) -> None:
        self._renewing = False
        if message.returned is not None:
            if self._last_renewal is None or message.returned > self._last_renewal:
                self._last_renewal = message.returned
        elif message.dead is not None:
            if self._state in ("running", "unreachable"):
                self._exit(message.dead)
        else:
            self._unreachable(f"lease renewal failed: {message.failure}", message.sent)

    def _renew_once(self) -> None:
        every = self._renew_every
        if not every:
            return
        sent = time.monotonic()
        try:
            # With its sending time: the far side refuses it if it comes too late.
            self._engine.call(self._handle, "renew_lease", time.time(), timeout=every)
            self._last_renewal = time.monotonic()
        except RemoteDead as e:
            self._exit(e.reason)
        except Exception as e:
            self._unreachable(f"lease renewal failed: {e}", sent)

    def _forward_events(self) -> None:
        """The remote tree's events, into the parent's log, under this child's path and on
        the parent's clock (a long poll per batch; retried while unreachable)."""
        since, prefix = 0, self._name
        while self._forwarding.is_set():
            try:
                events, since, remote_now = self._engine.call(
                    self._handle,
                    "wait_events",
                    since,
                    EVENT_POLL,
                    timeout=EVENT_POLL + CALL_TIMEOUT,
                )
            except RemoteDead:
                return
            except Exception:
                self._forwarding.wait(1.0)  # unreachable: the state machine is in charge
                continue
            offset = time.monotonic() - remote_now
            for event in events:
                if not self._forwarding.is_set():
                    return
                supervisor = prefix + event.supervisor[len(self._spec.id) :]
                self._log.append(
                    dataclasses.replace(event, supervisor=supervisor, time=event.time + offset)
                )

    def _ping(self) -> None:
        """The liveness check, on a thread of its own: the API stays answered meanwhile.
        Asked while unreachable too: a question unanswered for `liveness_timeout` is
        the verdict, so it comes within twice that of the last answer."""
        limit = self._liveness
        if limit is None or self._state not in ("running", "unreachable"):
            return
        if self._pinging:
            self._later(limit, _Ping())
            return
        self._pinging = True
        ref, engine, handle = self.actor_ref, self._engine, self._handle

        def ask() -> None:
            answer = _Pong()
            try:
                engine.call(handle, "liveness", limit, timeout=limit)
            except RemoteDead as e:
                answer = _Pong(dead=e.reason)
            except Exception as e:
                answer = _Pong(failure=f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(answer)

        threading.Thread(target=ask, name=f"nannytree-liveness-{self._name}", daemon=True).start()

    def _on_pong(self, message: _Pong) -> None:
        self._pinging = False
        if self._state not in ("running", "unreachable") or self._liveness is None:
            return
        if message.dead is not None:
            self._exit(message.dead)
        elif message.failure:
            self._exit(
                ExitReason(
                    ExitKind.REMOTE_UNRESPONSIVE,
                    message=f"the remote supervisor did not answer a liveness check within "
                    f"{self._liveness}s ({message.failure}); killed",
                )
            )
        else:
            self._later(self._liveness, _Ping())

    def _on_node_lost(self, message: _NodeLost) -> None:
        if self._state not in ("running", "unreachable") or message.node != self.status.node:
            return
        self._exit(
            ExitReason(
                ExitKind.NODE_DOWN,
                message=f"node {message.node} is down (a sibling subtree there: "
                f"{message.reason.message})",
            )
        )

    def _exit(self, reason: ExitReason) -> None:
        self._state, self._exiting = "exiting", reason
        if reason.kind is ExitKind.REMOTE_UNRESPONSIVE:
            # Hung, or cut off: killed now (on a thread: a kill may wait for the hung
            # process); told once the kill is confirmed, or once its fence is sure to
            # have stopped it if the kill could not reach it.
            self._killed = True
            threading.Thread(target=self._kill, daemon=True).start()
        if reason.kind is ExitKind.NODE_DOWN:
            self._node_down(self.status.node, reason)
        wait = self._fencing.tell_after(reason, time.monotonic(), self._last_renewal)
        if wait is not None and wait <= 0:
            self._tell_exit(reason)
            return
        # It may still run: shown unreachable (never running) until it is gone.
        if self.status.unreachable_since is None:
            self.status.unreachable_since = time.monotonic()
        if wait is not None:
            log.info("remote child %r: %s; waiting %.1fs for its fence", self._name, reason, wait)
            self._later(wait, _Declare(reason))
        if self._killed or self._fence_confirmed is not None:
            log.info("remote child %r: %s; waiting until it is confirmed gone", self._name, reason)
            self._later(PROBE_FIRST, _Confirm(PROBE_FIRST))

    def _confirm(self, message: _Confirm) -> None:
        """Is the incarnation gone? The death report of its kill says so
        (Fencing.confirms), or its far side's word that its fence is complete."""
        if self._state != "exiting":
            return
        if self._fenced():
            assert self._exiting is not None
            self._tell_exit(self._exiting)
            return
        if self._killed:
            try:
                self._engine.call(self._handle, "ping", timeout=min(PROBE_MAX, 1.0))
            except RemoteDead as e:
                if self._confirmed(e.reason):
                    return
            except Exception:
                pass  # no answer: not confirmed
        delay = min(CONFIRM_MAX, message.delay * 2)
        self._later(delay, _Confirm(delay))

    def _fenced(self) -> bool:
        """The engine's word that this incarnation fenced itself, every child stopped
        (RayEngine.fence_confirmed); False when it has none or cannot say."""
        if self._fence_confirmed is None:
            return False
        try:
            return bool(self._fence_confirmed(self._handle))
        except Exception:
            return False

    def _confirmed(self, death: ExitReason) -> bool:
        """Tell the exit if the engine's death report `death` shows the incarnation gone."""
        if self._state != "exiting" or not self._killed or not self._fencing.confirms(death):
            return False
        assert self._exiting is not None
        self._tell_exit(self._exiting)
        return True

    def _tell_exit(self, reason: ExitReason) -> None:
        if self._state != "exiting":
            return
        self._state = "stopped"
        if not self._killed:
            self._kill()  # best effort: Akka's quarantine, this incarnation is over
        with contextlib.suppress(pykka.ActorDeadError):
            self._parent.tell(ChildExited(self._spec.id, self._incarnation, None, reason))
        self.actor_ref.stop(block=False)

    def _stop_remote(self, deadline: float | None) -> ExitReason:
        """ShutdownTree from the parent: an orderly remote stop, bounded by `deadline`.

        Answered once the incarnation is gone (its tree stopped, or its death confirmed)
        or has fenced itself, as an exit is told: what the parent starts next never
        runs beside it. Past `deadline` the parent waits no longer.
        """
        if self._state == "stopped":
            return ExitReason.shutdown("already stopped")
        self._state = "stopped"
        self._forwarding.clear()
        timeout = None if deadline is None else deadline - time.monotonic()
        gone = False
        if timeout is None or timeout > 0:
            try:
                self._engine.call(self._handle, "shutdown", timeout=timeout)
                gone = True  # its tree stopped, every child with it
            except RemoteDead as e:
                gone = self._fencing.confirms(e.reason)
            except Exception as e:
                log.info("remote child %r: orderly stop failed (%s); killing it", self._name, e)
        self._kill()
        if not gone:
            self._wait_gone(deadline)
        self.actor_ref.stop(block=False)
        return ExitReason.shutdown()

    def _wait_gone(self, deadline: float | None) -> None:
        """After a kill: until its death is confirmed, its fence is sure, or `deadline`."""
        delay = PROBE_FIRST
        while True:
            now = time.monotonic()
            left = None if deadline is None else deadline - now
            fenced = self._fencing.tell_after(_KILLED, now, self._last_renewal)
            if (left is not None and left <= 0) or fenced == 0.0:
                return
            if self._fenced():
                return
            try:
                self._engine.call(self._handle, "ping", timeout=min(PROBE_MAX, 1.0))
            except RemoteDead as e:
                if self._fencing.confirms(e.reason):
                    return
            except Exception:
                pass
            time.sleep(min(t for t in (delay, left, fenced) if t is not None))
            delay = min(CONFIRM_MAX, delay * 2)

    def _kill(self) -> None:
        try:
            self._engine.kill(self._handle)
        except Exception:
            log.exception("remote child %r: kill failed", self._name)

    def _later(self, delay: float, message: Any) -> None:
        ref = self.actor_ref

        def post() -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(message)

        self._scheduler.call_later(delay, post)


# mypy checks here that RemoteChild answers every call of the API (or says it is
# not forwarded), as a nested NannyActor does.
_ANSWERS_THE_API: type[SupervisorAPI] = RemoteChild
