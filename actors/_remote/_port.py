"""The engine port: what a tree needs of a distributed engine to run a subtree on
another node, and FakeEngine, an in-process adapter for fast deterministic tests.

The port (the anyio style: a small contract, adapters behind it):
- `nodes()`: the live nodes now, as supervision.NodeInfo;
- `spawn(spec, node, incarnation, name, lease_timeout, timeout)`: start a complete
  tree for `spec` on `node` (a RemoteHost there) and return a handle once every
  child has started; raises RemoteStartError;
- `wait_exit(handle, callback)`: park one call; `callback(Outcome)` runs once, in
  any thread, when the remote tree ends by itself, dies, or cannot be reached;
- `call(handle, method, *args, timeout)`: call a RemoteHost method; raises
  RemoteUnreachable (timeout, connection lost) or RemoteDead (its death report);
- `kill(handle)`: best effort, no answer awaited; the remote lifeline sweeps.

`actors.ray.RayEngine` is the real adapter. Nothing here imports Ray.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from supervision import ExitKind, ExitReason, NodeInfo, SupervisorSpec

if TYPE_CHECKING:
    from .._shell._remote_child import RemoteHost


@dataclass(frozen=True)
class Outcome:
    """How a parked wait_exit ended.

    - "exited": the remote tree stopped by itself (gave up, auto_shutdown); `reason` is its own;
    - "dead": the engine declared it dead; `reason` is REMOTE_CRASH or NODE_DOWN;
    - "unreachable": the call failed but the remote may still live: not an exit.
    """

    kind: Literal["exited", "dead", "unreachable"]
    reason: ExitReason | None = None
    message: str = ""


class RemoteStartError(Exception):
    """A remote subtree could not be started (no such node, start failure, timeout)."""

    def __init__(self, message: str, reason: ExitReason | None = None) -> None:
        super().__init__(message)
        self.reason = reason or ExitReason.start_failure(message)


class RemoteUnreachable(Exception):
    """A call to a remote subtree timed out or lost its connection; it may still live."""


class RemoteDead(Exception):
    """The engine reported the remote subtree dead; `reason` says how."""

    def __init__(self, reason: ExitReason) -> None:
        super().__init__(str(reason))
        self.reason = reason


class Handle(Protocol):
    node: str
    incarnation: int


class Engine(Protocol):
    """The port a tree's RemoteChild uses; see the module docstring."""

    def nodes(self) -> list[NodeInfo]: ...

    def spawn(
        self,
        spec: SupervisorSpec,
        node: str,
        incarnation: int,
        name: str,
        lease_timeout: float | None,
        timeout: float,
    ) -> Any: ...

    def wait_exit(self, handle: Any, callback: Callable[[Outcome], None]) -> None: ...

    def call(self, handle: Any, method: str, *args: Any, timeout: float | None) -> Any: ...

    def kill(self, handle: Any) -> None: ...

    @property
    def lease_timeout(self) -> float | None: ...


def engine_from_address(address: str) -> Engine:
    """The engine `nannytree run --engine ADDRESS` names: "auto" (the Ray cluster of
    this host), "ray://HOST:PORT" (a Ray client address), "HOST:PORT" (a GCS address)
    or "local" (a Ray started for this run). Needs the ray extra."""
    if not address:
        raise ValueError('an engine address is "auto", "local", "ray://HOST:PORT" or HOST:PORT')
    try:
        from ..ray import RayEngine
    except ImportError as e:
        raise ValueError(
            f'--engine needs Ray: pip install "nannytree[ray]" ({type(e).__name__}: {e})'
        ) from e
    return RayEngine(None if address == "local" else address)


# -- FakeEngine ----------------------------------------------------------------------


@dataclass
class FakeHandle:
    node: str
    incarnation: int
    host: RemoteHost
    name: str
    crashed: bool = False
    callbacks: list[Callable[[Outcome], None]] = field(default_factory=list)


@dataclass
class _FakeNode:
    info: NodeInfo
    down: bool = False
    unreachable: bool = False  # calls fail at once (connection reset)
    silent: bool = False  # calls hang: parked ones never return, others time out


