"""A child's own restart limit: OTP's pattern for a flapping child, as one key.

OTP contains a child that may flap by giving it a supervisor of its own: a
transient, one_for_one supervisor with its own intensity and period. When that
supervisor gives up it exits `shutdown`, which a transient child is not restarted
for, so the child stays stopped, its siblings keep running, and its restarts are
never charged to its parent's intensity. `restart_limit` decides the same, in the
core (docs/otp-semantics.md section 4.1), and shows the child as "failed".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .._errors import ChildError, SpecError

FORMS = "RestartLimit(intensity, period), (intensity, period) or None"


@dataclass(frozen=True)
class RestartLimit:
    """At most `intensity` restarts of this child within any `period` seconds; one
    more and it is left stopped ("failed"), as systemd's StartLimitBurst= and
    StartLimitIntervalSec= and supervisord's startretries leave a unit failed/FATAL.
    The supervisor's own intensity is not charged for them. Every default:
    intensity 5, period 30.0 s."""

    intensity: int = 5
    period: float = 30.0

    def __post_init__(self) -> None:
        value = self.intensity
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SpecError(
                None, "restart_limit.intensity", value, "expected an integer >= 0 (restarts)"
            )
        period = self.period
        if (
            isinstance(period, bool)
            or not isinstance(period, int | float)
            or not (math.isfinite(period) and period > 0)
        ):
            raise SpecError(
                None, "restart_limit.period", period, "expected a finite number of seconds > 0"
            )
        object.__setattr__(self, "period", float(period))

    def __str__(self) -> str:
        return f"restart_limit intensity={self.intensity} period={self.period:g}"


def as_restart_limit(value: Any, child: str) -> RestartLimit | None:
    """A spec's `restart_limit` as stored: None or a RestartLimit (a pair is read as
    (intensity, period)); a bad value names the child and the field."""
    if value is None or isinstance(value, RestartLimit):
        return value
    if isinstance(value, tuple | list) and len(value) == 2:
        try:
            return RestartLimit(*value)
        except SpecError as e:
            raise SpecError(child, e.field, e.value, e.expected) from None
    raise SpecError(child, "restart_limit", value, f"expected {FORMS}")


class NoRestartLimit(ChildError):
    """reset_restarts(child) on a child without a restart_limit: its restarts are
    counted by its supervisor, whose window is the one to reset."""

    def __init__(self, supervisor: str, child: str) -> None:
        super().__init__(
            supervisor,
            child,
            "it has no restart_limit of its own: its restarts count against its "
            f"supervisor's intensity; reset the supervisor {supervisor!r} instead",
        )
