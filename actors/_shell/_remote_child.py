"""RemoteChild: the parent's stand-in for a subtree on another node.

RemoteChild is a pykka actor in the parent's process that plays, for a remote
subtree, the role a nested NannyActor plays for a local one: the parent asks it
ShutdownTree(deadline); it tells the parent ChildExited once; its proxy forwards
the OTP API. Every engine call happens in its thread, with a timeout, never in
the parent nanny's. One RemoteChild per incarnation: a late message of an old
incarnation reaches a stopped actor (or a stale incarnation) and restarts nothing.

State machine (docs/multihost.md section 4): running -> unreachable (a failed
call, nothing charged) -> running again when a probe answers; -> exited when the
engine says dead (REMOTE_CRASH, NODE_DOWN), when `supervision.Fencing` declares
the node down, or when the remote tree ended by itself (crosses as `shutdown`).
With a lease on, a NODE_DOWN is told to the parent only once the lease has run
out since its last renewal (section 5): by then the old incarnation has fenced
itself (stopped its children), so a restart elsewhere does not run beside it.
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
    ChildNotRunning,
    ExitKind,
    ExitReason,
    Fencing,
    StartError,
    SupervisorSpec,
    choose_node,
)

from .._remote._port import (
    CALL_TIMEOUT,
    Engine,
    Outcome,
    RemoteApiError,
    RemoteDead,
    RemoteStartError,
    RemoteUnreachable,
)
from .._runtime._actor_loop import ThreadedActor
from .._runtime._timer import Scheduler
from ._messages import ChildExited, ShutdownTree

log = logging.getLogger("nannytree")

START_TIMEOUT = 120.0  # a fresh node may set up a runtime_env first
PROBE_FIRST = 0.1  # Ray's own task_actor_unavailable_retry_delay_base_ms
PROBE_MAX = 2.0
EVENT_POLL = 5.0  # seconds a long poll for the remote tree's events waits


class RemoteStatus:
    """What the parent nanny shows of a remote child: its node, pid, reachability."""

    def __init__(self, node: str, pid: int | None) -> None:
        self.node = node
        self.pid = pid
        self.unreachable = False


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
class _Ping:
    pass


@dataclass(frozen=True)
class _Pong:
    dead: ExitReason | None = None  # the engine says the remote process is dead
    failure: str = ""  # no answer in time: why


@dataclass(frozen=True)
class _Declare:
    reason: ExitReason


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
    try:
        live = [n for n in engine.nodes() if n.id not in down]
    except Exception as e:
        raise StartError(supervisor, spec.id, ExitReason.start_failure(f"{e}")) from e
    node = choose_node(spec.placement, live, nodes.get(link.name))
    if node is None:
        names = ", ".join(n.name or n.id for n in live) or "none"
        raise StartError(
            supervisor,
            spec.id,
            ExitReason.start_failure(
                f"no live node fits placement {spec.placement} (live nodes: {names})"
            ),
        )
    name = f"nannytree:{link.name}#{link.incarnation}"
    try:
        handle = engine.spawn(
            spec, node, link.incarnation, name, engine.lease_timeout, START_TIMEOUT
        )
    except RemoteStartError as e:
        raise StartError(supervisor, spec.id, e.reason) from e
    nodes[link.name] = node
    try:
        pid = engine.call(handle, "ping", timeout=CALL_TIMEOUT)
    except Exception:
        pid = None
    status = RemoteStatus(node, pid)
    ref = RemoteChild.start(
        spec, engine, handle, link, status, context.scheduler, down.add, context.log
    )
    return ref, status


class RemoteChild(ThreadedActor):
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
        node_down: Callable[[str], None] = lambda node: None,
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
        self._node_down = node_down  # the tree's: never placed there again
        self._scheduler = scheduler  # the tree's timers
        self._state = "running"  # running, unreachable, exiting, stopped
        self._fencing = Fencing(engine.lease_timeout, engine.unreachable_timeout)
        self._renew_every = self._fencing.renew_every
        self._last_renewal: float | None = time.monotonic() if self._renew_every else None
        self._unreachable_since = 0.0
        # Opt-in (off by default): a hung remote supervisor is invisible to the engine;
        # it is asked this often to answer within this long (remote_unresponsive).
        self._liveness = engine.liveness_timeout
        self._pinging = False
        self._killed = False
        self._log = log  # the parent tree's event log: the remote events join it
        self._forwarding = threading.Event()

    # -- lifecycle ---------------------------------------------------------------

    def on_start(self) -> None:
        self._park()
        if self._renew_every:
            self._later(self._renew_every, _Renew())
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
        if self._state in ("running", "unreachable"):
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
        elif isinstance(message, _Declare):
            self._tell_exit(message.reason)
        elif isinstance(message, _Ping):
            self._ping()
        elif isinstance(message, _Pong):
            self._on_pong(message)
        else:
            raise TypeError(f"remote child {self._name!r} got an unknown message {message!r}")
        return None

    # -- the OTP API, forwarded --------------------------------------------------

    def which_children(self) -> Any:
        return self._api("which_children")

    def which_child(self, key: Any) -> Any:
        return self._api("which_child", key)

    def count_children(self) -> Any:
        return self._api("count_children")

    def get_childspec(self, key: Any) -> Any:
        return self._api("get_childspec", key)

    def start_child(self, spec_or_args: Any = None) -> Any:
        return self._api("start_child", spec_or_args)

    def terminate_child(self, key: Any) -> Any:
        return self._api("terminate_child", key)

    def restart_child(self, key: Any) -> Any:
        return self._api("restart_child", key)

    def delete_child(self, key: Any) -> Any:
        return self._api("delete_child", key)

    def pause_child(self, key: Any) -> Any:
        return self._api("pause_child", key)

    def resume_child(self, key: Any) -> Any:
        return self._api("resume_child", key)

    def signal_child(self, key: Any, sig: int) -> Any:
        return self._api("signal_child", key, int(sig))

    def read_output(self, key: Any, stream: str = "stderr") -> Any:
        return self._api("read_output", key, stream)

    def events(self) -> Any:
        """The remote tree's own events (its children's exits and restarts)."""
        return self._api("events")

    def which_tree(self) -> Any:
        """The remote subtree, with paths under this child's path and each node named."""
        return [self._relocate(n) for n in self._api("which_tree")]

    def node(self) -> str:
        return self.status.node

    def handle(self) -> Any:
        """The engine's handle of this incarnation (for fault injection in tests)."""
        return self._handle

    def _relocate(self, tree_node: Any) -> Any:
        path = self._name + tree_node.path[len(self._spec.id) :]
        info = dataclasses.replace(tree_node.info, node=self.status.node)
        children = tuple(self._relocate(c) for c in tree_node.children)
        return dataclasses.replace(tree_node, info=info, path=path, children=children)

    def _api(self, method: str, *args: Any) -> Any:
        if self._state != "running":
            raise ChildNotRunning(self._supervisor, self._spec.id, f"call {method}: {self._state}")
        try:
            return self._engine.call(self._handle, "api", method, *args, timeout=CALL_TIMEOUT)
        except (RemoteUnreachable, RemoteDead) as e:
            raise ChildNotRunning(self._supervisor, self._spec.id, f"call {method}: {e}") from e
        except RemoteApiError as e:
            raise e.rebuild() from None

    # -- the state machine -------------------------------------------------------------

    def _park(self) -> None:
        ref, incarnation = self.actor_ref, self._incarnation

        def deliver(outcome: Outcome) -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(_Outcome(incarnation, outcome))

        self._engine.wait_exit(self._handle, deliver)

    def _on_outcome(self, message: _Outcome) -> None:
        if message.incarnation != self._incarnation or self._state not in (
            "running",
            "unreachable",
        ):
            log.debug("remote child %r: late %s ignored", self._name, message.outcome)
            return
        outcome = message.outcome
        if outcome.kind == "unreachable":
            self._unreachable(outcome.message)
            return
        if outcome.kind == "exited":
            reason = ExitReason.shutdown(f"the remote supervisor ended: {outcome.reason}")
        else:
            assert outcome.reason is not None
            reason = outcome.reason
        self._exit(reason)

    def _unreachable(self, why: str) -> None:
        if self._state == "running":
            log.info("remote child %r unreachable: %s", self._name, why)
            self._state = "unreachable"
            self.status.unreachable = True
            self._unreachable_since = time.monotonic()
            self._later(PROBE_FIRST, _Probe(PROBE_FIRST))

    def _probe(self, delay: float) -> None:
        if self._state != "unreachable":
            return
        node = self.status.node
        try:
            listed = any(n.id == node for n in self._engine.nodes())
        except Exception:
            listed = True  # no word from the engine: only the bound may declare it down
        verdict = self._fencing.verdict(
            time.monotonic(), node, self._unreachable_since, listed=listed
        )
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
        # A false alarm: nothing was charged; park a new wait.
        self._state = "running"
        self.status.unreachable = False
        self._park()

    def _renew(self) -> None:
        every = self._renew_every
        if self._state not in ("running", "unreachable") or not every:
            return
        try:
            self._engine.call(self._handle, "renew_lease", timeout=every)
            self._last_renewal = time.monotonic()
        except RemoteDead as e:
            self._exit(e.reason)
            return
        except Exception as e:
            self._unreachable(f"lease renewal failed: {e}")
        self._later(every, _Renew())

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
        """The liveness check, on a thread of its own: the API stays answered meanwhile."""
        limit = self._liveness
        if limit is None or self._state not in ("running", "unreachable"):
            return
        if self._state == "unreachable" or self._pinging:
            self._later(limit, _Ping())  # the probe is in charge while it is unreachable
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
        if self._state != "running" or self._liveness is None:
            if self._state == "unreachable" and self._liveness is not None:
                self._later(self._liveness, _Ping())
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

    def _exit(self, reason: ExitReason) -> None:
        self._state = "exiting"
        if reason.kind is ExitKind.REMOTE_UNRESPONSIVE:
            # Hung, or cut off: killed now (on a thread: a kill may wait for the hung
            # process); restarted elsewhere only once its fence is sure to have
            # stopped it, if the kill could not reach it.
            self._killed = True
            threading.Thread(target=self._kill, daemon=True).start()
        if reason.kind is ExitKind.NODE_DOWN:
            self._node_down(self.status.node)
        wait = self._fencing.tell_after(reason, time.monotonic(), self._last_renewal)
        if wait > 0:
            log.info("remote child %r: %s; waiting %.1fs for its fence", self._name, reason, wait)
            self._later(wait, _Declare(reason))
        else:
            self._tell_exit(reason)

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
        """ShutdownTree from the parent: an orderly remote stop, bounded by `deadline`."""
        if self._state == "stopped":
            return ExitReason.shutdown("already stopped")
        self._state = "stopped"
        timeout = None if deadline is None else deadline - time.monotonic()
        if timeout is None or timeout > 0:
            try:
                self._engine.call(self._handle, "shutdown", timeout=timeout)
            except Exception as e:
                log.info("remote child %r: orderly stop failed (%s); killing it", self._name, e)
        self._kill()
        self.actor_ref.stop(block=False)
        return ExitReason.shutdown()

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