class FakeEngine:
    """Every "node" is a name in this process; every remote tree a real local Tree.

    Inject faults: `unreachable(node)` (connection reset: parked waits report
    "unreachable", calls fail), `silence(node)` (nothing answers), `heal(node)`,
    `node_down(node, kill=...)` (the engine declares it dead; `kill=False` leaves its
    trees running, as a frozen host that thaws), `crash(handle)` (the remote
    supervisor's process dies) and `replay(handle, outcome)` (a late message).
    """

    def __init__(
        self,
        nodes: list[str] | None = None,
        *,
        lease_timeout: float | None = None,
        unreachable_timeout: float | None = None,
        liveness_timeout: float | None = None,
    ):
        self._lock = threading.Condition()
        self._nodes = {n: _FakeNode(NodeInfo(n, n)) for n in (nodes or ["local"])}
        self._handles: list[FakeHandle] = []
        self._lease_timeout = lease_timeout
        self.unreachable_timeout = unreachable_timeout
        self.liveness_timeout = liveness_timeout
        self._seq = itertools.count()
        self.spawned: list[tuple[str, int]] = []  # (node, incarnation), in order

    @property
    def lease_timeout(self) -> float | None:
        return self._lease_timeout

    # -- the port -----------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        with self._lock:
            return [n.info for n in self._nodes.values() if not n.down]

    def spawn(
        self,
        spec: SupervisorSpec,
        node: str,
        incarnation: int,
        name: str,
        lease_timeout: float | None,
        timeout: float,
    ) -> FakeHandle:
        with self._lock:
            state = self._nodes.get(node)
            if state is None or state.down or state.unreachable or state.silent:
                raise RemoteStartError(f"node {node!r} is not alive; cannot place {name!r} there")
        from .._shell._remote_child import RemoteHost  # it imports this module

        box: list[FakeHandle] = []

        def fenced() -> None:  # as a Ray worker exits once fenced: a process death
            if box:
                box[0].crashed = True
            self._notify()

        host = RemoteHost(
            spec, incarnation, lease_timeout=lease_timeout, watch_parent=False, on_fenced=fenced
        )
        try:
            host.start()
        except Exception as e:
            host.kill()
            reason = getattr(e, "reason", None)
            raise RemoteStartError(f"{name!r} failed to start on {node!r}: {e}", reason) from e
        handle = FakeHandle(node, incarnation, host, name)
        box.append(handle)
        host.on_end(self._notify)
        with self._lock:
            self._handles.append(handle)
            self.spawned.append((node, incarnation))
        return handle

    def wait_exit(self, handle: FakeHandle, callback: Callable[[Outcome], None]) -> None:
        with self._lock:
            handle.callbacks.append(callback)
        threading.Thread(
            target=self._park, args=(handle, callback), daemon=True, name="fake-wait-exit"
        ).start()

    def call(self, handle: FakeHandle, method: str, *args: Any, timeout: float | None) -> Any:
        self._check(handle)
        result = getattr(handle.host, method)(*args)
        self._check(handle)  # the node may have gone while it ran
        return result

    def kill(self, handle: FakeHandle) -> None:
        with self._lock:
            if self._nodes[handle.node].down and handle.host.alive:
                return  # a dead node's zombie is out of reach (it must fence itself)
        handle.host.kill()
        self._notify()

    # -- faults -------------------------------------------------------------------

    def unreachable(self, node: str) -> None:
        with self._lock:
            self._nodes[node].unreachable = True
            self._lock.notify_all()

    def silence(self, node: str) -> None:
        with self._lock:
            self._nodes[node].silent = True
            self._lock.notify_all()

    def heal(self, node: str) -> None:
        with self._lock:
            self._nodes[node].unreachable = self._nodes[node].silent = False
            self._lock.notify_all()

    def node_down(self, node: str, *, kill: bool = True) -> None:
        with self._lock:
            self._nodes[node].down = True
            victims = [h for h in self._handles if h.node == node]
            self._lock.notify_all()
        if kill:
            for handle in victims:
                handle.host.kill()
        self._notify()

    def add_node(self, node: str) -> None:
        with self._lock:
            self._nodes[node] = _FakeNode(NodeInfo(node, node))

    def crash(self, handle: FakeHandle) -> None:
        handle.crashed = True
        handle.host.kill()
        self._notify()

    def replay(self, handle: FakeHandle, outcome: Outcome) -> None:
        """Deliver `outcome` late, to every callback that ever waited on `handle`."""
        for callback in list(handle.callbacks):
            callback(outcome)

    def handles(self) -> list[FakeHandle]:
        with self._lock:
            return list(self._handles)

    # -- inside ---------------------------------------------------------------------

    def _notify(self) -> None:
        with self._lock:
            self._lock.notify_all()

    def _check(self, handle: FakeHandle) -> None:
        with self._lock:
            node = self._nodes[handle.node]
            if node.silent and not node.down:  # a partition: no news at all comes through
                raise RemoteUnreachable(f"node {handle.node!r} does not answer")
            dead = self._dead_reason(handle, node)
            if dead is not None:
                raise RemoteDead(dead)
            if node.unreachable:
                raise RemoteUnreachable(f"node {handle.node!r} does not answer")

    def _dead_reason(self, handle: FakeHandle, node: _FakeNode) -> ExitReason | None:
        if node.down:
            return ExitReason(ExitKind.NODE_DOWN, message=f"node {handle.node!r} is dead")
        if handle.crashed or (not handle.host.alive and handle.host.killed):
            return ExitReason(ExitKind.REMOTE_CRASH, message="the remote host process died")
        return None

    def _park(self, handle: FakeHandle, callback: Callable[[Outcome], None]) -> None:
        outcome: Outcome | None = None
        with self._lock:
            while outcome is None:
                node = self._nodes[handle.node]
                dead = self._dead_reason(handle, node)
                if node.silent and not node.down:
                    pass  # a parked call on a silent node just waits, whatever happens there
                elif dead is not None:
                    outcome = Outcome("dead", dead)
                elif node.unreachable:
                    outcome = Outcome("unreachable", message=f"node {handle.node!r} reset")
                elif handle.host.ended and not handle.host.fenced:
                    outcome = Outcome("exited", handle.host.exit_reason)
                if outcome is None:
                    self._lock.wait()
        with contextlib.suppress(Exception):
            callback(outcome)
