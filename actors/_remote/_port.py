"""The engine port: what a tree needs of a distributed engine to run a subtree on
another node, and the types that cross it (docs/multihost.md section 1).

The port (the anyio style: a small contract, adapters behind it):
- `nodes()`: the live nodes now, as supervision.NodeInfo;
- `spawn(spec, node, incarnation, name, lease_timeout, timeout)`: start a complete
  tree for `spec` on `node` (a RemoteHost there, actors/_remote/_host.py) and return
  a handle once every child has started; raises RemoteStartError;
- `wait_exit(handle, callback)`: park one call; `callback(Outcome)` runs once, in
  any thread, when the remote tree ends by itself, dies, or cannot be reached;
- `call(handle, method, *args, timeout)`: call a RemoteHost method; raises
  RemoteUnreachable (timeout, connection lost) or RemoteDead (its death report);
- `kill(handle)`: best effort, no answer awaited; the remote lifeline sweeps;
- `lease_timeout`, `unreachable_timeout`, `liveness_timeout`: its settings (None: off).

Beyond the port, an engine may offer (callers look them up with getattr):
- `fence_confirmed(handle)`: True once that incarnation's far side said it fenced
  itself with every child stopped, so a new one need not wait out the lease;
- `node_name(node_id)`: the node's name for people (status, events).

`actors.ray.RayEngine` is the real adapter and `actors.testing.FakeEngine` the
fake. Nothing here imports Ray or the tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from supervision import ExitReason, NannyError, NodeInfo, SupervisorSpec

CALL_TIMEOUT = 10.0  # seconds for a forwarded API call, on either side


# The OTP API calls a remote subtree's stand-in forwards to its supervisor on its node
# (the far side answers exactly these: _host.py).
FORWARDED = (
    "which_children",
    "which_child",
    "count_children",
    "get_childspec",
    "start_child",
    "terminate_child",
    "restart_child",
    "delete_child",
    "pause_child",
    "resume_child",
    "signal_child",
    "read_output",
    "events",
    "which_tree",
)


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


class RemoteApiError(Exception):
    """A nannytree error raised by a forwarded API call, in a form that crosses hosts.

    nannytree's own errors are rebuilt on the parent's side (`rebuild`); only
    classes of `supervision` are, by name: nothing else is imported or trusted.
    """

    def __init__(self, kind: str, message: str, fields: dict[str, Any]) -> None:
        super().__init__(kind, message, fields)
        self.kind, self.message, self.fields = kind, message, fields

    @classmethod
    def wrap(cls, error: NannyError) -> RemoteApiError:
        return cls(type(error).__name__, str(error), dict(vars(error)))

    def rebuild(self) -> Exception:
        import supervision

        kind = getattr(supervision, self.kind, None)
        if not (isinstance(kind, type) and issubclass(kind, NannyError)):
            return RuntimeError(f"{self.kind}: {self.message}")
        error = kind.__new__(kind)
        Exception.__init__(error, self.message)
        error.__dict__.update(self.fields)
        return error


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
    def lease_timeout(self) -> float | None:
        """Fence remote subtrees with a lease of this many seconds (docs/multihost.md
        section 5); None: no lease."""

    @property
    def unreachable_timeout(self) -> float | None:
        """Declare node_down after this long unreachable, without the engine's verdict;
        None: wait for it."""

    @property
    def liveness_timeout(self) -> float | None:
        """Ask each remote supervisor this often to answer within this long
        (remote_unresponsive); None: never."""
