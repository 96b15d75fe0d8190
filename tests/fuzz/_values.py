"""Random values for generators: the edges of each type, and plain data nested."""

from __future__ import annotations

import random
from typing import Any

INTS = (0, 1, -1, 2, 5, 255, 256, 4096, 1 << 22, 2**31 - 1, 2**32, 2**63 - 1, -(2**63))
FLOATS = (0.0, -0.0, 0.5, 1.5, 1e-320, 1e308, float("inf"), float("-inf"), float("nan"))
TEXTS = (
    *("", "x", "web", "a/b", "/", " ", "\x00", "\n", "\u00b2", "\u0663", "\u2028", "\u00e9"),
    *("HUP", "SIGTERM", "capture", "started", "notify", "sd_notify", "all", "1", "512M"),
)


def text(rng: random.Random, *, surrogates: bool = False) -> str:
    """A short string: a known edge, or random characters."""
    if rng.random() < 0.5:
        return rng.choice(TEXTS)
    top = 0xDFFF if surrogates and rng.random() < 0.2 else 0x2FF
    chars = [chr(rng.randint(0, top)) for _ in range(rng.randint(0, 12))]
    if not surrogates:
        chars = [c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF]
    return "".join(chars)


def scalar(rng: random.Random) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice(INTS) + rng.choice((0, 0, 1, -1))
    if kind == 1:
        return rng.choice(FLOATS)
    if kind == 2:
        return rng.random() < 0.5
    if kind == 3:
        return None
    return text(rng)


def plain(rng: random.Random, depth: int = 0) -> Any:
    """JSON-like data: scalars, lists and dicts, a few levels deep."""
    roll = rng.random()
    if depth >= 3 or roll < 0.6:
        return scalar(rng)
    if roll < 0.8:
        return [plain(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {text(rng): plain(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def deep(rng: random.Random) -> str:
    """JSON nested deeper than any parser recurses."""
    n = rng.choice((100, 1000, 5000, 20000))
    return rng.choice(("[", '{"a":')) * n
