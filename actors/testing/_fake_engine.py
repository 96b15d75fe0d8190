"""`FakeEngine`: the fake behind the engine port, public as `actors.testing.FakeEngine`.

Every "node" is a name; every remote subtree a real local `Tree` behind a
`RemoteHost`, in this process, so multi-host trees are tested without a cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from supervision import ExitKind, ExitReason, NodeInfo, SupervisorSpec

from .._remote._host import RemoteHost
from .._remote._port import Outcome, RemoteDead, RemoteStartError, RemoteUnreachable
from .._tree import Tree


@dataclasses.dataclass
class FakeHandle:
    """One remote subtree incarnation FakeEngine started: its far side is `host`."""

    node: str
    incarnation: int
    host: RemoteHost
    name: str
    crashed: bool = False
    callbacks: list[Callable[[Outcome], None]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _FakeNode:
    info: NodeInfo
    down: bool = False
    unreachable: bool = False  # calls fail at once (connection reset)
    silent: bool = False  # calls hang: parked ones never return, others time out


class FakeEngine:
    """The engine port (actors/_remote/_port.py) in this process, for fast tests.

    Every "node" is a name; every remote tree a real local Tree behind a RemoteHost.
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
    ) -> None:
        self._lock = threading.Condition()
        self._nodes = {n: _FakeNode(NodeInfo(n, n)) for n in (nodes or ["local"])}
        self._handles: list[FakeHandle] = []
        self.lease_timeout = lease_timeout
        self.unreachable_timeout = unreachable_timeout
        self.liveness_timeout = liveness_timeout
        self.spawned: list[tuple[str, int]] = []  # (node, incarnation), in order

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
        box: list[FakeHandle] = []

        def fenced() -> None:  # as a Ray worker exits once fenced: a process death
            if box:
                box[0].crashed = True
            self._wake()

        host = RemoteHost(
            spec,
            incarnation,
            start_tree=Tree.start,
            lease_timeout=lease_timeout,
            watch_parent=False,
            on_fenced=fenced,
        )
        try:
            host.start()
        except Exception as e:
            host.kill()
            reason = getattr(e, "reason", None)
            raise RemoteStartError(f"{name!r} failed to start on {node!r}: {e}", reason) from e
        handle = FakeHandle(node, incarnation, host, name)
        box.append(handle)
        host.on_end(self._wake)
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
        self._wake()

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
        self._wake()

    def add_node(self, node: str) -> None:
        with self._lock:
            self._nodes[node] = _FakeNode(NodeInfo(node, node))

    def crash(self, handle: FakeHandle) -> None:
        handle.crashed = True
        handle.host.kill()
        self._wake()

    def replay(self, handle: FakeHandle, outcome: Outcome) -> None:
        """Deliver `outcome` late, to every callback that ever waited on `handle`."""
        for callback in list(handle.callbacks):
            callback(outcome)

    def handles(self) -> list[FakeHandle]:
        with self._lock:
            return list(self._handles)

    # -- inside ---------------------------------------------------------------------

    def _wake(self) -> None:
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
