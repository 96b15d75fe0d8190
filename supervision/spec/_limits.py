"""A child's resource limits (`limits = { nofile = 1024, core = 0 }`), read as
systemd's LimitNOFILE= and friends read theirs. Pure: names and numbers only; the
launcher applies them with setrlimit before the child's exec.

A value is a number (soft and hard alike), "infinity", or "SOFT:HARD" with either
side a number or "infinity"; a limit in bytes also takes K, M, G, T or P (powers of
1024, as systemd). In Python, a (soft, hard) pair works too.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from .._errors import SpecError

Limit = tuple[int | None, int | None]  # (soft, hard); None: infinity
"""One limit, as the spec keeps it."""

# The limits in bytes, which take a unit (systemd's rule).
BYTE_LIMITS = frozenset({"fsize", "data", "stack", "core", "rss", "as", "memlock", "msgqueue"})
# Every limit setrlimit(2) knows on Linux, by systemd's key (LimitCPU= is "cpu").
LIMIT_NAMES = (
    *("cpu", "fsize", "data", "stack", "core", "rss", "nofile", "as", "nproc"),
    *("memlock", "locks", "sigpending", "msgqueue", "nice", "rtprio", "rttime"),
)
UNITS = {
    "cpu": "seconds",
    "rttime": "microseconds",
    "nofile": "open files",
    "nproc": "processes of the child's user",
    "locks": "file locks",
    "sigpending": "queued signals",
    "nice": "the raw value 0-40 (20 - nice)",
    "rtprio": "a real-time priority 0-99",
}
_MAX = (1 << 63) - 1  # past it the kernel reads infinity; a typo, not a wish
_CAPS = {"nice": 40, "rtprio": 99}
_NUMBER = re.compile(r"^(\d+)\s*([KMGTP]?)$", re.IGNORECASE)
_SCALE = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
INFINITY = "infinity"


def check_limits(value: Any, child: str) -> dict[str, Limit] | None:
    """`limits` as given, checked: {name: (soft, hard)}; None when unset. SpecError
    names the child, the limit and the fix."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError(
            child, "limits", value, "expected a table of limits, e.g. { nofile = 1024, core = 0 }"
        )
    out: dict[str, Limit] = {}
    for name, given in value.items():
        if name not in LIMIT_NAMES:
            near = difflib.get_close_matches(str(name), LIMIT_NAMES, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise SpecError(
                child,
                f"limits.{name}",
                given,
                f"unknown limit; {hint}known: {', '.join(LIMIT_NAMES)}",
            )
        out[name] = _limit(name, given, child)
    return out


def _limit(name: str, given: Any, child: str) -> Limit:
    field = f"limits.{name}"
    if isinstance(given, tuple | list) and len(given) == 2:
        soft, hard = (_side(name, side, given, child) for side in given)
    elif isinstance(given, str) and ":" in given:
        left, _, right = given.partition(":")
        soft, hard = _side(name, left, given, child), _side(name, right, given, child)
    else:
        soft = hard = _side(name, given, given, child)
    if hard is not None and (soft is None or soft > hard):
        raise SpecError(
            child,
            field,
            given,
            "the soft limit is above the hard limit; give SOFT:HARD with SOFT <= HARD",
        )
    if name == "nofile" and hard is None:
        raise SpecError(
            child,
            field,
            given,
            "Linux caps open files at fs.nr_open (1048576 by default), never infinity; "
            "give a number, e.g. 65536",
        )
    return soft, hard


def _side(name: str, side: Any, given: Any, child: str) -> int | None:
    """One side of a limit: a number of its unit, or None for infinity."""
    field = f"limits.{name}"
    unit = "bytes (a number, or with K, M, G, T, P)" if name in BYTE_LIMITS else UNITS[name]
    expected = f'expected {unit}, "{INFINITY}", or "SOFT:HARD"'
    if isinstance(side, str):
        text = side.strip()
        if text == INFINITY:
            return None
        m = _NUMBER.match(text)
        if m is None or (m.group(2) and name not in BYTE_LIMITS):
            raise SpecError(child, field, given, expected)
        number = int(m.group(1)) * _SCALE[m.group(2).upper()]
    elif isinstance(side, int) and not isinstance(side, bool):
        number = side
    else:
        raise SpecError(child, field, given, expected)
    if number < 0:
        raise SpecError(child, field, given, f"a limit is never negative; {expected}")
    cap = _CAPS.get(name, _MAX)
    if number > cap:
        raise SpecError(child, field, given, f"at most {cap}; {expected}")
    return number


def limit_text(limit: Limit) -> str:
    """A limit as a tree file would write it: "1024", "1024:4096", "infinity"."""
    soft, hard = (INFINITY if side is None else str(side) for side in limit)
    return soft if soft == hard else f"{soft}:{hard}"
