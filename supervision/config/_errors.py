"""What a tree file can get wrong: `ConfigError` (the file, the table path, the
value and the fix), `TooLarge`, and the size checks made before a file is read
further.
"""

from __future__ import annotations

import json
from typing import Any

from .._errors import NannyError
from ._keys import (
    LIMITS_FIX,
    MAX_CHILDREN,
    MAX_DEPTH,
    MAX_FILE_BYTES,
)

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "missing"})()
"""The value of a ConfigError about something absent: a key, or the whole file (path "")."""


class ConfigError(NannyError, ValueError):
    """A tree file is invalid: names the file, the table path, the value and the fix."""

    def __init__(self, filename: str, path: str, value: Any, expected: str) -> None:
        self.filename = filename
        self.path = path
        self.value = value
        self.expected = expected
        # Every problem found in the file (a check reports them all); this one first.
        self.errors: list[ConfigError] = [self]
        where = f"{filename}: {path}" if path else filename
        if not path and value is MISSING:
            super().__init__(f"{filename}: {expected}")
        elif value is MISSING:
            super().__init__(f"{where} is missing; {expected}")
        else:
            super().__init__(f"{where} is {show(value)}; {expected}")

    @classmethod
    def several(cls, errors: list[ConfigError]) -> ConfigError:
        """One error for many: the first's fields, every message, `errors` all of them."""
        first = errors[0]
        if len(errors) == 1:
            return first
        combined = cls(first.filename, first.path, first.value, first.expected)
        combined.errors = list(errors)
        lines = "\n".join(f"  {e}" for e in errors)
        combined.args = (f"{first.filename}: {len(errors)} problems:\n{lines}",)
        return combined


class TooLarge(ConfigError):
    """A tree file past MAX_FILE_BYTES, MAX_CHILDREN or MAX_DEPTH: refused before it
    is read further (no other problem of it is looked for)."""


def show(value: Any, limit: int = 80) -> str:
    """A value as TOML-ish text for messages."""
    text = json.dumps(value, default=repr, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_size(size: int, filename: str) -> None:
    """TooLarge if a file of `size` bytes is past MAX_FILE_BYTES."""
    if size > MAX_FILE_BYTES:
        raise TooLarge(
            filename,
            "",
            MISSING,
            f"larger than {MAX_FILE_BYTES // 1024**2} MiB ({MAX_FILE_BYTES:,} bytes), the "
            f"limit of a tree file; {LIMITS_FIX}",
        )


def _check_tree_size(doc: dict[str, Any], filename: str) -> None:
    """TooLarge if the document's tree has more than MAX_CHILDREN children or nests
    supervisors deeper than MAX_DEPTH; iterative, and it stops at the first excess."""
    root = doc.get("supervisor")
    count = 0
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        table, depth = stack.pop()
        children = table.get("children") if isinstance(table, dict) else None
        if not isinstance(children, list):
            continue
        if children and depth >= MAX_DEPTH:
            raise TooLarge(
                filename,
                "",
                MISSING,
                f"children nested more than {MAX_DEPTH} levels below the root, the limit of "
                f"a tree file; flatten it, or {LIMITS_FIX}",
            )
        count += len(children)
        if count > MAX_CHILDREN:
            raise TooLarge(
                filename,
                "",
                MISSING,
                f"more than {MAX_CHILDREN:,} children, the limit of a tree file; {LIMITS_FIX}",
            )
        stack += [(c, depth + 1) for c in children]


def _huge_ints(value: Any, path: str) -> list[tuple[str, int]]:
    """The integers of a document outside TOML's 64-bit range, by their paths."""
    if type(value) is int:
        return [(path, value)] if not -(1 << 63) <= value < 1 << 63 else []
    if isinstance(value, dict):
        items: Any = ((f"{path}.{k}" if path else k, v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return []
    return [found for where, v in items for found in _huge_ints(v, where)]
