"""Untrusted text made safe for a terminal.

Children write what they like into exception messages, stderr tails and output,
and a TOML file can put anything in an id; printed raw, an escape sequence would
drive the operator's terminal (retitle it, hide lines, rewrite what is shown).
Everything the CLI prints that it did not write itself goes through `printable`.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (\x9b is a CSI on some terminals) and the Unicode
# bidi controls that reorder what is shown ("Trojan Source").
_BIDI = "\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_KEEP_LINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, lines: bool = False) -> str:
    """`text` with every control character shown as an escape (`\\x1b`), never sent raw.

    With `lines`, newlines and tabs are kept (for multi-line output such as logs).
    Idempotent: escaping twice gives the same text.
    """
    pattern = _UNSAFE_KEEP_LINES if lines else _UNSAFE
    return pattern.sub(_escape, str(text))
