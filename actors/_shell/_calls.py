"""NannyActor's answers to the supervisor API (`SupervisorAPI`, `_api.py`, documents
each call): each read from the core and what the nanny observes, or carried out
as the core's actions (`_call_core`, in the nanny's mailbox: a call that changes
the tree is answered once the core has replied).
"""

from __future__ import annotations

import time
from typing import Any, cast

import pykka

from supervision import (
    Action,
    AnySpec,
    ChildCounts,
    ChildInfo,
    ChildNotRunning,
    Event,
    EventKind,
    Supervisor,
    SupervisorSpec,
    signal_name,
)

from ._ahead import AheadLedger
from ._api import TreeNode, signal_number
from ._children import ChildActors
from ._event_log import EventLog
from ._messages import ReadOutput, ReloadChild, Signal
from ._observe import Observations


class SupervisorCalls:
    """The API of NannyActor (its base): what each call reads or asks the core."""

    # The nanny's, set in NannyActor.__init__.
    _core: Supervisor
    _children: ChildActors
    _observe: Observations
    _ahead: AheadLedger

    def _call_core(self, actions: list[Action]) -> Any:
        raise NotImplementedError  # NannyActor's: carries out a call's actions

    def which_children(self) -> list[ChildInfo]:
        return self._observe.which_children()

    def which_tree(self) -> list[TreeNode]:
        return self._observe.which_tree()

    def child_nanny(self, key: str) -> pykka.ActorRef[Any]:
        info = self._core.which_child(key)
        nested = self._children.nested.get(info.id)
        if nested is None or info.state != "running":
            raise ChildNotRunning(self._core.name, info.id, "reach it as a running supervisor")
        return nested

    def which_child(self, key: str | int) -> ChildInfo:
        return self._observe.view(self._core.which_child(key))

    def count_children(self) -> ChildCounts:
        return self._core.count_children()

    def get_childspec(self, key: str | int) -> AnySpec:
        return self._core.get_childspec(key)

    def which_childspecs(self) -> list[tuple[ChildInfo, AnySpec]]:
        return [(info, self._core.get_childspec(info.id)) for info in self._core.children()]

    def own_spec(self) -> SupervisorSpec:
        return self._core.spec

    def child_status(self, key: str | int) -> str:
        return self._observe.status_of(self._core.which_child(key).id)

    def events(self) -> list[Event]:
        return self._observe.log.snapshot()

    def event_log(self) -> EventLog:
        return self._observe.log

    def start_child(self, spec_or_args: Any = None) -> Any:
        return self._call_core(self._core.start_child(spec_or_args, time.monotonic()))

    def terminate_child(self, key: str | int, with_dependents: bool = False) -> Any:
        now = time.monotonic()
        return self._call_core(
            self._core.terminate_child(key, now, with_dependents=with_dependents)
        )

    def restart_child(self, key: str) -> Any:
        return self._call_core(self._core.restart_child(key, time.monotonic()))

    def delete_child(self, key: str) -> Any:
        return self._call_core(self._core.delete_child(key, time.monotonic()))

    def reset_restarts(self, key: str | None = None) -> Any:
        return self._call_core(self._core.reset_restarts(key, time.monotonic()))

    def replace_child(self, key: str, spec: AnySpec, settle: float = 0.0) -> Any:
        return self._call_core(self._core.replace_child(key, spec, time.monotonic(), settle=settle))

    def store_childspec(self, key: str, spec: AnySpec) -> Any:
        return self._call_core(self._core.store_childspec(key, spec, time.monotonic()))

    def change_settings(self, spec: SupervisorSpec) -> Any:
        # A lower intensity lowers the launcher's restarts ahead at once (_run grants).
        return self._call_core(self._core.change_settings(spec, time.monotonic()))

    def insert_child(self, spec: AnySpec, after: str | None, settle: float = 0.0) -> Any:
        now = time.monotonic()
        return self._call_core(self._core.insert_child(spec, after, now, settle=settle))

    def move_child(self, key: str, after: str | None) -> Any:
        return self._call_core(self._core.move_child(key, after, time.monotonic()))

    def pause_child(self, key: str) -> Any:
        return self._call_core(self._core.pause_child(key, time.monotonic()))

    def resume_child(self, key: str) -> Any:
        result = self._call_core(self._core.resume_child(key, time.monotonic()))
        child_id = self._core.which_child(key).id
        self._ahead.arm(child_id, self._children.workers.get(child_id))
        return result

    def signal_child(self, key: str, sig: int | str) -> None:
        info = self._core.which_child(key)
        number = signal_number(sig, info.id)
        self._children.ask_worker(info, Signal(number), "send a signal to it")
        self._observe.note_event(EventKind.CHILD_SIGNALLED, info, signal_name(number))

    def reload_child(self, key: str) -> None:
        info = self._core.which_child(key)
        sig = self._children.ask_worker(info, ReloadChild(), "reload it")
        self._observe.note_event(EventKind.CHILD_RELOADED, info, signal_name(sig))

    def read_output(self, key: str, stream: str = "stderr", previous: bool = False) -> str:
        if stream not in ("stdout", "stderr"):
            raise ValueError(f'stream must be "stdout" or "stderr", not {stream!r}')
        worker = self._children.workers.get(self._core.which_child(key).id)
        if worker is None:
            return ""
        return cast(str, worker.ask(ReadOutput(1 if stream == "stdout" else 2, previous)))
