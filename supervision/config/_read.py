"""A tree file's values, read and checked one at a time (`_Reader`): the TOML
document, unknown keys with a "did you mean", and each kind of value a key takes.
Every problem is a ConfigError at its table path.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from .._errors import SpecError
from ..spec._fields import (
    Backoff,
    ReadyFile,
    Reload,
)
from ..spec._placement import Placement
from ..spec._probes import ExecProbe, HttpProbe, Liveness, LogLine, Probe, TcpProbe
from ..spec._restart_limit import RestartLimit
from ._errors import (
    MISSING,
    ConfigError,
    _check_tree_size,
    _huge_ints,
    check_size,
)
from ._foreign import foreign_hint
from ._keys import (
    _READY_TABLES,
    BACKOFF_KEYS,
    FILE_READY_KEYS,
    LIVENESS_KEYS,
    LOG_READY_KEYS,
    PLACEMENT_KEYS,
    PROBE_KEYS,
    RELOAD_KEYS,
    RESTART_LIMIT_KEYS,
    TREE_KEYS,
)
from ._vars import VarError, substitute

NO_FILE = "<string>"


TargetResolver = Callable[[str], Callable[..., Any]]
"""Turns "package.module:function" into the callable; raises when it cannot."""


_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def _choices(enum: Any) -> str:
    return "expected one of " + ", ".join(f'"{m.value}"' for m in enum)


def _last(path: str) -> str:
    """The key a table path ends with: `supervisor.children[1].command` -> `command`."""
    return path.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class UnresolvedTarget:
    """A `target = "module:function"` loaded without a resolver (e.g. to check a file).

    Calling it fails: load the tree through `actors` to import targets for real.
    """

    ref: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"target {self.ref!r} was never imported; load the tree with a resolver "
            "(actors.cli does) to run it"
        )


class _Reader:
    """One tree file's values read and checked, each at its table path: the document
    itself, its keys, and every kind of value a key takes (a probe, seconds, a path,
    a size...). _load.py's `_Loader` walks the tables with it."""

    def __init__(
        self,
        filename: str,
        resolve: TargetResolver | None,
        values: Mapping[str, object] | None = None,
    ) -> None:
        self.filename = filename
        self.resolve = resolve
        self.values = values
        self.base = None if filename == NO_FILE else PurePath(filename).parent
        # Variables with no value: raised at once (None), or kept here while the rest of
        # the file is still checked, so one pass lists every problem (the tree loader).
        self.unset: list[ConfigError] | None = None

    def error(self, path: str, value: Any, expected: str) -> ConfigError:
        return ConfigError(self.filename, path, value, expected)

    def document(self, text: str | bytes) -> dict[str, Any]:
        """The TOML document, variables substituted, its top-level keys checked."""
        check_size(len(text) if isinstance(text, bytes) else len(text.encode()), self.filename)
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(self.filename, "", MISSING, f"not UTF-8 text ({e})") from None
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(
                self.filename, "", MISSING, f"not valid TOML: {e}; fix the syntax there"
            ) from None
        except RecursionError:  # tomllib recurses once per level of nested arrays or tables
            raise ConfigError(
                self.filename, "", MISSING, "not valid TOML: arrays or tables nested too deep"
            ) from None
        _check_tree_size(doc, self.filename)
        huge = [self.error(p, v, "TOML integers are 64-bit") for p, v in _huge_ints(doc, "")]
        if huge:  # tomllib reads any size; a float() of one would overflow
            raise ConfigError.several(huge)
        if self.values is not None:
            try:
                doc = substitute(doc, self.values)
            except VarError as e:
                found = [self.error(p.path, p.value, p.expected) for p in e.problems]
                if self.unset is None:
                    raise ConfigError.several(found) from None
                self.unset.extend(found)  # the rest of `doc` is substituted: read on
        self.check_keys(doc, "", ("supervisor", "defaults", "engine", *TREE_KEYS))
        return doc

    def check_keys(self, table: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> None:
        unknown = []
        for key in table:
            if key not in allowed:
                near = difflib.get_close_matches(key, allowed, n=1)
                longer = [a for a in allowed if a.startswith(f"{key}_")]
                near = near or (longer if len(longer) == 1 else [])  # lease: lease_timeout
                hint = f'did you mean "{near[0]}"? ' if near else ""
                foreign = foreign_hint(key, table[key], allowed)  # stopwaitsecs: shutdown
                hint = f"{foreign}; " if foreign else hint
                where = f"{path}.{key}" if path else key
                unknown.append(
                    self.error(
                        where, table[key], f"unknown key; {hint}allowed here: {', '.join(allowed)}"
                    )
                )
        if unknown:
            raise ConfigError.several(unknown)  # every unknown key is reported

    def probe(self, value: dict[str, Any], path: str, extra: tuple[str, ...] = ()) -> Probe:
        """{ tcp = 8000 }, { http = "url" } or { exec = [...] }, with timeout and period."""
        kinds = [k for k in PROBE_KEYS if k in value]
        if len(kinds) != 1:
            raise self.error(
                path,
                value,
                'expected exactly one of tcp = PORT, http = "URL" or exec = ["prog", ...]',
            )
        kind = kinds[0]
        self.check_keys(value, path, (*PROBE_KEYS[kind], *extra))
        fields = {k: v for k, v in value.items() if k not in (kind, *extra)}
        for key in ("timeout", "period"):
            if key in fields:
                fields[key] = self.seconds(fields, path, key)
        try:
            if kind == "tcp":
                return TcpProbe(value["tcp"], **fields)
            if kind == "http":
                return HttpProbe(value["http"], **fields)
            return ExecProbe(self.command(value["exec"], f"{path}.exec"), **fields)
        except SpecError as e:
            field = e.field if "." in e.field else kind
            raise self.error(f"{path}.{field.split('.')[-1]}", e.value, e.expected) from None

    def liveness(self, value: Any, path: str) -> Liveness:
        if not isinstance(value, dict):
            raise self.error(
                path,
                value,
                'expected a table such as { http = "http://127.0.0.1:8000/health", '
                "period = 10, failures = 3 }",
            )
        probe = self.probe(value, path, LIVENESS_KEYS)
        fields: dict[str, Any] = {}
        if "failures" in value:
            fields["failures"] = self.integer(value, path, "failures")
        if "initial_delay" in value:
            fields["initial_delay"] = self.seconds(value, path, "initial_delay", zero=True)
        try:
            return Liveness(probe, **fields)
        except SpecError as e:
            raise self.error(f"{path}.{e.field.split('.')[-1]}", e.value, e.expected) from None

    def reload(self, value: Any, path: str) -> Reload:
        """`reload = "HUP"` or a table: { signal = "HUP", check = ["nginx", "-t"] }."""
        if isinstance(value, dict):
            self.check_keys(value, path, RELOAD_KEYS)
            fields = dict(value)
            if "check" in fields:
                fields["check"] = self.command(fields["check"], f"{path}.check")
        elif isinstance(value, str) or type(value) is int:
            fields = {"signal": value}
        else:
            raise self.error(
                path,
                value,
                'expected a signal such as "HUP", or a table such as '
                '{ signal = "HUP", check = ["nginx", "-t"] }',
            )
        try:
            return Reload(**fields)
        except SpecError as e:
            field = e.field.removeprefix("reload.")
            raise self.error(f"{path}.{field}", e.value, e.expected) from None

    def command(self, value: Any, path: str) -> tuple[str, ...]:
        if isinstance(value, str):
            try:
                argv = shlex.split(value)
            except ValueError as e:
                raise self.error(path, value, f"cannot split it into arguments: {e}") from None
        elif isinstance(value, list) and all(isinstance(a, str) for a in value):
            argv = list(value)
        else:
            raise self.error(path, value, 'expected an array of strings, e.g. ["sleep", "10"]')
        if not argv:
            raise self.error(path, value, 'expected a program to run, e.g. ["sleep", "10"]')
        for i, arg in enumerate(argv):
            if "\0" in arg:
                raise self.error(f"{path}[{i}]", arg, "an argument cannot contain NUL bytes")
        return tuple(argv)

    def target(self, value: Any, path: str) -> Callable[..., Any]:
        if not isinstance(value, str) or not _TARGET.match(value):
            raise self.error(
                path, value, 'expected "package.module:function", e.g. "myapp.jobs:run"'
            )
        if self.resolve is None:
            return UnresolvedTarget(value)
        try:
            target = self.resolve(value)
        except Exception as e:
            raise self.error(
                path,
                value,
                f"cannot import it ({type(e).__name__}: {e}); the module must be "
                "importable from the tree file's directory or the Python path",
            ) from None
        if not callable(target):
            raise self.error(path, value, f"names a {type(target).__name__}, not a function")
        return target

    def ready(self, value: Any, path: str) -> Any:
        if value in ("started", "notify", "sd_notify", "exited"):
            return value
        if type(value) in (int, float) and 0 < value < float("inf"):
            return float(value)
        if isinstance(value, dict) and list(value) == list(FILE_READY_KEYS):
            return ReadyFile(self.path(value, path, "file"))
        if (
            isinstance(value, dict)
            and len([k for k in (*PROBE_KEYS, "log", "file") if k in value]) > 1
        ):
            raise self.error(
                path, value, f"expected one kind of readiness in the table: {_READY_TABLES}"
            )
        if isinstance(value, dict) and "log" in value:
            self.check_keys(value, path, LOG_READY_KEYS)
            try:
                return LogLine(value["log"], value.get("stream", "both"))
            except SpecError as e:
                field = "stream" if e.field.endswith("stream") else "log"
                raise self.error(f"{path}.{field}", e.value, e.expected) from None
        if isinstance(value, dict) and any(k in value for k in PROBE_KEYS):
            return self.probe(value, path)
        raise self.error(
            path,
            value,
            'expected "started", "notify" (a target calls actors.child.ready()), '
            '"sd_notify" (a command sends READY=1 to NOTIFY_SOCKET), "exited" (a one-shot '
            f"step), seconds of uptime, or a table: {_READY_TABLES}",
        )

    def env(self, value: Any, path: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.error(path, value, 'expected a table, e.g. env = { PORT = "8000" }')
        for name, var in value.items():
            if not name or "=" in name or "\0" in name:
                raise self.error(
                    f"{path}.{json.dumps(name)}",
                    var,
                    "an environment variable name must be non-empty, without '=' or NUL bytes",
                )
            if isinstance(var, str) and "\0" in var:
                raise self.error(f"{path}.{name}", var, "a value cannot contain NUL bytes")
            if not isinstance(var, str):
                raise self.error(
                    f"{path}.{name}", var, f'expected a string; quote it: {name} = "{var}"'
                )
        return dict(value)

    def backoff(self, value: Any, path: str) -> Backoff | None:
        """`backoff = true` (the defaults), `false`, or a table of Backoff's fields."""
        if isinstance(value, bool):
            return Backoff() if value else None
        if not isinstance(value, dict):
            raise self.error(
                path, value, "expected true, false or a table, e.g. { initial = 0.5, max = 30 }"
            )
        self.check_keys(value, path, BACKOFF_KEYS)
        try:
            return Backoff(**value)
        except SpecError as e:
            field = e.field.removeprefix("backoff.")
            raise self.error(f"{path}.{field}", e.value, e.expected) from None

    def restart_limit(self, value: Any, path: str) -> RestartLimit | None:
        """`restart_limit = { intensity = 5, period = 30 }` (either may be left out for
        its default), or `false` (none)."""
        if value is False:
            return None
        if not isinstance(value, dict):
            raise self.error(
                path,
                value,
                "expected a table: at most `intensity` restarts in `period` seconds, "
                "e.g. { intensity = 5, period = 30 }",
            )
        self.check_keys(value, path, RESTART_LIMIT_KEYS)
        try:
            return RestartLimit(**value)
        except SpecError as e:
            field = e.field.removeprefix("restart_limit.")
            raise self.error(f"{path}.{field}", e.value, e.expected) from None

    def placement(self, value: Any, path: str) -> Placement:
        """A table of Placement's fields, e.g. { node = "node-b", policy = "prefer" }."""
        if not isinstance(value, dict):
            raise self.error(path, value, 'expected a table, e.g. placement = { node = "node-b" }')
        self.check_keys(value, path, PLACEMENT_KEYS)
        try:
            return Placement(**value)
        except SpecError as e:
            field = e.field.removeprefix("placement.")
            raise self.error(f"{path}.{field}", e.value, e.expected) from None

    def ident(self, table: Mapping[str, Any], path: str) -> str:
        value = table.get("id", MISSING)
        if not isinstance(value, str) or not value or "/" in value:
            raise self.error(
                f"{path}.id",
                value,
                'every child needs a unique id without "/", e.g. id = "web"',
            )
        return value

    def enum(self, table: Mapping[str, Any], path: str, key: str, enum: Any) -> Any:
        try:
            return enum(table[key])
        except ValueError:
            raise self.error(f"{path}.{key}", table[key], _choices(enum)) from None

    def integer(self, table: Mapping[str, Any], path: str, key: str) -> int:
        value = table[key]
        if type(value) is not int or value < 0:
            raise self.error(f"{path}.{key}", value, "expected an integer >= 0")
        return value

    def seconds(
        self, table: Mapping[str, Any], path: str, key: str, *, zero: bool = False
    ) -> float:
        value = table[key]
        low_ok = type(value) in (int, float) and (value >= 0 if zero else value > 0)
        if not low_ok or not value < float("inf"):
            bound = ">= 0" if zero else "> 0"
            raise self.error(f"{path}.{key}", value, f"expected a number of seconds {bound}")
        return float(value)

    def boolean(self, table: Mapping[str, Any], path: str, key: str) -> bool:
        value = table[key]
        if not isinstance(value, bool):
            raise self.error(f"{path}.{key}", value, "expected true or false")
        return value

    def path(self, table: Mapping[str, Any], path: str, key: str) -> str:
        value = table[key]
        if not isinstance(value, str) or not value:
            raise self.error(f"{path}.{key}", value, "expected a path (relative to the file)")
        if self.base is None or PurePath(value).is_absolute():
            return value
        return str(self.base / value)

    def size(self, value: Any, path: str) -> int:
        if type(value) is int:
            return value
        match = _SIZE.match(value) if isinstance(value, str) else None
        if match is None:
            raise self.error(
                path, value, 'expected bytes, or a size such as "512M" or "1G" (powers of 1024)'
            )
        size = float(match[1]) * _UNITS[match[2].upper()]
        if size == float("inf"):  # "999...9": int() of an infinite float raises OverflowError
            raise self.error(path, value, "expected a size this machine can count in bytes")
        return int(size)

    def spec_error(self, e: SpecError, path: str) -> ConfigError:
        """A field the spec itself refused: same message, with the table path."""
        return self.error(f"{path}.{e.field}", e.value, e.expected)
