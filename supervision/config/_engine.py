"""A tree file's `[engine]` table: `EngineConfig`, the engine that runs its placed
subtrees, read by `load_engine` (alone) and by `load_tree` (with the tree's problems).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._errors import (
    ConfigError,
)
from ._keys import (
    ENGINE_COUNTS,
    ENGINE_KEYS,
    ENGINE_KINDS,
    ENGINE_SECONDS,
    ENGINE_SECONDS_OR_OFF,
    ENGINE_TABLES,
)
from ._read import (
    NO_FILE,
    _Reader,
)

_ADDRESS = re.compile(r"^(auto|local|ray://[^\s/:]+(:\d+)?|[^\s/:]+:\d+)$")


ADDRESS_FORMS = '"auto", "local", "ray://HOST:10001" (a Ray client) or "HOST:PORT" (a GCS)'


@dataclass(frozen=True)
class EngineConfig:
    """A tree file's `[engine]` table: the engine that runs its placed subtrees.

    `options` holds only the settings the file gave, each under the name of the
    engine's parameter (`lease_timeout`: seconds, or None for off); the rest keep
    the engine's defaults. `address` None: the engine's default (Ray: a cluster on
    this host, else one started for the run).
    """

    kind: str = "ray"
    address: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def over(self, base: EngineConfig | None) -> EngineConfig:
        """These settings over `base` (flags over a file): each one given here wins."""
        if base is None:
            return self
        return EngineConfig(
            self.kind,
            self.address if self.address is not None else base.address,
            {**base.options, **self.options},
        )


def load_engine(
    text: str | bytes,
    filename: str = NO_FILE,
    *,
    vars: Mapping[str, object] | None = None,
) -> EngineConfig | None:
    """The `[engine]` table of a tree file (already read), validated; None without one.

    Raises ConfigError as `load_tree` does (which validates the table too)."""
    reader = _Reader(filename, None, vars)
    doc = reader.document(text)
    if "engine" not in doc:
        return None
    return read_engine(reader, doc["engine"], "engine")


def read_engine(self: _Reader, value: Any, path: str) -> EngineConfig:
    """The `[engine]` table: every problem in it at once, each with its fix."""
    if not isinstance(value, dict):
        raise self.error(path, value, 'expected a table: [engine] with kind = "ray"')
    problems: list[ConfigError] = []
    try:
        self.check_keys(value, path, ENGINE_KEYS)
    except ConfigError as e:
        problems.extend(e.errors)
    kind = value.get("kind", "ray")
    if kind not in ENGINE_KINDS:
        expected = ", ".join(f'"{k}"' for k in ENGINE_KINDS)
        problems.append(self.error(f"{path}.kind", kind, f"expected {expected}"))
    address = value.get("address")
    if address is not None and not (isinstance(address, str) and _ADDRESS.match(address)):
        problems.append(self.error(f"{path}.address", address, f"expected {ADDRESS_FORMS}"))
    options: dict[str, Any] = {}
    for key in (*ENGINE_SECONDS_OR_OFF, *ENGINE_SECONDS, *ENGINE_COUNTS):
        if key not in value:
            continue
        try:
            options[key] = _option(self, value, path, key)
        except ConfigError as e:
            problems.append(e)
    for key in ENGINE_TABLES:
        if key not in value:
            continue
        if isinstance(value[key], dict):
            options[key] = value[key]
        else:
            problems.append(
                self.error(
                    f"{path}.{key}", value[key], 'expected a table, e.g. { pip = ["requests"] }'
                )
            )
    if problems:
        raise ConfigError.several(problems)
    return EngineConfig(kind, address, options)


def _option(self: _Reader, table: Mapping[str, Any], path: str, key: str) -> float | int | None:
    value = table[key]
    if key in ENGINE_COUNTS:
        if type(value) is not int or value < 1:
            raise self.error(f"{path}.{key}", value, "expected an integer >= 1")
        return value
    if key in ENGINE_SECONDS_OR_OFF and value is False:
        return None
    if type(value) not in (int, float) or not 0 < value < float("inf"):
        off = " or false (off)" if key in ENGINE_SECONDS_OR_OFF else ""
        raise self.error(f"{path}.{key}", value, f"expected a number of seconds > 0{off}")
    return float(value)
