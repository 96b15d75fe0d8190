"""A spec's misspelt keyword names the field it meant (`ChildSpec(comand=...)`), where
a dataclass says only "unexpected keyword argument"."""

from __future__ import annotations

import dataclasses
import difflib
import functools
from typing import Any, TypeVar

T = TypeVar("T")


def keywords_checked(cls: type[T]) -> type[T]:
    """Wrap a dataclass's __init__: an unknown keyword is a TypeError with a did-you-mean."""
    init = cls.__init__
    names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    known = frozenset(names)

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        for key in kwargs:
            if key not in known:
                raise TypeError(unknown_keyword(cls.__name__, key, names))
        init(self, *args, **kwargs)

    setattr(cls, "__init__", __init__)  # noqa: B010 (mypy refuses a direct assignment)
    return cls


def unknown_keyword(owner: str, key: str, names: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"its fields: {', '.join(names)}"
    return f"{owner}() got an unexpected keyword argument {key!r}; {hint}"
