"""Tree files on disk: read, resolve `module:function` targets, substitute `${NAME}`
variables (from the environment, under `vars`), load into a spec."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from supervision import MISSING, ConfigError, SupervisorSpec, load_tree
from supervision.config._errors import (
    check_size,
)
from supervision.config._keys import (
    MAX_FILE_BYTES,
)


def import_target(ref: str) -> Callable[..., Any]:
    """Import "package.module:function" (the function may be "Class.method")."""
    module_name, _, attr_path = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        obj = getattr(obj, attr)
    return obj  # type: ignore[no-any-return]


def tree_vars(vars: Mapping[str, object] | None = None) -> dict[str, object]:
    """The values of a tree file's `${NAME}`: the environment, under `vars`."""
    return {**os.environ, **(vars or {})}


def read_tree_file(path: str | Path) -> bytes:
    """A tree file's bytes, never more than its limit (supervision/config/_keys.py): one
    past it is refused (TooLarge) before more is read. OSError if it cannot be read."""
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    check_size(len(data), str(path))
    return data


def load_tree_file(path: str | Path, *, vars: Mapping[str, object] | None = None) -> SupervisorSpec:
    """Read and load a TOML tree file; targets import from its directory too.

    `${NAME}` and `${NAME:-default}` in its string values take their values from
    `vars`, then the environment (`$${` is a literal `${`; supervision/config/_vars.py).
    Raises ConfigError (also for a file that cannot be read, or a variable unset).
    """
    path = Path(path)
    try:
        data = read_tree_file(path)
    except OSError as e:
        raise ConfigError(str(path), "", MISSING, f"cannot read it ({e.strerror or e})") from None
    # As `python script.py` does: modules beside the file are importable, in the
    # host and (through sys.path, which children inherit) in every child.
    here = str(path.resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    return load_tree(data, str(path), resolve_target=import_target, vars=tree_vars(vars))


def load_tree_text(
    text: str, filename: str, *, vars: Mapping[str, object] | None = None
) -> SupervisorSpec:
    """Load a tree from text (the embedded demo), resolving targets by import, with
    variables as load_tree_file substitutes them."""
    return load_tree(text, filename, resolve_target=import_target, vars=tree_vars(vars))
