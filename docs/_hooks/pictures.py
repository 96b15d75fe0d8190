"""MkDocs hook: the pictures the site shows, generated from real runs when the site builds.

Nothing here is committed as a picture. Before each build, every picture whose
outputs are older than its inputs (its generator, and the code it draws) is made
again by running its generator in a process group of its own, which is killed
whole afterwards, so no process outlives a build. The outputs are kept in
build/docs-pictures/ (ignored by git): a build, or a `mkdocs serve` rebuild,
whose inputs did not change generates nothing. Each output is then served at
pictures/<name>, so a page in a folder of docs/ shows one as
`![what it shows](../pictures/<name>)`:

- pictures/exit-path.svg: one exit's path through a live tree, with the
  measured time of each hop (docs/_hooks/exit_path.py);
- pictures/status-tree.svg: a small tree as `nannytree status` paints it
  (docs/_hooks/status_tree.py);
- pictures/experiment.png and pictures/sweep.png: the simulator's timelines
  and the sweep's heatmap, as `examples/experiment.py` saves them.

The pages include them through docs/_snippets/ (a caption that says what was
run), which are fragments, not pages: this hook keeps them out of the site.

NANNYTREE_DOCS_DRAFT=1 (the test suite's build) takes a picture from the cache when
it is fresh, and otherwise draws a draft: the same generator on less data (the
experiment: an hour of virtual time and two seeds, not a day and twenty), into
build/docs-pictures-draft/, so that a draft never stands in the site's cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.pictures")

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "docs-pictures"
DRAFTS = ROOT / "build" / "docs-pictures-draft"
HOOKS = "docs/_hooks"
CODE = ("supervision/**/*.py", "actors/**/*.py")  # what every picture draws
TIMEOUT = 600.0


@dataclass(frozen=True)
class Picture:
    folder: str  # under CACHE, one per generator
    outputs: tuple[str, ...]
    command: tuple[str, ...]  # {out}: the folder (or the file, for one output)
    inputs: tuple[str, ...]  # globs from the repository root
    draft: tuple[str, ...] = ()  # arguments that make a draft of it (less data)

    def paths(self, cache: Path = CACHE) -> list[Path]:
        return [cache / self.folder / name for name in self.outputs]

    def stale(self, cache: Path = CACHE) -> bool:
        outputs = self.paths(cache)
        if not all(p.is_file() for p in outputs):
            return True
        newest = max(
            (p.stat().st_mtime for pattern in self.inputs for p in ROOT.glob(pattern)),
            default=0.0,
        )
        return min(p.stat().st_mtime for p in outputs) < newest


PICTURES = (
    Picture(
        "exit-path",
        ("exit-path.svg",),
        (f"{HOOKS}/exit_path.py", "{out}/exit-path.svg"),
        (f"{HOOKS}/exit_path.py", *CODE),
    ),
    Picture(
        "status-tree",
        ("status-tree.svg",),
        (f"{HOOKS}/status_tree.py", "{out}/status-tree.svg"),
        (f"{HOOKS}/status_tree.py", *CODE),
    ),
    Picture(
        "experiment",
        ("experiment.png", "sweep.png"),
        ("examples/experiment.py", "--out", "{out}"),
        ("examples/experiment.py", *CODE),
        ("--hours", "1", "--seeds", "2", "--sweep-seeds", "2"),
    ),
)


def _run(command: Sequence[str], folder: Path) -> None:
    """Run one generator in its own process group; kill the group whatever happens."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    args = [sys.executable, *(part.replace("{out}", str(folder)) for part in command)]
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        out = b""
        proc.returncode = -1
    finally:
        with contextlib.suppress(ProcessLookupError):  # an empty group: nothing was left
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc.returncode != 0:
        text = out.decode("utf-8", "replace")[-4000:]
        raise RuntimeError(f"picture generator {' '.join(command)} failed:\n{text}")


def generate(draft: bool = False) -> list[Path]:
    """Make every stale picture (a draft of it, if `draft` and the cache's is stale);
    return all the pictures' paths."""
    found = []
    for picture in PICTURES:
        cache = DRAFTS if draft and picture.stale() else CACHE
        found += picture.paths(cache)
        if not picture.stale(cache):
            continue
        command = (*picture.command, *picture.draft) if cache is DRAFTS else picture.command
        folder = cache / picture.folder
        fresh = folder.with_name(folder.name + ".new")
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir(parents=True)
        began = time.monotonic()
        _run(command, fresh)
        missing = [name for name in picture.outputs if not (fresh / name).is_file()]
        if missing:
            raise RuntimeError(f"picture generator {command[0]} made no {missing}")
        folder.mkdir(parents=True, exist_ok=True)
        for name in picture.outputs:  # only whole, fresh outputs replace the old ones
            (fresh / name).replace(folder / name)
        shutil.rmtree(fresh)
        took = time.monotonic() - began
        kind = "a draft of " if cache is DRAFTS else ""
        log.info("pictures: made %s%s in %.1f s", kind, ", ".join(picture.outputs), took)
    return found


def on_files(files: Files, config: Any) -> Files:
    for file in list(files):
        if file.src_uri.startswith("_snippets/"):
            files.remove(file)  # fragments the pages include, not pages
    for path in generate(draft=os.environ.get("NANNYTREE_DOCS_DRAFT") == "1"):
        files.append(File.generated(config, f"pictures/{path.name}", abs_src_path=str(path)))
    return files
