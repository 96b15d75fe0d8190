"""OTP's restart intensity: at most `intensity` restarts in any `period` seconds."""

from __future__ import annotations


def add_restart(
    restarts: tuple[float, ...], now: float, intensity: int, period: float
) -> tuple[tuple[float, ...], bool]:
    """Charge one restart at `now`; return the new window and whether it is exceeded.

    Float seconds and an inclusive window (`t >= now - period`), as
    docs/otp-semantics.md section 4 recommends; newest first.
    """
    kept = tuple(t for t in restarts if t >= now - period)
    window = (now, *kept)
    return window, len(window) > intensity
