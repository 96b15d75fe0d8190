"""`nannytree check`: what a tree file would get wrong at run time, all at once,
without running the target modules' import-time code."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SHELL_CHARS = set("|&;<>()$`*?[]{}~")


def problems(path: Path, spec: Any) -> list[str]:
    """Every problem found in the file and its loaded (unresolved) spec, one line each."""
    found: list[str] = []
    here = path.resolve().parent
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    for where, table in _tables(raw.get("supervisor", {}), "supervisor"):
        cid = table.get("id", where)
        command = table.get("command")
        if command is not None and ("args" in table or "kwargs" in table):
            found.append(
                f"child {cid!r}: args/kwargs are for a Python target; a command takes its "
                'arguments in its list: command = ["prog", "arg", ...]'
            )
        if isinstance(command, str) and SHELL_CHARS & set(_unquoted(command)):
            found.append(
                f"child {cid!r}: command {command!r} runs without a shell, so its shell "
                "characters are passed as plain arguments; write "
                f'command = ["sh", "-c", {command!r}] if you mean a shell'
            )
    for child in _workers(spec):
        found += _child_problems(child, here)
    return found


def _unquoted(command: str) -> str:
    """The parts of a command string outside quotes (where a shell would act)."""
    return re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "", command)


def _tables(table: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, child in enumerate(table.get("children", []) or []):
        if isinstance(child, dict):
            yield f"{where}.children[{i}]", child
            yield from _tables(child, f"{where}.children[{i}]")


def _workers(spec: Any) -> Iterator[Any]:
    for child in getattr(spec, "children", ()):
        if hasattr(child, "children"):
            yield from _workers(child)
        else:
            yield child


def _child_problems(child: Any, here: Path) -> list[str]:
    found = []
    cwd = child.cwd
    if cwd is not None and not os.path.isdir(cwd):
        found.append(f"child {child.id!r}: cwd {cwd!r} does not exist; create it or fix cwd")
    if child.command is not None:
        program = child.command[0]
        path_env = (child.env or {}).get("PATH", os.environ.get("PATH", os.defpath))
        if "/" in program:
            full = os.path.join(cwd or os.getcwd(), program)
            ok = os.path.isfile(full) and os.access(full, os.X_OK)
        else:
            ok = shutil.which(program, path=path_env) is not None
        if not ok:
            found.append(
                f"child {child.id!r}: program {program!r} is not an executable file "
                + ("" if "/" in program else "on PATH ")
                + "; install it or give its full path"
            )
    ref = getattr(child.target, "ref", None)
    if isinstance(ref, str):
        problem = _target_problem(ref, here)
        if problem:
            found.append(f"child {child.id!r}: target {ref!r}: {problem}")
    return found


def _target_problem(ref: str, here: Path) -> str | None:
    """Whether "module:name" names something, found by reading the source, not running it."""
    module, _, attr = ref.partition(":")
    if str(here) not in sys.path:
        sys.path.insert(0, str(here))
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return f"no module {module!r} (searched beside the file and on sys.path)"
    origin = found.origin
    if not origin or not origin.endswith(".py"):
        return None  # a compiled or namespace module: cannot read it, trust it
    try:
        tree = ast.parse(Path(origin).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError) as e:
        return f"cannot read {origin}: {e}"
    first = attr.split(".")[0]
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if first not in names:
        return f"{module} defines no {first!r}"
    return None
