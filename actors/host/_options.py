"""How `nannytree run` runs a tree: RunOptions (from the flags, actors/cli/_run_flags.py),
and what they resolve to once the run's socket is known: where the children
write, the tree with their log files set, where its events are kept, its engine,
and how `reload` reads the edited file again."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervision import SupervisorSpec

from .._launcher._journal import PREFIX, JournalAbsent, journal_problem
from . import _engine
from ._check import far_side_warnings
from ._engine import make_ray_engine, merged, ray_engine
from ._logdir import (
    DEFAULT_BACKUPS,
    DEFAULT_MAX_BYTES,
    default_log_dir,
    tree_log_folder,
    with_log_defaults,
)
from ._output import log_name, with_journal, with_log_files, with_output

if TYPE_CHECKING:
    from supervision import EngineConfig  # type: ignore[attr-defined, unused-ignore]


@dataclass
class RunOptions:
    """How to run: `live` None means "a live view if the output is a terminal"."""

    socket: Path | None = None
    live: bool | None = None
    duration: float | None = None
    child_output: str = "auto"  # "auto", "inherit", "journal[:PREFIX]" or a file path
    source: Path | None = None  # the tree file, for `nannytree reload`
    refresh: float = 0.25
    engine: str | None = None  # --engine: "auto", "local", "ray://HOST:PORT" or "HOST:PORT"
    # The engine's settings from the flags (over the file's), by RayEngine's parameter names.
    engine_options: dict[str, Any] = field(default_factory=dict)
    engine_file: EngineConfig | None = None  # the tree file's [engine] table
    # Builds the engine from the settings (default: a RayEngine; tests pass a fake).
    make_engine: Callable[[EngineConfig, Path], Any] | None = None
    # The children's log files (docs/logs.md): their folder (None: default_log_dir()),
    # and how a file that sets nothing of its own is kept.
    log_dir: Path | None = None
    log_max_bytes: int = DEFAULT_MAX_BYTES
    log_backups: int = DEFAULT_BACKUPS
    log_timestamps: bool = False
    metrics: tuple[str, int] | None = None  # --metrics: serve Prometheus metrics here
    event_log: Path | None = None  # --event-log: the tree's events as dated JSON Lines
    event_log_max_bytes: int | None = None  # per file (None: _journal.MAX_BYTES)
    event_log_backups: int | None = None  # rotated files kept (None: _journal.BACKUPS)


def reload_source(opts: RunOptions, socket: Path) -> Callable[[], SupervisorSpec] | None:
    """How `reload` reads the edited file: as `run` did, output choices included."""
    source = opts.source
    if source is None:
        return None

    def load() -> SupervisorSpec:
        from actors import load_tree_file

        return child_output(opts, load_tree_file(source), socket)[1]

    return load


def make_engine(
    opts: RunOptions, spec: SupervisorSpec, socket: Path, notice: Callable[[str], None]
) -> Any:
    """The engine for the placed subtrees, as the file's [engine] table and the flags
    say (None: neither names one); warns of placed targets their node may not load."""
    config = merged(opts.engine_file, opts.engine, opts.engine_options)
    if config is None:
        return None
    stem = socket.name.removesuffix(".sock")
    log_file = socket.with_name(f"{stem}.ray.log")
    if opts.make_engine is not None:
        engine = opts.make_engine(config, log_file)
    else:
        engine = make_ray_engine(ray_engine(), config, log_file)
        notice(f"Ray's own log lines: {log_file}")
    here = opts.source.resolve().parent if opts.source is not None else Path.cwd()
    for warning in far_side_warnings(spec, here, _engine.engine_check):
        notice(warning)
    return engine


def child_output(
    opts: RunOptions, spec: SupervisorSpec, socket: Path
) -> tuple[str | None, SupervisorSpec]:
    """Where children without their own output write, and the tree that says so
    (every child's file kept as the run's --log-* flags say, unless it says)."""
    output, spec = _child_files(opts, spec, socket)
    return output, with_log_defaults(
        spec, opts.log_max_bytes, opts.log_backups, opts.log_timestamps
    )


def _child_files(
    opts: RunOptions, spec: SupervisorSpec, socket: Path
) -> tuple[str | None, SupervisorSpec]:
    choice = opts.child_output
    if choice == "inherit":  # raw, to this terminal: the user asked for it
        return None, spec
    if choice == "journal" or choice.startswith(PREFIX):
        # Asked before any child starts: never a silent fallback to somewhere else.
        problem = journal_problem()
        if problem is not None:
            raise JournalAbsent(problem)
        prefix = choice.removeprefix("journal").removeprefix(":")
        return f"the journal (journalctl -t {prefix}<child>)", with_journal(spec, prefix)
    if choice == "auto":
        # Never our terminal: children would tear the live view apart, and
        # their escape sequences would reach the operator's terminal raw.
        base = Path(os.path.abspath(opts.log_dir or default_log_dir()))
        stem = log_name(socket.name.removesuffix(".sock"))
        folder = tree_log_folder(base, stem)  # ours, never a symlink planted for us
        root = folder / log_name(spec.id)
        return f"{root}/<child>.log", with_log_files(spec, root)
    path = os.path.abspath(choice)
    return path, with_output(spec, path)


def event_log_path(opts: RunOptions, socket: Path) -> Path:
    """Where the tree's events are kept on disk: --event-log, else beside its
    children's logs, in the tree's private folder (docs/monitoring.md)."""
    if opts.event_log is not None:
        return opts.event_log
    base = Path(os.path.abspath(opts.log_dir or default_log_dir()))
    stem = log_name(socket.name.removesuffix(".sock"))
    return tree_log_folder(base, stem) / "events.jsonl"
