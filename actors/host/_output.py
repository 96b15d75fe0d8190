"""Where the children of `nannytree run` write: never the run's terminal (they would
tear its live view apart, and their escape sequences reach the operator raw), but
one log file each, one file for all, the journal under each child's own identifier,
or, for a placed subtree, memory on its node."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from supervision import CAPTURE, ChildSpec, SupervisorSpec

from .._launcher._journal import destination, sanitised
from .._launcher._journal import journal_problem as journal_problem  # for `check`


def with_output(spec: SupervisorSpec, path: str) -> SupervisorSpec:
    """The tree with every child that would write to our terminal writing to `path`."""
    return _written_to(spec, lambda child: path)


def with_journal(spec: SupervisorSpec, prefix: str = "") -> SupervisorSpec:
    """The tree with every child that would write to our terminal writing to the
    journal as `prefix + its id` (its SYSLOG_IDENTIFIER: `journalctl -t web`)."""
    return _written_to(spec, lambda child: destination(sanitised(prefix + child.id)))


def _written_to(spec: SupervisorSpec, where: Callable[[ChildSpec], str]) -> SupervisorSpec:
    """The tree with each worker's unset streams going `where` says; a placed subtree
    keeps its output in memory on its node."""
    children: list[ChildSpec | SupervisorSpec] = []
    for child in spec.children:
        if isinstance(child, SupervisorSpec) and child.placement is not None:
            children.append(captured(child))
        elif isinstance(child, SupervisorSpec):
            children.append(_written_to(child, where))
        else:
            to = where(child)
            children.append(replace(child, stdout=child.stdout or to, stderr=child.stderr or to))
    return replace(spec, children=children)


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]|^\.")


def log_name(child_id: str) -> str:
    """A child id as a file name: nothing that climbs out or hides (`../x` -> `_._x`)."""
    return _UNSAFE_NAME.sub("_", child_id) or "_"


def with_log_files(spec: SupervisorSpec, folder: Path) -> SupervisorSpec:
    """One log file per child, as supervisord keeps: `folder/<sup>/<child>.log`.

    Only children with no stdout/stderr of their own; stdout and stderr share the
    file, so a crash's traceback sits after what the child printed before it.
    """
    folder.mkdir(mode=0o700, exist_ok=True)
    children: list[ChildSpec | SupervisorSpec] = []
    for child in spec.children:
        if isinstance(child, SupervisorSpec) and child.placement is not None:
            children.append(captured(child))
        elif isinstance(child, SupervisorSpec):
            children.append(with_log_files(child, folder / log_name(child.id)))
        else:
            path = str(folder / f"{log_name(child.id)}.log")
            children.append(
                replace(child, stdout=child.stdout or path, stderr=child.stderr or path)
            )
    return replace(spec, children=children)


def captured(spec: SupervisorSpec) -> SupervisorSpec:
    """A placed subtree with its children's output kept in memory on their node, where
    no path of this host exists: `nannytree logs` reads it through the engine, and
    nothing reaches the engine's own log (Ray forwards a worker's output)."""
    children: list[ChildSpec | SupervisorSpec] = []
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            children.append(captured(child))
        else:
            out, err = child.stdout or CAPTURE, child.stderr or CAPTURE
            children.append(replace(child, stdout=out, stderr=err))
    return replace(spec, children=children)
