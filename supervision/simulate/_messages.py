"""The messages a simulated supervisor (_node.py) takes, as NannyActor's mailbox
does: its start, a shutdown, a child's exit, a retry, a scripted call; and a
worker's start under way."""

from __future__ import annotations

from dataclasses import dataclass

from .._reasons import ExitReason
from ..spec._spec import ChildSpec
from ._ops import Call
from ._process import (
    _Faults,
)

# -- messages to a simulated supervisor ---------------------------------------------


@dataclass(frozen=True)
class _Init:
    pass


@dataclass(frozen=True)
class _Shutdown:
    pass


@dataclass(slots=True)  # one per exit or start: a plain record is cheaper to make
class _ChildExited:
    child_id: str
    incarnation: int
    reason: ExitReason


@dataclass(slots=True)
class _Retry:
    child_id: str


@dataclass(frozen=True)
class _Call:
    call: Call


@dataclass(slots=True)
class _Starting:
    """A worker's start under way: what decides it when its delay is over."""

    child_id: str
    spec: ChildSpec
    incarnation: int
    faults: _Faults
    failure: ExitReason | None
    began: float  # when its process was started (probes and `answers_after` count from it)
    step: ExitReason | None  # a one-shot step: how its run ended


_Message = _Init | _Shutdown | _ChildExited | _Retry | _Call
_AUTOMATIC = (_ChildExited, _Retry)  # the messages whose starts are automatic restarts
