"""Deciding ahead: what the next exit of a running child will mean.

A live tree lets the launcher restart a child the moment it dies, before the
host has even seen the exit, when the decision core has said in advance that
such an exit means exactly "restart this child alone, at once". The core still
accounts for the exit afterwards, by the ordinary path (`child_exited`), and
takes the same decision: the plan only lets the restart happen sooner.

`exit_plan` says which exits are covered; `restart_budget` how many restarts
may happen from now on without exceeding the intensity (restarts only leave
the window as time passes, so the budget can only grow until the next charge).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._core import Supervisor
from ._spec import ChildSpec, Restart, Strategy


@dataclass(frozen=True)
class ExitPlan:
    """The next exit of `child_id`'s incarnation `incarnation`, decided ahead.

    An exit means "restart it alone, at once" when `restart_on` is "any", or is
    "abnormal" and the exit code is not in `normal_exit_codes` (or it was killed
    by a signal), and it came at least `min_uptime` seconds after the start. Any
    other exit is left to the supervisor.
    """

    child_id: str
    incarnation: int
    restart_on: Literal["any", "abnormal"]
    min_uptime: float
    normal_exit_codes: frozenset[int]


def exit_plan(core: Supervisor, child_id: str) -> ExitPlan | None:
    """The plan for a worker's next exit, or None when it cannot be decided ahead.

    For a child being started, the plan its process will have once started. Only
    one_for_one and simple_one_for_one restart a child alone; a backoff delays
    it; a temporary child is never restarted; a paused child, or a supervisor
    that is not running, is left to the supervisor.
    """
    if core.mode != "running" or core.spec.strategy not in (
        Strategy.ONE_FOR_ONE,
        Strategy.SIMPLE_ONE_FOR_ONE,
    ):
        return None
    info = core.which_child(child_id)
    spec = core.get_childspec(child_id)
    live = info.state in ("running", "starting")
    if not isinstance(spec, ChildSpec) or not live or spec.backoff is not None:
        return None
    if spec.restart is Restart.PERMANENT:
        restart_on: Literal["any", "abnormal"] = "any"
    elif spec.restart is Restart.TRANSIENT:
        restart_on = "abnormal"
    else:
        return None
    return ExitPlan(
        child_id,
        info.incarnation,
        restart_on,
        spec.min_uptime,
        frozenset(spec.normal_exit_codes),
    )


def restart_budget(core: Supervisor, now: float) -> int:
    """Restarts that may happen from `now` on without exceeding the intensity."""
    period = core.spec.period
    in_window = sum(1 for t in core.restart_times if t >= now - period)
    return max(0, core.spec.intensity - in_window)
