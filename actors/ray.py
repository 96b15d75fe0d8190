"""RayEngine: remote subtrees on a Ray cluster. All of nannytree's Ray code is here.

Install with `pip install "nannytree[ray]"`. Each remote subtree incarnation is
one Ray actor, NannyHost, that runs a complete local tree (actors._remote._host.RemoteHost):
`max_restarts=0` and `max_task_retries=0` (every restart is the parent's decision,
charged to its intensity), `num_cpus=0`, non-detached (it fate-shares with its
owner: the parent tree's process), pinned to the chosen node by
NodeAffinitySchedulingStrategy(soft=False), with concurrency groups so the
parked wait_exit never blocks a control call. Its launcher double-forks into its
own session (actors._process._detach): Ray SIGKILLs an actor's direct children.

Death reports map as docs/multihost.md section 3 says: ActorUnavailableError ->
"unreachable"; ActorDiedError -> NODE_DOWN when the node is no longer alive (else
by its message), REMOTE_CRASH otherwise. Security: a Ray cluster runs pickled code from
any client; keep it on a trusted network.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import (
    ActorDiedError,
    ActorUnavailableError,
    GetTimeoutError,
    RayActorError,
    RayTaskError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from supervision import ExitKind, ExitReason, NannyError, NodeInfo, SupervisorSpec

from ._process import _detach
from ._remote._host import RemoteHost
from ._remote._port import (
    Outcome,
    RemoteApiError,
    RemoteDead,
    RemoteStartError,
    RemoteUnreachable,
)
from ._tree import Tree

__all__ = ["NannyHost", "RayEngine", "RayHandle"]

DEFAULT_LEASE = 30.0
CONTROL_CALLS = (
    "api",
    "shutdown",
    "renew_lease",
    "ping",
    "liveness",
    "wait_events",
)


def _exit_fenced() -> None:
    # Its children are stopped; a fenced incarnation is over. Its process's (or its
    # node's) death is what the parent hears: never a give-up.
    os._exit(70)


@ray.remote(  # type: ignore[call-overload]
    max_restarts=0,
    max_task_retries=0,
    num_cpus=0,
    # control: API calls, the lease, the liveness check and the event long poll.
    concurrency_groups={"monitor": 1, "control": 6},
)
class NannyHost:
    """One remote subtree incarnation: a RemoteHost in its own Ray worker process."""

    def __init__(
        self, spec: SupervisorSpec, incarnation: int, lease_timeout: float | None, detach: bool
    ) -> None:
        _detach.enable(detach)
        self.host = RemoteHost(
            spec,
            incarnation,
            start_tree=Tree.start,
            lease_timeout=lease_timeout,
            watch_parent=True,
            on_fenced=_exit_fenced,
        )

    @ray.method(concurrency_group="control")
    def start(self) -> int:
        try:
            return self.host.start()
        except NannyError as e:  # nannytree's errors do not unpickle as themselves
            raise RemoteApiError.wrap(e) from None

    @ray.method(concurrency_group="monitor")
    def wait_exit(self) -> ExitReason | None:
        return self.host.wait_exit()

    @ray.method(concurrency_group="control")
    def call(self, method: str, *args: Any) -> Any:
        if method not in CONTROL_CALLS:
            raise ValueError(f"NannyHost has no control call {method!r}")
        return getattr(self.host, method)(*args)

    def __ray_shutdown__(self) -> None:
        # Ray's graceful termination: the same orderly stop.
        self.host.shutdown()


@dataclass
class RayHandle:
    actor: Any
    node: str
    incarnation: int
    name: str


class RayEngine:
    """The engine port on Ray. `address`: "auto", "ray://host:10001", or None (local).

    Ray is initialised on first use unless it already is (then `address` is not
    used). `lease_timeout` (seconds, default 30; None turns leases off): a remote
    subtree stops its children when its parent has not renewed its lease for
    three quarters of it, and the parent restarts a subtree of a dead node
    elsewhere only once the lease has run out. `unreachable_timeout` (seconds,
    default None: wait for Ray's verdict) declares node_down after a subtree was
    unreachable that long, as Erlang's tick timeout would. `liveness_timeout` (seconds,
    default None: off) asks each remote supervisor that often whether it still
    answers; one that does not answer within that time (a deadlock, a starved GIL:
    what Ray cannot see) is killed and ends with the abnormal reason
    `remote_unresponsive`. `detach=False` is for tests only:
    it shows what a launcher that stays a direct child of the Ray worker leaks.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        lease_timeout: float | None = DEFAULT_LEASE,
        init_kwargs: dict[str, Any] | None = None,
        detach: bool = True,
        unreachable_timeout: float | None = None,
        liveness_timeout: float | None = None,
    ) -> None:
        self._address = address
        self._lease_timeout = lease_timeout
        self._init_kwargs = dict(init_kwargs or {})
        self._detach = detach
        self.unreachable_timeout = unreachable_timeout
        self.liveness_timeout = liveness_timeout
        # Nodes it saw declared dead: Ray's node list can lag behind the death report,
        # and a Ray node id is never reused.
        self._dead: set[str] = set()

    @property
    def lease_timeout(self) -> float | None:
        return self._lease_timeout

    def _ensure(self) -> None:
        if not ray.is_initialized():
            ray.init(address=self._address, **self._init_kwargs)

    # -- the port -----------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        self._ensure()
        out = []
        for node in ray.nodes():  # type: ignore[no-untyped-call]
            if not node.get("Alive") or node["NodeID"] in self._dead:
                continue
            out.append(
                NodeInfo(
                    id=node["NodeID"],
                    name=str(node.get("NodeName", "")),
                    labels={str(k): str(v) for k, v in (node.get("Labels") or {}).items()},
                    resources={str(k): float(v) for k, v in node.get("Resources", {}).items()},
                )
            )
        return out

    def spawn(
        self,
        spec: SupervisorSpec,
        node: str,
        incarnation: int,
        name: str,
        lease_timeout: float | None,
        timeout: float,
    ) -> RayHandle:
        self._ensure()
        actor = NannyHost.options(  # type: ignore[attr-defined]
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote(spec, incarnation, lease_timeout, self._detach)
        try:
            ray.get(actor.start.remote(), timeout=timeout)
        except GetTimeoutError as e:
            ray.kill(actor, no_restart=True)
            raise RemoteStartError(f"{name} did not start on node {node} within {timeout}s") from e
        except RayTaskError as e:
            ray.kill(actor, no_restart=True)
            cause: Any = e.cause if e.cause is not None else e
            if isinstance(cause, RemoteApiError):
                cause = cause.rebuild()
            raise RemoteStartError(f"{name}: {cause}", getattr(cause, "reason", None)) from e
        except RayActorError as e:
            if "node has died" in str(e) or "terminated unexpectedly" in str(e):
                self._dead.add(node)
            raise RemoteStartError(f"{name} died while starting on node {node}: {e}") from e
        return RayHandle(actor, node, incarnation, name)

    def wait_exit(self, handle: RayHandle, callback: Callable[[Outcome], None]) -> None:
        future = handle.actor.wait_exit.remote().future()

        def done(f: Any) -> None:
            try:
                outcome = Outcome("exited", f.result())
            except ActorUnavailableError as e:
                outcome = Outcome("unreachable", message=str(e).splitlines()[0])
            except RayActorError as e:
                outcome = Outcome("dead", self._death_reason(handle, e))
            except Exception as e:
                reason = ExitReason(ExitKind.REMOTE_CRASH, message=f"{type(e).__name__}: {e}")
                outcome = Outcome("dead", reason)
            callback(outcome)

        future.add_done_callback(done)

    def call(self, handle: RayHandle, method: str, *args: Any, timeout: float | None) -> Any:
        ref = handle.actor.call.remote(method, *args)
        try:
            return ray.get(ref, timeout=timeout)
        except (GetTimeoutError, ActorUnavailableError) as e:
            raise RemoteUnreachable(f"{handle.name}: {type(e).__name__}") from e
        except RayActorError as e:
            raise RemoteDead(self._death_reason(handle, e)) from e
        except RayTaskError as e:
            if e.cause is not None:
                raise e.cause from None
            raise

    def kill(self, handle: RayHandle) -> None:
        with contextlib.suppress(Exception):
            ray.kill(handle.actor, no_restart=True)

    # -- classification -----------------------------------------------------------------

    def _death_reason(self, handle: RayHandle, error: RayActorError) -> ExitReason:
        text = str(error)
        try:
            node_alive = any(n.id == handle.node for n in self.nodes())
        except Exception:
            node_alive = True
        lowered = text.lower()
        if not node_alive or (
            isinstance(error, ActorDiedError)
            and "node" in lowered
            and ("terminated unexpectedly" in lowered or "node died" in lowered)
        ):
            self._dead.add(handle.node)
            return ExitReason(ExitKind.NODE_DOWN, message=f"node {handle.node} is dead")
        tail = " ".join(line.strip() for line in text.splitlines()[-2:])
        return ExitReason(ExitKind.REMOTE_CRASH, message=tail[:500])
