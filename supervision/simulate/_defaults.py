"""The one set of defaults that simulate(), compare() and sweep() share.

A comparison or a sweep is the mean of simulate() runs made with the same
arguments: what is not given means the same thing in all three.
"""

from __future__ import annotations

DEFAULT_SEEDS = range(10)
"""Seeds of a compare() or sweep() when none are given (simulate() runs seed 0)."""

DEFAULT_SEED = 0

DEFAULT_ROOT_RESTART_DELAY: float | None = None
"""None: a run ends when the root supervisor gives up (the rest counts as downtime)."""
