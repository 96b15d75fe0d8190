"""Before and after in one session: a round's script runs in each checkout in turn
(the machine's noise falls on both alike), and each figure prints as median / p95."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parents[2]  # this checkout: "after"


@contextlib.contextmanager
def checked_out(where: str | Path) -> Iterator[Path]:
    """A checkout: `where` itself if it is a folder, else that commit of this
    repository in a temporary worktree (detached, removed after)."""
    if Path(where).is_dir():
        yield Path(where)
        return
    folder = Path(tempfile.mkdtemp(prefix="nt-ref-")) / "checkout"
    git = ["git", "-C", str(HERE)]
    subprocess.run([*git, "worktree", "add", "--detach", str(folder), str(where)], check=True)
    try:
        yield folder
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(folder)], check=False)
        subprocess.run([*git, "worktree", "prune"], check=False)
        with contextlib.suppress(OSError):
            folder.parent.rmdir()


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def row(samples: Sequence[float | None]) -> str:
    """Seconds as "median / p95 ms (n=...)"; a None (not measured) is left out."""
    xs = [s * 1000 for s in samples if s is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):6.2f} / {p95(xs):6.2f} ms (n={len(xs)})"


def run_round(script: str, checkout: Path, n: int) -> dict[str, list[float]]:
    """`script` (its last line of output: a JSON object of lists) run with `checkout`
    first on the path, and this checkout's tests after it."""
    env = dict(os.environ, PYTHONPATH=f"{checkout}{os.pathsep}{HERE}")
    out = subprocess.run(
        [sys.executable, "-c", script, str(n)],
        cwd=checkout,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def alternate(script: str, old: Path, rounds: int, n: int) -> dict[str, dict[str, list[float]]]:
    """{"before"|"after": {figure: samples}}, the two checkouts in turns."""
    results: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for _ in range(rounds):
        for label, checkout in (("before", old.resolve()), ("after", HERE)):
            for name, samples in run_round(script, checkout, n).items():
                results[label].setdefault(name, []).extend(samples)
    return results


def print_table(results: dict[str, dict[str, list[float]]], names: Sequence[str]) -> None:
    width = max(len(name) for name in names) + 4
    print(f"{'figure':<{width}} {'before (median / p95)':>30} {'after (median / p95)':>30}")
    for name in names:
        before, after = results["before"][name], results["after"][name]
        print(f"{name:<{width}} {row(before):>30} {row(after):>30}")
