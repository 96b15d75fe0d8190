"""Tree files for the fuzzer: TOML written from random tables, each field valid or at an edge."""

from __future__ import annotations

import datetime
import json
import random
import re
from typing import Any

from supervision.config._keys import (
    BACKOFF_KEYS,
    PLACEMENT_KEYS,
    RELOAD_KEYS,
    ROOT_KEYS,
    SUPERVISOR_KEYS,
    WORKER_KEYS,
)

from . import _values as v

_TOML_VALUES: dict[str, tuple[Any, ...]] = {
    "id": ("w", "pool", "", "a/b", "x" * 300, 1),
    "type": ("worker", "supervisor", "daemon"),
    "restart": ("permanent", "transient", "temporary", "never"),
    "shutdown": (0, 5, 0.5, "brutal_kill", "infinity", -1, "5"),
    "significant": (True, False),
    "backoff": (True, False, {"initial": 0.5, "max": 30}, {"factor": 2, "jitter": 0.1}),
    "command": (["sleep", "10"], "sleep 10", "'open", [], ["a\x00b"], [1], ""),
    "target": ("mypkg.jobs:run", "x.y:z", "a.b:c", "nope", "a:b:c"),
    "args": ([1, 2], [], "x"),
    "kwargs": ({"n": 1}, [1]),
    "env": ({"PORT": "8000"}, {"": "x"}, {"A=B": "1"}, {"A": 1}, {"A": "x\x00"}),
    "inherit_env": (True, False),
    "cwd": ("run", "/tmp", ""),
    "ready": ("started", "notify", "sd_notify", 1.5, 0, {"file": "r"}, {"file": ""}),
    "start_timeout": (1, 0, -1, 0.001),
    "min_uptime": (0, 1, -1),
    "memory_limit": ("512M", "1G", "4K", 4096, 100, "1.5 GiB", "9" * 400, "\u0663M", "x"),
    "stdout": ("capture", "out.log", ""),
    "stderr": ("capture", "err.log", ""),
    "normal_exit_codes": ([0, 1], [256], [-1], [True]),
    "fresh_interpreter": (True, False),
    "warm_start": (True, False),
    "stop_signal": ("QUIT", "SIGTERM", 9, 0, 99999, "STOP", "SIG_DFL", "x"),
    "kill_mode": ("group", "main", "x"),
    "watchdog": (10, 0, -1, 0.001),
    "pid_file": ("run/app.pid", ""),
    "reload": ("HUP", 1, {"signal": "HUP", "check": ["nginx", "-t"]}, {"check_timeout": 0}),
    "strategy": ("one_for_one", "one_for_all", "rest_for_one", "simple_one_for_one", "x"),
    "auto_shutdown": ("never", "any_significant", "all_significant", "x"),
    "intensity": (0, 3, -1, 2**63 - 1),
    "period": (5.0, 0, -1, 1e-300),
    "max_children": (1, 0, 10),
    "placement": ({"node": "node-b"}, {"labels": {"gpu": "1"}}, {"resources": {"CPU": 1}}),
    "initial": (0.5, 0, -1),
    "factor": (2, 0.5, 1),
    "max": (30, 0),
    "jitter": (0.1, 0, 2),
    "reset_after": (10, 0),
    "signal": ("HUP", 1, "x"),
    "check": (["nginx", "-t"], "", []),
    "check_timeout": (5, 0, -1),
    "node": ("node-b", ""),
    "labels": ({"gpu": "1"}, {"a": 1}),
    "resources": ({"CPU": 1}, {"CPU": -1}, {"x": "y"}),
    "policy": ("strict", "prefer", "x"),
    "fallback": ("host", "x", True),
}
_INNER_KEYS = {"backoff": BACKOFF_KEYS, "reload": RELOAD_KEYS, "placement": PLACEMENT_KEYS}


def _toml_field(rng: random.Random, key: str) -> Any:
    if key in _INNER_KEYS and rng.random() < 0.3:
        keys = rng.sample(_INNER_KEYS[key], rng.randint(0, 3))
        return {k: _toml_field(rng, k) for k in keys}
    if key in _TOML_VALUES and rng.random() < 0.8:
        return rng.choice(_TOML_VALUES[key])
    return toml_plain(rng)


def _toml_table(rng: random.Random, keys: tuple[str, ...], depth: int) -> dict[str, Any]:
    table: dict[str, Any] = {}
    if rng.random() < 0.9:
        table["id"] = rng.choice(("a", "b", "c", "pool")) if rng.random() < 0.7 else v.text(rng)
    supervisor = "children" in keys
    if not supervisor and rng.random() < 0.9:
        key = "command" if rng.random() < 0.7 else "target"
        table[key] = _toml_field(rng, key)
    for key in rng.sample(keys, min(len(keys), rng.choice((0, 1, 2, 3, 5)))):
        if key != "children":
            table[key] = _toml_field(rng, key)
    if rng.random() < 0.05:
        table[v.text(rng) or "x"] = toml_plain(rng)
    if supervisor:
        if depth < 2 and rng.random() < 0.9:
            table["children"] = [_toml_child(rng, depth + 1) for _ in range(rng.randint(0, 4))]
        elif rng.random() < 0.1:
            table["children"] = toml_plain(rng)
    return table


def _toml_child(rng: random.Random, depth: int) -> dict[str, Any]:
    if rng.random() < 0.25:
        table = _toml_table(rng, SUPERVISOR_KEYS, depth)
        table.setdefault("strategy", "one_for_one")
        return table
    return _toml_table(rng, WORKER_KEYS, depth)


def _toml_render(table: dict[str, Any], path: str, lines: list[str]) -> None:
    children = table.get("children")
    nested = isinstance(children, list) and all(isinstance(c, dict) for c in children)
    for key, value in table.items():
        if key != "children" or not nested:
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    if nested and isinstance(children, list):
        for child in children:
            lines.append(f"[[{path}.children]]")
            _toml_render(child, f"{path}.children", lines)


def toml_document(rng: random.Random) -> str:
    """A tree file: mostly well-formed TOML, with fields valid or at their edges."""
    root = _toml_table(rng, ROOT_KEYS, 0)
    if rng.random() < 0.3:
        root.pop("id", None)
    lines = ["[supervisor]"]
    _toml_render(root, "supervisor", lines)
    return "\n".join(lines) + "\n"


def resolve(ref: str) -> Any:
    """A stand-in importer: a function, a non-function, or ImportError."""
    if ref.startswith("x."):
        return print
    if ref.startswith("a."):
        return 5  # imported, but not a function
    raise ModuleNotFoundError(ref)


# -- writing TOML --------------------------------------------------------------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key, ensure_ascii=False)


def toml_value(value: Any) -> str:
    """`value` written as TOML (None, which TOML lacks, as an empty inline table)."""
    if value is None:
        return "{}"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    raise TypeError(value)


def toml_scalar(rng: random.Random) -> Any:
    if rng.random() < 0.05:
        return rng.choice(
            (datetime.date(1979, 5, 27), datetime.time(7, 32), datetime.datetime(1979, 5, 27))
        )
    value = v.scalar(rng)
    return {} if value is None else value


def toml_plain(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth >= 3 or roll < 0.6:
        return toml_scalar(rng)
    if roll < 0.8:
        return [toml_plain(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {v.text(rng): toml_plain(rng, depth + 1) for _ in range(rng.randint(0, 3))}
