"""The supervisor API of a remote subtree's stand-in (RemoteChild): the calls it
forwards to the subtree's own supervisor on its node (`FORWARDED`, the engine port's
list, what the far side answers), each with a timeout, in its own thread;
every other call of `SupervisorAPI` raises NotForwarded, naming the call and the
subtree.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, NoReturn

from supervision import ChildNotRunning, NotForwarded, SupervisorSpec

from .._remote._port import (
    CALL_TIMEOUT,
    Engine,
    RemoteApiError,
    RemoteDead,
    RemoteUnreachable,
)

# Seconds a read of the remote supervisor's state may take (a few ms when well). Reads
# are what `status` asks, again and again: one the far side does not answer makes the
# subtree unreachable at once (and the next fail fast), rather than holding this
# actor, and its lease and liveness timers, for CALL_TIMEOUT.
READ_TIMEOUT = 1.0


class RemoteCalls:
    """The API of RemoteChild (its base): forwarded, or NotForwarded."""

    # RemoteChild's, set in its __init__.
    _spec: SupervisorSpec
    _supervisor: str  # the parent's name
    _name: str  # this child's path
    _engine: Engine
    _handle: Any
    _state: str
    status: Any  # its RemoteStatus

    def _unreachable(self, why: str, since: float | None = None) -> None:
        raise NotImplementedError  # RemoteChild's: a failed call, nothing charged

    # -- forwarded --

    def which_children(self) -> Any:
        return self._api("which_children", timeout=READ_TIMEOUT)

    def which_child(self, key: Any) -> Any:
        return self._api("which_child", key, timeout=READ_TIMEOUT)

    def count_children(self) -> Any:
        return self._api("count_children", timeout=READ_TIMEOUT)

    def get_childspec(self, key: Any) -> Any:
        return self._api("get_childspec", key, timeout=READ_TIMEOUT)

    def start_child(self, spec_or_args: Any = None) -> Any:
        return self._api("start_child", spec_or_args)

    def terminate_child(self, key: Any, with_dependents: bool = False) -> Any:
        if with_dependents:
            self._not_forwarded("terminate_child with dependents")
        return self._api("terminate_child", key)

    def restart_child(self, key: Any) -> Any:
        return self._api("restart_child", key)

    def delete_child(self, key: Any) -> Any:
        return self._api("delete_child", key)

    def pause_child(self, key: Any) -> Any:
        return self._api("pause_child", key)

    def resume_child(self, key: Any) -> Any:
        return self._api("resume_child", key)

    def signal_child(self, key: Any, sig: int | str) -> Any:
        return self._api("signal_child", key, sig if isinstance(sig, str) else int(sig))

    def read_output(self, key: Any, stream: str = "stderr", previous: bool = False) -> Any:
        if previous:
            self._not_forwarded("read_output of the previous run")
        return self._api("read_output", key, stream)

    def events(self) -> Any:
        """The remote tree's own events (its children's exits and restarts)."""
        return self._api("events")

    def which_tree(self) -> Any:
        """The remote subtree, with paths under this child's path and each node named;
        nothing while it cannot be reached (the parent shows it "unreachable")."""
        try:
            listing = self._api("which_tree", timeout=READ_TIMEOUT)
            return [self._relocate(n) for n in listing]
        except ChildNotRunning:
            return []

    # -- not forwarded: the update calls, and views the far side does not offer --

    def which_childspecs(self) -> Any:
        self._not_forwarded("which_childspecs")

    def own_spec(self) -> Any:
        self._not_forwarded("own_spec")

    def child_nanny(self, key: str) -> Any:
        self._not_forwarded("child_nanny")

    def child_status(self, key: Any) -> Any:
        self._not_forwarded("child_status")

    def event_log(self) -> Any:
        self._not_forwarded("event_log")

    def reset_restarts(self, key: str | None = None) -> Any:
        self._not_forwarded("reset_restarts")

    def replace_child(self, key: str, spec: Any, settle: float = 0.0) -> Any:
        self._not_forwarded("replace_child")

    def store_childspec(self, key: str, spec: Any) -> Any:
        self._not_forwarded("store_childspec")

    def change_settings(self, spec: SupervisorSpec) -> Any:
        self._not_forwarded("change_settings")

    def insert_child(self, spec: Any, after: str | None, settle: float = 0.0) -> Any:
        self._not_forwarded("insert_child")

    def move_child(self, key: str, after: str | None) -> Any:
        self._not_forwarded("move_child")

    def reload_child(self, key: str) -> None:
        self._not_forwarded("reload_child")

    # -- beyond the API --

    def node(self) -> str:
        return str(self.status.node)

    def handle(self) -> Any:
        """The engine's handle of this incarnation (for fault injection in tests)."""
        return self._handle

    def _not_forwarded(self, call: str) -> NoReturn:
        raise NotForwarded(self._supervisor, self._spec.id, call)

    def _relocate(self, tree_node: Any) -> Any:
        path = self._name + tree_node.path[len(self._spec.id) :]
        info = dataclasses.replace(tree_node.info, node=self.status.node)
        children = tuple(self._relocate(c) for c in tree_node.children)
        return dataclasses.replace(tree_node, info=info, path=path, children=children)

    def _api(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT) -> Any:
        if self._state != "running":
            raise ChildNotRunning(self._supervisor, self._spec.id, f"call {method}: {self._state}")
        sent = time.monotonic()
        try:
            return self._engine.call(self._handle, "api", method, *args, timeout=timeout)
        except RemoteUnreachable as e:
            self._unreachable(f"call {method} failed: {e}", sent)
            raise ChildNotRunning(self._supervisor, self._spec.id, f"call {method}: {e}") from e
        except RemoteDead as e:
            raise ChildNotRunning(self._supervisor, self._spec.id, f"call {method}: {e}") from e
        except RemoteApiError as e:
            raise e.rebuild() from None
