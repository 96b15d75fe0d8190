"""The ahead ledger: what a supervisor lets its launcher do before asking it
(docs/acting-ahead.md).

The core can say ahead what a child's next exit will mean (an exit plan): the
nanny arms the child's worker with it, and the launcher may restart the child on
its own at once. Each such restart spends one of the budget the core granted;
the ledger hands the grants to the launcher, and counts the restarts made ahead
(`respawned_by`) that the nanny has since heard of, so that the core grants
only what its intensity allows.
"""

from __future__ import annotations

import time
from typing import Any

import pykka

from supervision import Supervisor

from ._context import TreeContext
from ._messages import ArmExit


class AheadLedger:
    """One supervisor's grants to its launcher, and its children's exit plans."""

    def __init__(self, core: Supervisor, context: TreeContext) -> None:
        self._core = core
        self._context = context
        self._budget = context.new_budget()
        self._grant_to: object | None = None  # the spawner our grants went to
        self._used_seen = 0  # its restarts ahead of a decision that we accounted for
        self._granted = -1

    def exit_plan(self, child_id: str, *, ahead: bool = False) -> ArmExit | None:
        """What the child's next exit will mean, when the core can say it ahead."""
        plan = self._core.exit_plan(child_id, ahead=ahead)
        return None if plan is None else ArmExit(plan, self._budget)

    def arm(self, child_id: str, worker: pykka.ActorRef[Any] | None) -> None:
        """Tell a running child's worker what its next exit means (after a resume)."""
        arm = self.exit_plan(child_id)
        if worker is not None and arm is not None:
            worker.tell(arm)

    def count_ahead(self, respawned_by: object | None) -> None:
        """A restart the launcher made ahead of a decision spent one of its grant."""
        if respawned_by is not None and respawned_by is self._grant_to:
            self._used_seen += 1

    def grant(self) -> None:
        """Keep the launcher's budget for restarts ahead of a decision as the core says."""
        launcher = self._context.spawner
        if launcher is None or not launcher.alive:
            return
        if launcher is not self._grant_to:
            self._grant_to, self._used_seen, self._granted = launcher, 0, -1
        granted = self._core.grant(time.monotonic(), self._used_seen, self._granted)
        if granted is not None:
            self._granted = granted
            launcher.grant(self._budget, granted)
