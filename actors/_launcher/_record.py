"""A record: one message of the launcher's protocol, a tag and typed fields.

A record travels as a plain tuple, its tag then its fields in order
(`pack()`); `actors._launcher._protocol.decode` builds one back and checks
every field against `TYPES`. Lean on purpose: a fresh Python child imports
this (through `_control`) before its target, so no dataclasses, no typing.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a fresh child milliseconds; mypy knows this name
if TYPE_CHECKING:
    from typing import Any, ClassVar


class Record:
    """A message: `TAG`, `FIELDS` in order and their `TYPES`; `pack()` gives the tuple sent."""

    __slots__ = ()
    TAG: ClassVar[str]
    FIELDS: ClassVar[tuple[str, ...]] = ()
    # Per field: a type, a Record class (nested), or a tuple of those (None's type allowed).
    TYPES: ClassVar[tuple[Any, ...]] = ()

    def pack(self) -> tuple[Any, ...]:
        return (self.TAG, *self.values())

    def values(self) -> tuple[Any, ...]:
        """The fields in order, nested records as tuples of their own fields."""
        out = []
        for name in self.FIELDS:
            value = getattr(self, name)
            out.append(value.values() if isinstance(value, Record) else value)
        return tuple(out)
