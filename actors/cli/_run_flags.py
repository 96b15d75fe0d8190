"""The flags of `nannytree run` and `demo`: how the run host is set up (its socket,
view, children's logs, engine and monitors), parsed into RunOptions' fields
(actors/host/_options.py). The stdlib alone: the command imports it to parse any
line."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._args import positive

_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)(?:I?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def hosting_flags() -> argparse.ArgumentParser:
    """The flags of `run` and `demo`, as a parent parser."""
    hosting = argparse.ArgumentParser(add_help=False)
    hosting.add_argument(
        "--socket",
        type=Path,
        help="control socket (default: <runtime dir>/<tree id>.sock)",
    )
    view = hosting.add_mutually_exclusive_group()
    view.add_argument(
        "--live",
        dest="live",
        action="store_true",
        default=None,
        help="live view (default on a terminal)",
    )
    view.add_argument(
        "--plain", dest="live", action="store_false", help="one line per event (default otherwise)"
    )
    hosting.add_argument("--duration", type=positive, help="stop the tree after this many seconds")
    hosting.add_argument(
        "--child-output",
        default="auto",
        metavar="auto|inherit|journal|PATH",
        help="where children without their own stdout/stderr write (auto: a log file "
        "each under --log-dir; journal: journald, each line under its child's id as "
        "SYSLOG_IDENTIFIER, `journal:PREFIX` to put PREFIX before it)",
    )
    hosting.add_argument(
        "--log-dir",
        type=Path,
        metavar="DIR",
        help="the children's log files, DIR/<tree>/<supervisor>/<child>.log (default: "
        "$NANNYTREE_LOG_DIR, else /var/log/nannytree for root, "
        "else $XDG_STATE_HOME/nannytree)",
    )
    hosting.add_argument(
        "--log-max-bytes",
        type=_log_size,
        metavar="SIZE",
        help="rotate a child's log file before it passes SIZE (default 10M; 0: never), "
        "unless its table sets log_max_bytes",
    )
    hosting.add_argument(
        "--log-backups",
        type=_log_count,
        metavar="N",
        help="older log files kept, file.1 ... file.N (default 5)",
    )
    hosting.add_argument(
        "--log-timestamps",
        action="store_true",
        help="start each line of a log file with its UTC time",
    )

    hosting.add_argument(
        "--engine",
        metavar="auto|local|ray://HOST:PORT",
        help="run the subtrees that have a placement on this Ray cluster (nannytree[ray]); "
        "over the tree file's [engine] address",
    )
    add_engine_flags(hosting)
    add_monitor_flags(hosting)

    return hosting


def run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """RunOptions' fields from the flags of hosting_flags."""
    options = {
        name: getattr(args, name) for name, _, _ in ENGINE_FLAGS if getattr(args, name) is not UNSET
    }
    return {
        "socket": args.socket,
        "live": args.live,
        "duration": args.duration,
        "child_output": args.child_output,
        "engine": args.engine,
        "engine_options": options,
        **_log_options(args),
        **monitor_options(args),
    }


# -- the children's log files (docs/logs.md) ----------------------------------------------


def _log_options(args: argparse.Namespace) -> dict[str, Any]:
    """--log-dir, --log-max-bytes, --log-backups, --log-timestamps (docs/logs.md)."""
    given = {
        "log_dir": args.log_dir,
        "log_max_bytes": args.log_max_bytes,
        "log_backups": args.log_backups,
        "log_timestamps": args.log_timestamps or None,
    }
    return {k: v for k, v in given.items() if v is not None}


def _log_size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _log_count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > 1000:
        raise argparse.ArgumentTypeError(f"expected a count from 0 to 1000, not {text!r}")
    return int(text)


