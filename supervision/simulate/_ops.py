"""Scripted API calls for the simulator: what a user or an operator does, at virtual times.

A `Call` is one call of the live nanny's API, made at `at` virtual seconds on
the supervisor at path `supervisor` ("" is the root, "pool" a nested one). It
goes through that supervisor's mailbox, as a pykka ask does, so it runs after
whatever was queued before it. Its outcome is a `CallResult`: the value the
live call returns, or the error it raises.

Simulated workers have pids, as live ones do: distinct, deterministic, counted
from `FIRST_PID` in the order processes start in the run (never reused). A call
that takes a pid (`terminate_child(pid)` on a simple_one_for_one supervisor, as
OTP's does) names it with `pid_of("w-2")`: the pid that child's process has
when the call is handled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._errors import NannyError, SpecError

# Calls that change the tree: the core takes `now` after the arguments.
MUTATIONS = frozenset(
    {
        "start_child",
        "terminate_child",
        "restart_child",
        "delete_child",
        "pause_child",
        "resume_child",
        "reset_restarts",
    }
)
# Snapshots: answered from the core's state when the call is handled.
QUERIES = frozenset({"which_children", "count_children", "which_child", "get_childspec"})
STOP = "stop"  # stops the whole tree (only on the root), as Tree.stop() does
METHODS = MUTATIONS | QUERIES | {STOP}

FIRST_PID = 1000
"""The pid of the first process a simulation starts; each next one gets the next."""


@dataclass(frozen=True)
class PidOf:
    """A call argument: the pid of child `child` of the called supervisor, taken
    when the call is handled (the live caller reads it from `which_child`).

    A child it does not name is `ChildNotFound`; one without a running process
    (stopped, or waiting for a restart) is `ChildNotRunning`: the call is then
    answered with that error and not made.
    """

    child: str

    def __post_init__(self) -> None:
        if not isinstance(self.child, str) or not self.child:
            raise SpecError(None, "pid_of", self.child, 'expected a child id, e.g. pid_of("w-2")')


def pid_of(child: str) -> PidOf:
    """The pid of `child` when the call is handled: `call(5, "terminate_child", pid_of("w-2"))`."""
    return PidOf(child)


@dataclass(frozen=True)
class Call:
    """Call `method(*args)` on the supervisor at path `supervisor`, at virtual time `at`.

    `method` is one of the live API's: start_child (a ChildSpec, or a tuple of
    extra arguments on a simple_one_for_one supervisor), terminate_child,
    restart_child, delete_child, pause_child, resume_child, reset_restarts
    (a child's id, or None for the supervisor itself), which_children,
    count_children, which_child, get_childspec, or "stop" (the root only: stop
    the tree; the run ends there). An argument `pid_of(child)` is that child's
    pid when the call is handled.
    """

    at: float
    method: str
    args: tuple[Any, ...] = ()
    supervisor: str = ""

    def __post_init__(self) -> None:
        at = self.at
        if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
            raise SpecError(None, "Call.at", at, "expected virtual seconds >= 0")
        if at < 0:
            raise SpecError(None, "Call.at", at, "expected virtual seconds >= 0")
        if self.method not in METHODS:
            raise SpecError(None, "Call.method", self.method, f"expected one of {sorted(METHODS)}")
        if not isinstance(self.args, tuple):
            raise SpecError(None, "Call.args", self.args, "expected a tuple of arguments")
        if self.method == STOP and self.supervisor:
            raise SpecError(
                None, "Call.supervisor", self.supervisor, 'stop is a call on the root: use ""'
            )


def call(at: float, method: str, *args: Any, supervisor: str = "") -> Call:
    """A Call, written as the live call reads: `call(5.0, "pause_child", "web")`."""
    return Call(float(at), method, tuple(args), supervisor)


@dataclass(frozen=True)
class CallResult:
    """What a scripted call gave: `value`, or the `error` the live call would raise.

    `time` is when it was answered (a start_child waits for the start).
    """

    call: Call
    time: float
    value: Any = None
    error: NannyError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None
