"""How a remote subtree's spec reaches its far node, Python targets included.

The spec travels pickled by cloudpickle, as a local child's target does. A module
that is not installed (a script's sibling, the tree file's directory, a tests
folder: importable on the driver only because its folder is on `sys.path`) is
pickled by value, the way cloudpickle pickles `__main__`; an installed one, by
reference: the far node has the same packages (docs/how-to/ray.md).
`unshippable_targets` names what may still fail there, for `check` and `run`.
Nothing here imports Ray.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.metadata
import importlib.util
import pickle
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

import cloudpickle

from supervision import ChildSpec, SupervisorSpec

# nannytree and what it runs on: the far node has them, and their classes must stay
# themselves there (a by-value copy of supervision.ExitReason is another class).
ALWAYS_INSTALLED = frozenset({"actors", "supervision", "cloudpickle", "pykka", "psutil", "ray"})

_lock = threading.Lock()  # cloudpickle's by-value registry is global


@functools.cache
def _distributions() -> frozenset[str]:
    return frozenset(importlib.metadata.packages_distributions())


def installed(module: str) -> bool:
    """Whether `module` comes with Python or an installed distribution (editable
    installs included), so the far node imports it by name."""
    top = module.partition(".")[0]
    return (
        top in ALWAYS_INSTALLED
        or top in sys.stdlib_module_names
        or top in sys.builtin_module_names
        or top in _distributions()
    )


def _local_modules() -> list[types.ModuleType]:
    """The loaded top-level modules that are not installed: they travel by value."""
    found = []
    for name, module in list(sys.modules.items()):
        if "." in name or name.startswith("__") or not isinstance(module, types.ModuleType):
            continue
        if getattr(module, "__file__", None) is None and not hasattr(module, "__path__"):
            continue  # built-in, frozen or made at run time
        if not installed(name):
            found.append(module)
    return found


@contextlib.contextmanager
def _by_value() -> Iterator[None]:
    """Within: every loaded module that is not installed pickles by value."""
    registry: set[str] = getattr(cloudpickle.cloudpickle, "_PICKLE_BY_VALUE_MODULES", set())
    with _lock:
        added = []
        try:
            for module in _local_modules():
                if module.__name__ not in registry:
                    cloudpickle.register_pickle_by_value(module)
                    added.append(module)
            yield
        finally:
            for module in added:
                cloudpickle.unregister_pickle_by_value(module)


def dumps(obj: Any) -> bytes:
    """`obj` pickled for another node: modules that are not installed by value.

    Falls back to pickling them by reference when by value fails (a module global
    that cannot be pickled): then the far node must import them itself, which
    `unshippable_targets` warns about.
    """
    try:
        with _by_value():
            return bytes(cloudpickle.dumps(obj))
    except Exception:
        return bytes(cloudpickle.dumps(obj))


def loads(data: bytes) -> Any:
    """On the far node. Plain pickle: cloudpickle is imported only for what went by value."""
    return pickle.loads(data)


# -- what may not load on the far node ---------------------------------------------------


def unshippable_targets(spec: SupervisorSpec) -> list[str]:
    """One line per Python target of a placed subtree that its far node may fail to
    load, saying why and what to do; [] when every target will load there.

    A target of an installed module is imported by name (install the same packages
    on every node). One of a module that is not installed travels by value; it may
    still fail when it cannot be pickled, or when its module imports another module
    that is not installed inside a function (at run time, on the far node). Targets
    named "module:function" and not imported (`nannytree check`) are judged from
    the module's source, never run.
    """
    found: list[str] = []
    for path, child in _placed_targets(spec, spec.id, placed=False):
        problem = _target_problem(child)
        if problem:
            found.append(f"{path}: target {_target_name(child.target)}: {problem}")
    return found


def _placed_targets(
    spec: SupervisorSpec, path: str, *, placed: bool
) -> Iterator[tuple[str, ChildSpec]]:
    placed = placed or spec.placement is not None
    for child in spec.children:
        where = f"{path}/{child.id}"
        if isinstance(child, SupervisorSpec):
            yield from _placed_targets(child, where, placed=placed)
        elif placed and child.target is not None:
            yield where, child


def _target_name(target: Any) -> str:
    ref = getattr(target, "ref", None)
    if isinstance(ref, str):
        return repr(ref)
    function = _function_of(target)
    module = getattr(function, "__module__", None) or "?"
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return repr(f"{module}:{name}")


def _function_of(target: Any) -> Any:
    while isinstance(target, functools.partial):
        target = target.func
    return getattr(target, "__func__", target)


def _module_name(target: Any) -> str | None:
    ref = getattr(target, "ref", None)
    if isinstance(ref, str):  # supervision.UnresolvedTarget: "module:function", not imported
        return ref.partition(":")[0]
    function = _function_of(target)
    if isinstance(function, types.FunctionType | type):
        return function.__module__
    return type(function).__module__  # an instance with __call__


def _target_problem(child: ChildSpec) -> str | None:
    module = _module_name(child.target)
    if module is None or installed(module):
        return None
    if not hasattr(child.target, "ref"):  # imported: try what the engine will do
        try:
            with _by_value():
                cloudpickle.dumps((child.target, child.args, child.kwargs))
        except Exception as e:
            return (
                f"it cannot travel by value ({type(e).__name__}: {e}); install its module "
                "on every node, or create what cannot be pickled inside the target"
            )
    if module == "__main__":
        return None
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    late = _late_imports(found.origin if found is not None else None)
    if late:
        return (
            f"it travels by value, but its module imports {', '.join(late)} inside a "
            "function, which the far node cannot import; import it at the top of the "
            "module, or install it on every node"
        )
    return None


def _late_imports(origin: str | None) -> list[str]:
    """Modules that are not installed, imported inside a function of the source at
    `origin` (a by-value copy has no folder to import them from)."""
    if not origin or not origin.endswith(".py"):
        return []
    try:
        with open(origin, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return []
    late: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import):
                late |= {a.name for a in inner.names if not installed(a.name)}
            elif isinstance(inner, ast.ImportFrom):
                if inner.level:
                    late.add("." * inner.level + (inner.module or ""))
                elif inner.module and not installed(inner.module):
                    late.add(inner.module)
    return sorted(late)