def parse_size(text: str) -> int:
    """Bytes from "10M", "512K", "1G" or a plain number; ValueError otherwise."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f'expected bytes, or a size such as "10M" (powers of 1024), not {text!r}')
    size = int(match[1]) * _UNITS[match[2].upper()]
    if size != 0 and size < 1024:
        raise ValueError(f"expected 0 (never rotate) or at least 1K, not {text!r}")
    return size


# -- the engine ----------------------------------------------------------------------------


def seconds_or_off(text: str) -> float | None:
    """Seconds > 0, or "off" (None), for an engine's detection settings."""
    if text.strip().lower() in ("off", "false", "none"):
        return None
    return _seconds(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds > 0, not {text!r}")
    return value


def at_least_one(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, not {text!r}")
    return int(text)


# `run`'s engine flags: each sets the [engine] key (RayEngine's parameter) of its name.
ENGINE_FLAGS: tuple[tuple[str, Callable[[str], Any], str], ...] = (
    (
        "lease_timeout",
        seconds_or_off,
        "a remote subtree stops its children when its lease is not renewed; "
        "a lost node's subtree restarts elsewhere after it (default 30; off)",
    ),
    (
        "liveness_timeout",
        seconds_or_off,
        "ask each remote supervisor this often to answer within this long, "
        "else restart it (default off)",
    ),
    (
        "unreachable_timeout",
        seconds_or_off,
        "declare a node down after it was unreachable this long, without waiting "
        "for the engine's verdict (default off)",
    ),
    ("health_check_period", _seconds, "Ray's node health check: seconds between checks"),
    ("health_check_timeout", _seconds, "Ray's node health check: seconds to answer one"),
    (
        "health_check_failure_threshold",
        at_least_one,
        "Ray's node health check: misses before a node is dead",
    ),
    ("health_check_initial_delay", _seconds, "Ray's node health check: seconds before the first"),
)


UNSET: Any = object()  # a flag not given (None is a setting: "off")


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """`run`'s flags for the engine's settings, each named as its [engine] key."""
    for name, kind, text in ENGINE_FLAGS:
        metavar = "S|off" if kind is seconds_or_off else ("N" if kind is at_least_one else "S")
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=kind,
            default=UNSET,
            metavar=metavar,
            help=f"{text}; over the file's [engine] {name}",
        )


# -- the monitors (docs/monitoring.md) -----------------------------------------------------


def metrics_address(text: str) -> tuple[str, int]:
    """`--metrics`'s value: "PORT" (on 127.0.0.1), "HOST:PORT" or "[V6]:PORT"."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.removeprefix("[").removesuffix("]")
    if not host or not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise ValueError(
            f"--metrics takes PORT or HOST:PORT (such as 9100 or 0.0.0.0:9100), not {text!r}"
        )
    return host, int(port)


def _address(text: str) -> tuple[str, int]:
    try:
        return metrics_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _journal_size(text: str) -> int:
    """Bytes: "1048576", "512K", "10M" or "1G" (powers of 1024)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    digits, unit = text.upper().removesuffix("B"), 1
    if digits[-1:] in units:
        digits, unit = digits[:-1], units[digits[-1]]
    if not (digits.isascii() and digits.isdigit()) or int(digits) <= 0:
        raise argparse.ArgumentTypeError(f"expected a size such as 10M or 1048576, not {text!r}")
    return int(digits) * unit


def _journal_count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a count >= 0, not {text!r}")
    return int(text)


def add_monitor_flags(parser: Any) -> None:
    """--metrics, --event-log and its bounds."""
    parser.add_argument(
        "--metrics",
        type=_address,
        metavar="[HOST:]PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics and a read-only web "
        "page of the tree at / (HOST: 127.0.0.1 unless given; PORT 0: any free port)",
    )
    parser.add_argument(
        "--event-log",
        type=Path,
        metavar="PATH",
        help="append the tree's events to PATH as dated JSON Lines, rotated by size",
    )
    parser.add_argument(
        "--event-log-max-bytes",
        type=_journal_size,
        metavar="SIZE",
        help="rotate the event log at this size (default 10M)",
    )
    parser.add_argument(
        "--event-log-backups",
        type=_journal_count,
        metavar="N",
        help="rotated event log files kept (default 5)",
    )


def monitor_options(args: Any) -> dict[str, Any]:
    """RunOptions' fields from the flags of add_monitor_flags."""
    return {
        "metrics": args.metrics,
        "event_log": args.event_log,
        "event_log_max_bytes": args.event_log_max_bytes,
        "event_log_backups": args.event_log_backups,
    }
