"""OTP's restart intensity: at most `intensity` restarts in any `period` seconds."""

from __future__ import annotations

from collections import deque

from ._reasons import ExitKind, ExitReason


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


class RestartWindow:
    """`add_restart`'s semantics in amortised O(1) per restart, at any intensity.

    The times are kept oldest first and trimmed from the old end; the clock
    must not go backwards (the core's clock never does).
    """

    __slots__ = ("_times", "intensity", "period")

    def __init__(self, intensity: int, period: float) -> None:
        self.intensity = intensity
        self.period = period
        self._times: deque[float] = deque()

    def _trim(self, now: float) -> None:
        times, oldest = self._times, now - self.period
        while times and times[0] < oldest:
            times.popleft()

    def add(self, now: float) -> bool:
        """Charge one restart at `now`; True when the intensity is exceeded."""
        times, oldest = self._times, now - self.period
        while times and times[0] < oldest:  # _trim, inlined: one call per restart
            times.popleft()
        times.append(now)
        return len(times) > self.intensity

    def resize(self, intensity: int, period: float) -> None:
        """New limits; the restarts charged so far stay (OTP's code_change keeps them)."""
        self.intensity, self.period = intensity, period

    def budget(self, now: float) -> int:
        """Restarts that may still happen at `now` without exceeding the intensity."""
        self._trim(now)
        return max(0, self.intensity - len(self._times))

    def clear(self, now: float) -> int:
        """Forget every charged restart (an operator's reset); how many were in the
        window at `now`."""
        self._trim(now)
        count = len(self._times)
        self._times.clear()
        return count

    def times(self) -> tuple[float, ...]:
        """The charged restarts, newest first (as `add_restart` returns them)."""
        return tuple(reversed(self._times))

    def __len__(self) -> int:
        return len(self._times)


# A tree's launcher process that dies is replaced (its children then restart by their
# supervisors' strategies and intensities), at most this many times in this many
# seconds: a second restart intensity, the launcher's own.
RELAUNCHES = 3
RELAUNCH_PERIOD = 10.0


class Relaunches:
    """Whether a tree may replace its launcher process once more: OTP's intensity
    rule applied to the launcher, so that one that cannot stay up ends the tree."""

    def __init__(self, intensity: int = RELAUNCHES, period: float = RELAUNCH_PERIOD) -> None:
        self._window = RestartWindow(intensity, period)

    def relaunch(self, now: float, why: str) -> ExitReason | None:
        """None: start a new launcher. Else why the tree ends (`launcher_died`)."""
        if not self._window.add(now):
            return None
        window = self._window
        return ExitReason(
            ExitKind.LAUNCHER_DIED,
            message=f"the launcher process died {window.intensity + 1} times within "
            f"{window.period:g} s (last: {why}); something kills it (look for the OOM "
            "killer in `dmesg`), fix that and start the tree again",
        )
