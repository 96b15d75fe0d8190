"""Python children of `nannytree demo` (real processes, forked by the launcher)."""

from __future__ import annotations

import random
import time


def steady() -> None:
    """Runs until stopped (SIGTERM arrives as SystemExit)."""
    while True:
        time.sleep(3600)


def unsteady(low: float = 2.5, high: float = 6.0) -> None:
    """Runs a few seconds, then fails the way a real worker does: with an exception."""
    time.sleep(random.uniform(low, high))
    raise ConnectionError("lost the upstream connection (a demo crash)")
