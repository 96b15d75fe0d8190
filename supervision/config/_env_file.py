"""Environment files (`env_file`): systemd's `EnvironmentFile=` format, parsed. Pure:
the caller reads the file (actors/_treefile.py reads it with the child's rights).

    # a comment (also ';'), only at the start of a line
    PORT=8000
    NAME = "two words"                # quotes: the value is what is inside them
    SINGLE='no $escapes \\ here'      # single quotes: nothing is escaped
    LONG=first \\
    second                            # a backslash at the end of a line continues it

The rules are systemd's (src/basic/env-file.c, `parse_env_file_internal`), state for
state: whitespace around the key and before the value is dropped, and after an
unquoted value too unless escaped; a quote opens only at the start of a value (or
right after a closing one); inside double quotes a backslash escapes only `"`, `\\`,
`` ` `` and `$` (before anything else it stays), and one before a newline joins the
lines; unquoted, a backslash keeps the character after it as it is. Nothing is
expanded (`$X` stays `$X`) and there are no comments after a value, as in systemd.
A later assignment of a name replaces an earlier one.

Where systemd logs a line and skips it (a name that is not a shell variable's, text
that is not UTF-8) or drops it silently (a line without `=`, a quote never closed, a
NUL byte), this parser refuses the file, naming the line and the fix: `check` then
says so before a run, instead of a child that starts without its variable.
python-dotenv's format differs (`export`, `${X}` expansion, `\\n` in double quotes,
`# comments` after a value), so it is not used.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from ._errors import ConfigError
from ._read import _Reader

MAX_ENV_FILE_BYTES = 1024 * 1024  # far above a real one; a value past 128 KiB fails exec
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WHITESPACE = " \t\n\r"
_NEWLINE = "\n\r"
_COMMENTS = "#;"
_ESCAPED_IN_DOUBLE = '"\\`$'


class EnvFileProblem(ValueError):
    """What is wrong in an environment file: its line (1-based), what, and the fix."""

    def __init__(self, line: int, what: str, fix: str) -> None:
        self.line = line
        self.what = what
        self.fix = fix
        super().__init__(f"line {line}: {what}; {fix}")


def parse_env_file(data: bytes) -> dict[str, str]:
    """The variables an environment file sets, in order (a later one wins); raises
    EnvFileProblem for the first line systemd would skip or misread."""
    if len(data) > MAX_ENV_FILE_BYTES:
        raise EnvFileProblem(
            1,
            f"larger than {MAX_ENV_FILE_BYTES // 1024**2} MiB, the limit of an env file",
            "keep large data in a file of its own and pass its path",
        )
    if b"\0" in data:
        raise EnvFileProblem(
            data[: data.index(b"\0")].count(b"\n") + 1,
            "a NUL byte (systemd ends the file there)",
            "remove it: an environment value cannot hold one",
        )
    # Not UTF-8 is an error per assignment (a comment may hold any bytes, as in systemd).
    text = data.decode("utf-8", "surrogateescape")
    found: dict[str, str] = {}
    for line, key, value in _assignments(text):
        found[key] = _checked(line, key, value)
    return found


def _checked(line: int, key: str, value: str | None) -> str:
    """The value of a line that systemd reads as written; EnvFileProblem otherwise."""
    if value is None and key.startswith("="):  # systemd reads `=x` as a name, `=x`
        raise EnvFileProblem(line, "no name before '='", "write NAME=value")
    if value is None:
        if key.startswith("export ") or key.startswith("export\t"):
            raise EnvFileProblem(line, f"{key!r} has no '='", "drop `export`: write NAME=value")
        raise EnvFileProblem(
            line,
            f"{_shown(key)!r} has no '='",
            "write NAME=value, or begin the line with # to make it a comment",
        )
    if key.startswith("export ") or key.startswith("export\t"):
        name = key[len("export") :].strip()
        raise EnvFileProblem(
            line,
            f"{_shown(key)!r} is not a variable name (systemd's format has no `export`)",
            f"write {name}=... without `export`",
        )
    if not _NAME.fullmatch(key):
        raise EnvFileProblem(
            line,
            f"{_shown(key)!r} is not a variable name (systemd skips it)",
            "use letters, digits and _, not starting with a digit",
        )
    if _not_utf8(value):
        raise EnvFileProblem(
            line,
            f"the value of {key} is not UTF-8 text (systemd skips it)",
            "save the file as UTF-8",
        )
    return value


def _not_utf8(text: str) -> bool:
    return any("\udc80" <= c <= "\udcff" for c in text)


def _shown(text: str) -> str:
    """A name as written, its invalid bytes as \\x.., cut to 60 characters."""
    shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _assignments(text: str) -> list[tuple[int, str, str | None]]:
    """(line, name, value) for each `NAME=value` in order, and (line, text, None) for
    a line with no `=`; systemd's state machine, with the line each one starts on.
    An unterminated quote raises (systemd takes the rest of the file as the value)."""
    out: list[tuple[int, str, str | None]] = []
    state = "pre_key"
    key: list[str] = []
    value: list[str] = []
    key_ws: int | None = None  # where trailing whitespace of the key starts
    value_ws: int | None = None  # and of an unquoted value
    line = 1  # the line being read
    start = 1  # the line the assignment began on
    quote_line = 1
    prev = ""

    def push() -> None:
        name = "".join(key[:key_ws] if key_ws is not None else key)
        out.append((start, name, "".join(value)))

    for c in text:
        if prev == "\n" or (prev == "\r" and c != "\n"):
            line += 1
        prev = c
        if state == "pre_key":
            if c in _COMMENTS:
                state = "comment"
            elif c not in _WHITESPACE:
                state, key, key_ws, start = "key", [c], None, line
        elif state == "key":
            if c in _NEWLINE:
                out.append((start, "".join(key).rstrip(), None))
                state = "pre_key"
            elif c == "=":
                state, value, value_ws = "pre_value", [], None
            else:
                if c not in _WHITESPACE:
                    key_ws = None
                elif key_ws is None:
                    key_ws = len(key)
                key.append(c)
        elif state == "pre_value":
            if c in _NEWLINE:
                push()
                state = "pre_key"
            elif c == "'":
                state, quote_line = "single", line
            elif c == '"':
                state, quote_line = "double", line
            elif c == "\\":
                state = "value_escape"
            elif c not in _WHITESPACE:
                state = "value"
                value.append(c)
        elif state == "value":
            if c in _NEWLINE:
                if value_ws is not None:
                    del value[value_ws:]
                push()
                state = "pre_key"
            elif c == "\\":
                state, value_ws = "value_escape", None
            else:
                if c not in _WHITESPACE:
                    value_ws = None
                elif value_ws is None:
                    value_ws = len(value)
                value.append(c)
        elif state == "value_escape":
            state = "value"
            if c not in _NEWLINE:  # an escaped newline joins the lines
                value.append(c)
        elif state == "single":
            if c == "'":
                state = "pre_value"
            else:
                value.append(c)
        elif state == "double":
            if c == '"':
                state = "pre_value"
            elif c == "\\":
                state = "double_escape"
            else:
                value.append(c)
        elif state == "double_escape":
            state = "double"
            if c in _ESCAPED_IN_DOUBLE:
                value.append(c)
            elif c != "\n":  # as a shell: the backslash stays before anything else
                value += ["\\", c]
        elif state == "comment":
            if c == "\\":
                state = "comment_escape"
            elif c in _NEWLINE:
                state = "pre_key"
        elif state == "comment_escape":  # since systemd 254 a comment never continues
            state = "pre_key" if c in _NEWLINE else "comment"
    if state in ("single", "double", "double_escape"):
        mark = "'" if state == "single" else '"'
        raise EnvFileProblem(
            quote_line,
            f"the {mark} opened here is never closed (systemd takes the rest of the file)",
            f"close it with {mark}",
        )
    if state == "key":
        out.append((start, "".join(key).rstrip(), None))
    elif state in ("pre_value", "value", "value_escape"):
        if state == "value" and value_ws is not None:
            del value[value_ws:]
        push()
    return out


# -- in a tree file: `env_file` at the top and on a worker ----------------------------

EnvFileReader = Callable[[str, "str | int | None", "str | int | None"], bytes]
"""Reads an env file at a path (absolute, or relative to the working directory) with
the rights of a child's `user` and `group` as written (None: the tree's own), at most
MAX_ENV_FILE_BYTES + 1 bytes. Raises OSError (FileNotFoundError: it is not there) or
LookupError (no such user or group). actors/_treefile.py has the one nannytree uses."""

_FORMS = (
    'expected a path or an array of paths, e.g. env_file = "app.env" or '
    '["-/etc/default/app", "app.env"]'
)


@dataclass(frozen=True)
class EnvFileRef:
    """One path of an `env_file`: as written, where it is, and whether a `-` before it
    lets it be missing (systemd's `EnvironmentFile=-path`)."""

    written: str
    path: str
    optional: bool


class EnvFiles:
    """The env files of one tree file's load: each read once per path and rights, and
    merged under a worker's `env`: the tree's files, then the worker's, then `env`."""

    def __init__(
        self, reader: _Reader, read: EnvFileReader | None, note: Callable[[ConfigError], None]
    ) -> None:
        self.reader = reader
        self.read = read  # None: the paths are checked, no file is read
        self.note = note  # records a problem of the tree's own files, the load goes on
        self.tree_files: list[EnvFileRef] = []
        self.cache: dict[tuple[str, Any, Any], dict[str, str] | str] = {}

    def refs(self, value: Any, path: str) -> list[EnvFileRef]:
        """The paths of an `env_file` value, resolved against the tree file's folder."""
        many = isinstance(value, list)
        values = value if many else [value]
        if not (isinstance(value, str) or many) or not all(isinstance(v, str) for v in values):
            raise self.reader.error(path, value, _FORMS)
        refs = []
        for i, written in enumerate(values):
            optional = written.startswith("-")
            name = written[1:] if optional else written
            if not name or "\0" in name:
                raise self.reader.error(
                    f"{path}[{i}]" if many else path,
                    written,
                    "expected a path (relative to the file), without NUL bytes; a - before "
                    'it lets it be missing: "-/etc/default/app"',
                )
            base = self.reader.base
            full = name if base is None or PurePath(name).is_absolute() else str(base / name)
            refs.append(EnvFileRef(written, full, optional))
        return refs

    def tree(self, doc: Mapping[str, Any]) -> None:
        """The file's top-level `env_file`, for every worker (a problem is noted)."""
        if "env_file" in doc:
            try:
                self.tree_files = self.refs(doc["env_file"], "env_file")
            except ConfigError as e:
                self.note(e)

    def env_of(
        self, table: Mapping[str, Any], path: str, cid: str, env: dict[str, str] | None
    ) -> dict[str, str] | None:
        """A worker's environment: the tree's env files, its own, then its `env`;
        ConfigError for a problem of its own files (the tree's are noted once)."""
        own = self.refs(table["env_file"], f"{path}.env_file") if "env_file" in table else []
        user, group = table.get("user"), table.get("group")
        ids_ok = all(v is None or type(v) in (str, int) for v in (user, group))
        if self.read is None or not ids_ok or not (own or self.tree_files):
            return env  # not read; or a user the spec refuses, whose rights are unknown
        merged: dict[str, str] = {}
        for ref in self.tree_files:
            found = self._values(ref, "env_file", cid, user, group, tree=True)
            if isinstance(found, ConfigError):
                self.note(found)
            else:
                merged.update(found)
        problems = []
        for ref in own:
            found = self._values(ref, f"{path}.env_file", cid, user, group, tree=False)
            if isinstance(found, ConfigError):
                problems.append(found)
            else:
                merged.update(found)
        if problems:
            raise ConfigError.several(problems)
        return {**merged, **(env or {})}

    def _values(
        self, ref: EnvFileRef, path: str, cid: str, user: Any, group: Any, *, tree: bool
    ) -> dict[str, str] | ConfigError:
        """The variables of one file, read with the rights of `user` and `group`, or
        the problem with it (at `path`, naming the child unless the tree's own file
        read with the tree's own rights, a problem of every child alike)."""
        key = (ref.path, user, group)
        if key not in self.cache:
            self.cache[key] = self._load(ref, user, group)
        found = self.cache[key]
        if isinstance(found, str):
            who = "" if tree and user is None else f"child {cid!r}: "
            return self.reader.error(path, ref.written, f"{who}{found}")
        return found

    def _load(self, ref: EnvFileRef, user: Any, group: Any) -> dict[str, str] | str:
        """The file's variables, or what is wrong (a sentence with its fix)."""
        assert self.read is not None
        as_user = "" if user is None else f" as user {user!r}"
        try:
            data = self.read(ref.path, user, group)
        except FileNotFoundError:
            if ref.optional:
                return {}
            return (
                f"env file {ref.path} does not exist; create it, fix the path, or write "
                f'"-{ref.written}" to go on without it'
            )
        except PermissionError as e:
            fix = (
                f"let {user!r} read it (chgrp, chmod g+r), or move it where that user can"
                if user is not None
                else "make it readable by nannytree's user"
            )
            return f"cannot read env file {ref.path}{as_user} ({e.strerror or e}); {fix}"
        except LookupError as e:
            return (
                f"env file {ref.path} not read: {e.args[0] if e.args else e}, whose rights "
                "it is read with; create it or fix user/group"
            )
        except OSError as e:
            if e.strerror is None:  # refused, the message says why and the fix
                return f"env file not read{as_user}: {e}"
            return f"cannot read env file {ref.path}{as_user} ({e.strerror}); fix the path"
        try:
            return parse_env_file(data)
        except EnvFileProblem as e:
            return f"env file {ref.path}, {e}"
