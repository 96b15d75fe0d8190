"""`nannytree run` and `demo`: read the tree, then hand over to the run host
(actors/host/), imported here and only here, when a tree is to be run."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ._client import error
from ._exit import FAILED
from ._run_flags import run_settings


def _run_options(args: argparse.Namespace) -> Any:
    """The run host's RunOptions from the flags (not named in this module's
    annotations: a type is an import too, and this one is the host's)."""
    from actors.host import RunOptions

    return RunOptions(**run_settings(args))


def cmd_run(args: argparse.Namespace) -> int:
    from actors import load_tree_file, read_tree_file
    from actors.host import run_tree
    from supervision import ConfigError, load_engine

    try:
        spec = load_tree_file(args.file)
        engine = load_engine(read_tree_file(args.file), str(args.file), vars=os.environ)
    except ConfigError as e:
        error(e)
        return FAILED
    except OSError as e:  # the file went between the two reads
        error(f"{args.file}: cannot read it ({e.strerror or e})")
        return FAILED
    opts = _run_options(args)
    opts.source = Path(args.file)
    opts.engine_file = engine
    return _exiting(run_tree(spec, opts))


def _exiting(status: int) -> int:
    """The tree stopped and the process ends next: its objects need no collection at
    the interpreter's exit (about 0.2 s of the host's heap, between the tree's stop
    and the process's exit)."""
    import gc

    gc.freeze()
    return status


def demo_text() -> str:
    from importlib import resources

    return resources.files("actors.cli").joinpath("demo.toml").read_text()


def cmd_demo(args: argparse.Namespace) -> int:
    from actors import load_tree_text
    from actors.host import run_tree

    spec = load_tree_text(demo_text(), "demo.toml")
    return _exiting(run_tree(spec, _run_options(args)))
