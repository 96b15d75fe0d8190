"""What the API reports about children."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from ._reasons import ExitReason
from .spec._fields import (
    Restart,
)

ChildState: TypeAlias = Literal[
    "starting",
    "running",
    "paused",
    "stopping",
    "stopped",
    "restarting",
    "backoff",
    "unreachable",  # a remote subtree its engine cannot reach now: not an exit
    "pending",  # a remote subtree no live node can take now: waits, charged nothing
    "failed",  # its restart_limit was exceeded, or an optional child failed its first
    # start: stopped until started or reset
]


@dataclass(frozen=True)
class Health:
    """What a child's liveness probe says: "unknown" (not probed yet), "healthy", or
    "failing" (`failures` of `threshold` failed in a row; `error` says the last)."""

    status: Literal["unknown", "healthy", "failing"]
    failures: int = 0
    threshold: int = 0
    error: str = ""

    def __str__(self) -> str:
        if self.status == "failing":
            return f"failing {self.failures}/{self.threshold}: {self.error}"
        return self.status


@dataclass(frozen=True)
class ChildInfo:
    """One child as which_children() shows it.

    `pid` is None when no process runs (and for a nested supervisor, which runs
    in the tree's own process); `incarnation` counts the processes started for
    this child; `restarts` counts the automatic restarts; `next_attempt` is when a
    child in state "backoff" will be restarted, or one in state "pending" placed
    again (on the clock the supervisor is given); `node` is where a remote subtree
    (a SupervisorSpec with a placement) runs, and its state is "unreachable" while
    its engine cannot reach it (nothing is charged), "pending" while no live node
    can take its restart (docs/multihost.md section 2); `since` is when a child in
    state "unreachable" or "pending" entered it (the same clock; None otherwise);
    `health` is what a running child's liveness probe says (None without one). A
    child is ready when its state is "running": "starting" lasts until its `ready`.
    A child whose restart_limit was exceeded is "failed": stopped until
    restart_child (or reset_restarts, which leaves it "stopped").
    """

    id: str
    pid: int | None
    state: ChildState
    restarts: int
    type: Literal["worker", "supervisor"]
    incarnation: int
    last_exit: ExitReason | None
    restart: Restart
    significant: bool = False
    next_attempt: float | None = None  # state "backoff" or "pending": when the next try is
    node: str | None = None  # a remote subtree: the id of the node it runs on
    health: Health | None = None  # a running child with a liveness probe
    since: float | None = None  # state "unreachable" or "pending": since when


@dataclass(frozen=True)
class ChildCounts:
    """OTP's count_children: `specs` kept, `active` with a live process, by type."""

    specs: int
    active: int
    supervisors: int
    workers: int


@dataclass(frozen=True)
class ExitPlan:
    """What the next exit of a running worker will mean, decided ahead of time.

    From `Supervisor.exit_plan`: if the exit of incarnation `incarnation`
    comes while the restart budget allows one more restart, the child is
    restarted alone and at once when `restart_on` is "any" (permanent), or only
    when the exit is abnormal for "abnormal" (transient: an exit code outside
    `normal_exit_codes`, a signal, or any exit sooner than `min_uptime` seconds
    after the start). An executor may act on it before the core sees the exit.
    """

    child_id: str
    incarnation: int
    restart_on: Literal["any", "abnormal"]
    min_uptime: float
    normal_exit_codes: frozenset[int]
