"""Which children a test can name: a misspelt id fails at once with the known ones and
a did-you-mean, instead of waiting out a timeout (or, in `expect_no_event`, passing
for a reason the test did not mean)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence

from supervision import Event, Strategy, SupervisorSpec

from .._operate._find import walk
from .._shell._api import TreeNode


def known_ids(spec: SupervisorSpec, nodes: Iterable[TreeNode], events: Sequence[Event]) -> set[str]:
    """The ids and paths the tree has now, had at its start, or had in its events."""
    known: set[str] = set()

    def from_spec(sup: SupervisorSpec, path: str) -> None:
        for child in sup.children:
            known.update((child.id, f"{path}/{child.id}"))
            if isinstance(child, SupervisorSpec):
                from_spec(child, f"{path}/{child.id}")

    from_spec(spec, spec.id)
    for node in walk(nodes):
        known.update((node.info.id, node.path))
    known.update(e.offender for e in events if e.offender)
    return known


def could_be_added(spec: SupervisorSpec, child_id: str) -> bool:
    """Whether a simple_one_for_one supervisor could still add a child of that id
    (`<template id>-<n>`)."""
    if spec.strategy is Strategy.SIMPLE_ONE_FOR_ONE and spec.children:
        template = spec.children[0]
        if re.fullmatch(re.escape(template.id) + r"-\d+", child_id.rsplit("/", 1)[-1]):
            return True
    return any(
        could_be_added(child, child_id)
        for child in spec.children
        if isinstance(child, SupervisorSpec)
    )


def no_such_child(tree: str, child_id: str, known: Iterable[str], *, running: bool = False) -> str:
    """The error for an id that names no child: the close ones first, then them all."""
    ids = sorted(k for k in known if "/" not in k)
    close = difflib.get_close_matches(child_id, sorted(known), n=3, cutoff=0.6)
    what = "running child" if running and child_id in known else "child"
    message = f"no {what} {child_id!r} in tree {tree!r}"
    message += f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "."
    shown = ", ".join(ids[:30]) + (f", ... ({len(ids)} in all)" if len(ids) > 30 else "")
    return message + (f" Its children: {shown}." if ids else " It has no children.")


__all__ = ["could_be_added", "known_ids", "no_such_child"]
