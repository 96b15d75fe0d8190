"""Leases, fences, and when an unreachable node is declared down: one rule.

The live remote child (actors/_shell/_remote_child.py), the far side of a
remote subtree (actors/_remote/_host.py) and the simulator (`simulate/_nodes.py`)
all decide by `Fencing`. Pure: `now` is passed in. docs/multihost.md section 5
explains the rule; in short:

- the parent renews a remote incarnation's lease every third of it;
- the far side fences itself (stops its children) once no renewal came for
  `FENCE_AT` of the lease, so two renewals may be lost;
- the parent declares an unreachable node down when the engine stops listing
  it, or (opt-in) once it was unreachable for `unreachable_timeout`;
- a `node_down` or `remote_unresponsive` exit, whose incarnation may still run,
  is told to the parent's supervisor only once that incarnation is confirmed gone
  (the engine reports its process dead after the parent killed it, or its far
  side says its fence is complete), or once the
  whole lease has run out since the last renewal: by then the far side has had a
  quarter of the lease to stop. Without a lease, a `remote_unresponsive` one waits
  for the confirmation; a `node_down` is told at once (the engine's verdict is all
  there is: Ray ends a node it declared dead as soon as that node hears it);
- with the opt-in liveness check, a remote that does not answer at all (it is
  unreachable) for `liveness_timeout` is `remote_unresponsive` too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ._reasons import ExitKind, ExitReason


@dataclass(frozen=True)
class Fencing:
    """An engine's fencing settings, and the decisions they give (times in seconds).

    `lease_timeout`: None turns leases off (no fence, no wait); `unreachable_timeout`:
    None waits for the engine's verdict on an unreachable node; `liveness_timeout`:
    the opt-in liveness check's bound (None: off).
    """

    lease_timeout: float | None = None
    unreachable_timeout: float | None = None
    liveness_timeout: float | None = None

    FENCE_AT: ClassVar[float] = 0.75  # of the lease: the far side is done in time
    RENEWALS: ClassVar[int] = 3  # per lease

    @property
    def renew_every(self) -> float | None:
        """Seconds between two renewals of the lease by the parent."""
        return None if self.lease_timeout is None else self.lease_timeout / self.RENEWALS

    def renewal_counts(self, sent: float | None, received: float) -> bool:
        """The far side's test of one renewal: it counts unless it came after the
        parent gave up on it (its call's timeout is `renew_every`). A late one (a
        frozen raylet delivers the calls it queued when it thaws) would stretch the
        lease past what the parent counts on. `sent` and `received` are wall-clock
        readings of the two hosts (kept in step by NTP: a far side whose clock runs
        ahead by more than `renew_every` refuses every renewal and fences); None:
        a parent that does not say, counted."""
        every = self.renew_every
        return sent is None or every is None or received - sent <= every

    def lease_expired(self, now: float, last_renewal: float) -> bool:
        """The far side's test: fence once no renewal came for FENCE_AT of the lease."""
        lease = self.lease_timeout
        return lease is not None and now - last_renewal >= lease * self.FENCE_AT

    def fence_delay(self, now: float, last_renewal: float | None) -> float:
        """Seconds the parent must still wait before acting on a fenced exit (0: at once).

        The old incarnation stops its children once its lease has run out; acting
        sooner could run the restarted subtree beside the old one.
        """
        if self.lease_timeout is None or last_renewal is None:
            return 0.0
        return max(0.0, last_renewal + self.lease_timeout - now)

    @staticmethod
    def waits_for_fence(reason: ExitReason) -> bool:
        """Whether the incarnation that ended with `reason` may still run somewhere.

        A node declared down may be only cut off, and a killed unresponsive one may
        not have heard the kill; a crashed process, or a tree that ended by itself,
        is gone.
        """
        return reason.kind in (ExitKind.NODE_DOWN, ExitKind.REMOTE_UNRESPONSIVE)

    def tell_after(
        self, reason: ExitReason, now: float, last_renewal: float | None
    ) -> float | None:
        """Seconds the parent waits before telling its supervisor of `reason`, unless
        the incarnation is confirmed gone sooner (`confirms`); None: only once it is.

        Without a lease nothing else bounds a killed `remote_unresponsive` one (its
        node is fine, so the kill can and must be confirmed); a `node_down` is the
        engine's verdict itself, told at once.
        """
        if not self.waits_for_fence(reason):
            return 0.0
        if self.lease_timeout is None or last_renewal is None:
            return None if reason.kind is ExitKind.REMOTE_UNRESPONSIVE else 0.0
        return self.fence_delay(now, last_renewal)

    def confirms(self, death: ExitReason) -> bool:
        """Whether the engine's death report `death`, for an incarnation the parent
        killed, shows it gone: its process died (`remote_crash`); its node's death
        only without a lease (a node declared dead may be cut off and still running)."""
        if death.kind is ExitKind.REMOTE_CRASH:
            return True
        return death.kind is ExitKind.NODE_DOWN and self.lease_timeout is None

    def verdict(
        self, now: float, node: str, unreachable_since: float, *, listed: bool
    ) -> ExitReason | None:
        """The parent's verdict on a node unreachable since `unreachable_since`.

        `node_down` once it was unreachable for `unreachable_timeout` (the bound
        Erlang's tick timeout gives), or once the engine no longer lists it
        (`listed`: the engine's own verdict); with the liveness check on,
        `remote_unresponsive` once it did not answer for `liveness_timeout`; None
        while it is only unreachable, which charges nothing.
        """
        gone = now - unreachable_since
        limit = self.unreachable_timeout
        if limit is not None and gone >= limit:
            message = f"node {node!r} unreachable for {limit}s (unreachable_timeout)"
            return ExitReason(ExitKind.NODE_DOWN, message=message)
        if not listed:
            return ExitReason(ExitKind.NODE_DOWN, message=f"node {node!r} was declared dead")
        liveness = self.liveness_timeout
        if liveness is not None and gone >= liveness:
            return ExitReason(
                ExitKind.REMOTE_UNRESPONSIVE,
                message=f"the remote supervisor on node {node!r} did not answer for "
                f"{liveness}s (liveness_timeout; unreachable); killed",
            )
        return None

    def declared_after(self, engine_verdict: float) -> float:
        """Seconds from a node's cut-off to the first `node_down` verdict, when the
        engine stops listing it `engine_verdict` seconds after the cut-off."""
        limit = self.unreachable_timeout
        return engine_verdict if limit is None else min(limit, engine_verdict)
