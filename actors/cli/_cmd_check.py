"""`nannytree check`: validate a tree file here, without running it. The checks
are the run host's pre-run checks (actors/host/_check.py), which read the
launcher's and the shell's own rules; they load no actor, no rich, no psutil."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._operate._text import printable
from ._client import error
from ._exit import FAILED, OK


def cmd_check(args: argparse.Namespace) -> int:
    from actors import load_tree_file, read_tree_file
    from actors.host._check import (
        containment_warnings,
        daemon_warnings,
        far_side_warnings,
        loose_problems,
        names_nodes,
        problems,
        root_run_notes,
    )
    from actors.host._engine import engine_text
    from supervision import ConfigError, TooLarge, load_engine

    from ._plain import Painter, spec_lines, write

    path = Path(args.file)
    try:
        # Targets stay unresolved: checking a file never runs its modules' code. Its
        # env files are read, each with its child's rights, as `run` reads them.
        spec = load_tree_file(path, vars=os.environ, resolve_targets=False)
    except TooLarge as e:  # read no further: its other problems would cost as much
        error(e)
        return FAILED
    except ConfigError as e:
        # Every problem of the file in one pass: each child's, and what would fail at
        # run time (a program not on PATH) of the children as written.
        for each in e.errors:
            error(each)
        found = loose_problems(path)
        for problem in found:
            error(f"{path}: {problem}")
        for warning in daemon_warnings(path):
            error(f"{path}: {warning}")
        if len(e.errors) + len(found) > 1:
            count = _plural(len(e.errors) + len(found), "problem")
            error(f"{path}: {count}; the tree would not run as written")
        return FAILED
    found = problems(path, spec)
    output = getattr(args, "child_output", None) or ""
    if output == "journal" or output.startswith("journal:"):
        from actors.host._output import journal_problem

        absent = journal_problem()
        if absent is not None:
            found.append(f"--child-output {output}: {absent}")
    elif output not in ("", "auto", "inherit"):
        folder = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(folder):
            found.append(
                f"--child-output {output}: folder {folder!r} does not exist; "
                "create it or fix the path"
            )
    for problem in found:
        error(f"{path}: {problem}")
    for warning in [*daemon_warnings(path), *root_run_notes(spec), *containment_warnings(spec)]:
        error(f"{path}: {warning}")
    if found:
        error(f"{path}: {_plural(len(found), 'problem')}; the tree would not run as written")
        return FAILED
    for warning in far_side_warnings(spec, path.resolve().parent, _engine_check):
        error(f"{path}: {warning}")
    engine = load_engine(read_tree_file(path), str(path), vars=dict(os.environ))
    if engine is not None and names_nodes(spec):
        for warning in _node_warnings(spec, engine):
            error(f"{path}: {warning}")
    nodes = list(_walk_spec(spec))
    workers = sum(1 for n in nodes if n == "worker")
    supervisors = len(nodes) - workers
    print(
        printable(
            f"{args.file}: ok: tree {spec.id!r}, {_plural(workers, 'worker')} "
            f"under {_plural(supervisors, 'supervisor')}"
        )
    )
    write(sys.stdout, spec_lines(Painter(sys.stdout), spec))
    if engine is not None:
        print(printable(f"engine: {engine_text(engine)}"))
    return OK


def _engine_check() -> Callable[[Any], Any] | None:
    """The engine's test of what a node may not import (loads the engine: only asked
    for a tree whose placed subtrees name Python targets)."""
    from actors.host import _engine

    return _engine.engine_check()


def _node_warnings(spec: Any, engine: Any) -> list[str]:
    """The placed subtrees' node names that no node of the engine's cluster has (asks
    the cluster: only for a tree whose placements name nodes)."""
    from actors.host import _engine
    from actors.host._check import node_warnings

    nodes = _engine.engine_nodes(engine)
    if isinstance(nodes, str):
        return [f"note: node names not checked: {nodes}"]
    return node_warnings(spec, nodes)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _walk_spec(spec: Any) -> Any:
    yield spec.type
    for child in getattr(spec, "children", ()):
        yield from _walk_spec(child)
