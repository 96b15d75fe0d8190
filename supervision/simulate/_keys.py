"""How `faults` keys name workers: a path below the root, by template or by id.

A key is a worker's path ("web", "pool/w1"). Below a simple_one_for_one
supervisor a segment is its template's id ("pool/w": every child started from
it) or a child's id as the live tree gives it ("pool/w-2": the second
start_child of that incarnation of "pool"). `check_faults` refuses a key that
names no worker, and lists the workers; the engine (`_run`) picks each
worker's model by the most specific key (`_Node.keys`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .._errors import SpecError
from ..spec._fields import (
    Strategy,
)
from ..spec._spec import (
    AnySpec,
    ChildSpec,
    SupervisorSpec,
)
from ._faults import Combination, combine
from ._ops import Call


def spec_at(spec: SupervisorSpec, key: str) -> AnySpec | None:
    """The spec a `faults` key names: a path below the root whose segments below a
    simple_one_for_one supervisor are its template's id ("pool/w": every child started
    from it) or a child's id ("pool/w-2": the second start_child; ids count from 1)."""
    found: AnySpec = spec
    for name in key.split("/"):
        if not isinstance(found, SupervisorSpec):
            return None
        if found.strategy is Strategy.SIMPLE_ONE_FOR_ONE:
            template = found.children[0]
            dynamic = re.fullmatch(re.escape(template.id) + r"-[1-9][0-9]*", name)
            if name != template.id and dynamic is None:
                return None
            found = template
        else:
            child = next((c for c in found.children if c.id == name), None)
            if child is None:
                return None
            found = child
    return found


def spec_keys(spec: SupervisorSpec, prefix: str = "") -> dict[str, AnySpec]:
    """Every child's key in the spec and its spec, templates by their own id."""
    keys: dict[str, AnySpec] = {}
    for child in spec.children:
        keys[prefix + child.id] = child
        if isinstance(child, SupervisorSpec):
            keys.update(spec_keys(child, prefix + child.id + "/"))
    return keys


def added_workers(calls: Iterable[Call]) -> set[str]:
    """Paths of the workers that scripted start_child calls add (they may have faults)."""
    found = set()
    for c in calls:
        if c.method == "start_child" and c.args and isinstance(c.args[0], ChildSpec):
            found.add(f"{c.supervisor}/{c.args[0].id}" if c.supervisor else c.args[0].id)
    return found


def check_faults(
    faults: Mapping[str, object], spec: SupervisorSpec, added: set[str]
) -> dict[str, Combination]:
    """Each key's models, combined (`combine`); refuse an entry that is no fault model
    nor a list of them, models that conflict, or a key that names no worker of `spec`
    (nor one of `added`, the workers scripted start_child calls add)."""
    static = spec_keys(spec)
    combined: dict[str, Combination] = {}
    for path, model in faults.items():
        combined[path] = combine(path, model)
        found = static.get(path) if isinstance(path, str) else None
        if found is None and isinstance(path, str):
            found = spec_at(spec, path)  # a child's id below a simple_one_for_one
        if isinstance(found, SupervisorSpec):
            raise SpecError(
                path,
                "faults",
                model,
                "a nested supervisor fails through its children; give its workers fault models",
            )
        if found is None and path not in added:
            workers = sorted(k for k, c in static.items() if isinstance(c, ChildSpec))
            raise SpecError(
                path,
                "faults",
                model,
                f"no worker at this path; the workers are {workers} (a simple_one_for_one "
                "template's children also by id: the template's path with -1, -2, ...)",
            )
    return combined
