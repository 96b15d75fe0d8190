"""Variables in tree files: `${NAME}`, `${NAME:-default}`, and `$${` for a literal `${`. Pure.

Substituted in the string values of a parsed document (never in keys), before it
is read as a tree:

    [[supervisor.children]]
    id = "web"
    command = ["python3", "-m", "http.server", "${PORT}"]
    ready = { tcp = "${PORT}" }          # a whole "${NAME}" that is an integer: an int
    env = { LOG = "${LOG_LEVEL:-info}" }

A string that is exactly one `${NAME}` (or `${NAME:-default}`) whose value is an
integer literal becomes an int, so a number can come from a variable, except
under the keys whose values are text (`command`, `env`, `args`, `id`, paths, ...:
`TEXT_KEYS`), where it stays a string. Nothing else is expanded: a `$` not
followed by `{` is kept as written, and a value is never scanned again. A name
that has neither a value nor a default is an error naming where it is used.

A command written as one string (`command = "prog --name ${NAME}"`, and
`start_check`, probes' `exec`, reload's `check`: `ARGV_KEYS`) is split into
words as a shell would before its variables are substituted, so a variable never
adds words nor quotes: its value stays within its word, spaces and all, as
systemd's `${NAME}` does (`check` reads it the same way).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Keys whose values (and everything below them) are text to the loader: a variable
# there stays a string even when it looks like a number (an id "1", a port in argv).
TEXT_KEYS = frozenset(
    {
        *("id", "type", "command", "target", "args", "kwargs", "env", "cwd"),
        *("stdout", "stderr", "pid_file", "file", "log", "stream", "http", "host"),
        *("exec", "check", "strategy", "auto_shutdown", "restart", "kill_mode"),
        *("node", "labels", "policy", "fallback"),
        "env_file",
    }
)

# Keys whose string value is a command line, split into argv before substitution.
ARGV_KEYS = frozenset({"command", "start_check", "exec", "check"})

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# `$${` (a literal), a variable, or a `${` that is neither (an error).
_TOKEN = re.compile(rf"\$\$\{{|\$\{{(?P<name>{_NAME})(?::-(?P<default>[^}}]*))?\}}|\$\{{")
_WHOLE = re.compile(rf"\$\{{(?P<name>{_NAME})(?::-(?P<default>[^}}]*))?\}}")
_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_DIGITS = re.compile(r"(\d+)")  # children[10] after children[2]: problems in file order


@dataclass(frozen=True)
class VarProblem:
    """One string that cannot be substituted: where, its text, and the fix."""

    path: str
    value: str
    expected: str


class VarError(ValueError):
    """Every VarProblem of a document (the loader turns them into ConfigErrors)."""

    def __init__(self, problems: list[VarProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.path}: {p.expected}" for p in problems))


def substitute(doc: dict[str, Any], values: Mapping[str, object]) -> dict[str, Any]:
    """Replace the variables in the string values of `doc` (in place; returns it).

    `values` maps names to their text (an int is an int when it is the whole
    string). Raises VarError listing every string that names a variable with no
    value and no default, or holds a `${` that is not a variable.
    """
    problems: list[VarProblem] = []
    # Iterative, not recursive: a document nested as deep as TOML allows is walked.
    stack: list[tuple[dict[Any, Any] | list[Any], str, bool]] = [(doc, "", False)]
    while stack:
        container, path, text = stack.pop()
        if isinstance(container, dict):
            places = [(k, f"{path}.{k}" if path else k, text or k in TEXT_KEYS) for k in container]
        else:
            places = [(i, f"{path}[{i}]", text) for i in range(len(container))]
        for key, where, as_text in places:
            value = container[key]
            if isinstance(value, str):
                if "$" in value and key in ARGV_KEYS and isinstance(container, dict):
                    container[key] = _argv(value, values, where, problems)
                elif "$" in value:
                    container[key] = _one(value, values, where, as_text, problems)
            elif isinstance(value, dict | list):
                stack.append((value, where, as_text))
    if problems:
        problems.sort(key=lambda p: [int(s) if s.isdigit() else s for s in _DIGITS.split(p.path)])
        raise VarError(problems)
    return doc


def _argv(
    text: str, values: Mapping[str, object], where: str, problems: list[VarProblem]
) -> list[str] | str:
    """A command line's words (split as a shell would), each substituted as text; the
    line as it is if it cannot be split (the loader says why)."""
    try:
        words = shlex.split(text)
    except ValueError:
        return text
    return [str(_one(w, values, where, True, problems)) if "$" in w else w for w in words]


def _one(
    text: str, values: Mapping[str, object], where: str, as_text: bool, problems: list[VarProblem]
) -> str | int:
    whole = _WHOLE.fullmatch(text)
    if whole is not None:
        value = _lookup(whole["name"], whole["default"], values)
        if value is None:
            problems.append(_unset(where, text, whole["name"]))
            return text
        if not as_text:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, str) and _INTEGER.fullmatch(value):
                return int(value)
        return str(value)
    missing: list[str] = []
    bad = False

    def replace(m: re.Match[str]) -> str:
        nonlocal bad
        if m[0] == "$${":
            return "${"
        name = m["name"]
        if name is None:
            bad = True
            return m[0]
        value = _lookup(name, m["default"], values)
        if value is None:
            missing.append(name)
            return m[0]
        return str(value)

    result = _TOKEN.sub(replace, text)
    if bad:
        problems.append(
            VarProblem(
                where,
                text,
                "a ${ that is not ${NAME} or ${NAME:-default} (NAME: letters, digits, _); "
                "write $${ for a literal ${",
            )
        )
    for name in dict.fromkeys(missing):
        problems.append(_unset(where, text, name))
    return result


def _lookup(name: str, default: str | None, values: Mapping[str, object]) -> object | None:
    """A variable's value; its default when it is unset, or empty and has one (as sh)."""
    value = values.get(name)
    if value is None or (value == "" and default is not None):
        return default
    return value


def _unset(where: str, text: str, name: str) -> VarProblem:
    return VarProblem(
        where,
        text,
        f"the variable {name} is not set: set it (in the environment, or vars= of the "
        f"harness), give a default as ${{{name}:-value}}, or write $${{{name}}} for a "
        f"literal ${{{name}}}",
    )
