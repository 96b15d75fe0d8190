"""The commands' argument types: signals, seconds, the settle time."""

from __future__ import annotations

import argparse


def signal_arg(text: str) -> int:
    """ "HUP", "sighup", "SIGHUP" or "1" -> 1, for argparse.

    supervision.parse_signal's rules with the stdlib alone: importing the core costs a
    client command half its time (a test holds the two parsers equal)."""
    import signal

    number: int | None = None
    if text.isdecimal():  # what int() takes: full-width digits too (as the core), not superscripts
        number = int(text) if int(text) in signal.valid_signals() else None
    elif text.isascii():
        name = text.strip().upper()
        name = name if name.startswith("SIG") else "SIG" + name
        member = signal.Signals.__members__.get(name)
        number = int(member) if member is not None and not name.startswith("SIG_") else None
    if number is None:
        raise argparse.ArgumentTypeError(f"unknown signal {text!r}; e.g. HUP, TERM, USR1 or 10")
    return number


def non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, not {text!r}")
    return value


def settle_seconds(text: str) -> float:
    from supervision import UPDATE_SETTLE_MAX  # only when --settle is given

    value = non_negative(text)
    if value > UPDATE_SETTLE_MAX:
        raise argparse.ArgumentTypeError(
            f"expected seconds from 0 to {UPDATE_SETTLE_MAX:g}, not {text!r}"
        )
    return value


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, not {text!r}")
    return value
