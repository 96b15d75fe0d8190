"""Every benchmark figure issue 36 names, before and after a change, alternating in
one run, in one table.

    python -m tests.benchmarks.before_after OLD [NEW] [--quick] [--only NAME ...]

OLD and NEW are checkouts (a folder) or commits (checked out for the run into a
temporary git worktree, removed after); NEW defaults to this checkout. Each round
of each benchmark runs in a fresh interpreter (its host RSS is its own) against
one side's `actors` and `supervision` and this checkout's `tests/` (a folder of
links per side: an old checkout's benchmarks may be older or missing); the sides
alternate within every round, and which goes first alternates round by round, so
the machine's noise falls on both alike. The benchmarks, round by round:

- restart: compare_restart_path's round (Python restart, command restart,
  detection, and the Popen floor), 30 kills;
- scale 1,000 and scale 10,000: scale.scale() (start all, restart, detection,
  which_children, stop all, host RSS per child, simple_one_for_one start and stop);
- storm: scale.crash_storm() (restarts per second and the CPU they cost);
- probes: probes.measure() with and without 1,000 HTTP liveness probes;
- update: update.one_round() (wall time of `nannytree update` in place).

Prints, per figure, the median and p95 of every sample before and after, the
ratio of the medians (after / before), and the run-to-run spread: half the range
of the per-round medians over their median, the larger side's (a ratio within
1 +- spread is noise). A benchmark a side cannot run (its code predates it) says
so and is left out of that side.

On 2 cores shared with five other sessions' tests (a load of 10-25): the full
run took about 30 minutes (scale 10,000 half of it, probes a fifth), `--quick`
1.5 (fewer rounds and kills, 100 probes, no 10,000: a sanity run, not a
measurement). Expect less on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.benchmarks.ab import HERE, checked_out, p95

print = functools.partial(print, flush=True)
Figures = dict[str, list[float]]


# -- one round of each benchmark, run in the side's interpreter ---------------------------


def _round_restart(n: int) -> Figures:
    from tests.benchmarks.compare_restart_path import ROUND

    saved, sys.argv = sys.argv, ["round", str(n)]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(ROUND, "compare_restart_path.ROUND", "exec"), {"__name__": "round"})
    finally:
        sys.argv = saved
    seconds: Figures = json.loads(out.getvalue().strip().splitlines()[-1])
    names = {"python": "python", "command": "command", "detect": "detection", "popen": "popen"}
    return {f"{names[k]} ms": [x * 1000 for x in v] for k, v in seconds.items()}


def _round_scale(n: int, kills: int) -> Figures:
    from tests.benchmarks.scale import scale

    with contextlib.redirect_stdout(io.StringIO()):
        return scale(n, kills, baseline=False)


def _round_storm(seconds: float) -> Figures:
    from tests.benchmarks.scale import crash_storm

    with contextlib.redirect_stdout(io.StringIO()):
        return crash_storm(seconds)


def _round_probes(children: int, seconds: float) -> Figures:
    import multiprocessing

    from tests.benchmarks.probes import _ports, _serve, measure

    ports = _ports(children)
    spawn = multiprocessing.get_context("spawn")
    ready = spawn.Event()
    server = spawn.Process(target=_serve, args=(ports, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(60):
            raise RuntimeError("the answering process did not start")
        without = measure(ports, False, seconds)
        probed = measure(ports, True, seconds)
    finally:
        server.kill()
        server.join()
    return {
        "host % without probes": [without[0]],
        "host % with probes": [probed[0]],
        "launcher+guardian % with probes": [probed[1]],
        "the probes' own cost %": [sum(probed) - sum(without)],
    }


ROUNDS: dict[str, Callable[..., Figures]] = {
    "restart": _round_restart,
    "scale": _round_scale,
    "storm": _round_storm,
    "probes": _round_probes,
}


def _child_main(name: str, args: str) -> None:
    """In the side's interpreter: one round, its figures as the last line of output."""
    figures = ROUNDS[name](**json.loads(args))
    sys.stdout.flush()
    print(json.dumps(figures))


# -- the sides and the rounds -------------------------------------------------------------


@contextlib.contextmanager
def _view(checkout: Path) -> Iterator[Path]:
    """A folder whose `actors` and `supervision` are the checkout's and whose `tests`
    are this one's: what each round runs against."""
    with tempfile.TemporaryDirectory(prefix="nt-side-") as folder:
        for package in ("actors", "supervision"):
            os.symlink(checkout.resolve() / package, Path(folder) / package)
        os.symlink(HERE / "tests", Path(folder) / "tests")
        yield Path(folder)


def _in_side(view: Path, name: str, args: dict[str, Any], timeout: float) -> Figures:
    env = dict(os.environ, PYTHONPATH=str(view))
    done = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.before_after", "--round", name, json.dumps(args)],
        cwd=view,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(tail)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _update_round(view: Path) -> Figures:
    from tests.benchmarks.update import one_round

    took, restarted, lost, _ = one_round(view)
    return {"update ms": [took * 1000], "restarted of 5": [restarted], "lost of 2": [lost]}


# A benchmark that failed this many rounds on a side is not run there again (a side
# whose code predates it fails at once; a round of probes may fail on a loaded machine).
GIVE_UP = 2


@dataclass
class Bench:
    name: str
    rounds: int
    round: str  # a ROUNDS name, or "update" (run from here: it drives the CLI)
    args: dict[str, Any] = field(default_factory=dict)
    timeout: float = 600.0


def benches(quick: bool) -> list[Bench]:
    if quick:
        return [
            Bench("restart", 2, "restart", {"n": 15}),
            Bench("scale 1,000", 1, "scale", {"n": 1000, "kills": 10}),
            Bench("storm", 1, "storm", {"seconds": 2.0}),
            Bench("probes", 1, "probes", {"children": 100, "seconds": 3.0}),
            Bench("update", 2, "update"),
        ]
    return [
        Bench("restart", 6, "restart", {"n": 30}),
        Bench("scale 1,000", 3, "scale", {"n": 1000, "kills": 40}),
        Bench("scale 10,000", 2, "scale", {"n": 10_000, "kills": 20}, timeout=1200),
        Bench("storm", 3, "storm", {"seconds": 5.0}),
        Bench("probes", 2, "probes", {"children": 1000, "seconds": 10.0}),
        Bench("update", 6, "update"),
    ]


@dataclass
class Side:
    view: Path
    samples: dict[str, Figures] = field(default_factory=dict)  # bench -> figure -> all
    rounds: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # -> medians
    failed: dict[str, list[str]] = field(default_factory=dict)  # bench -> why, per round

    def run(self, bench: Bench) -> None:
        if len(self.failed.get(bench.name, [])) >= GIVE_UP:
            return
        try:
            if bench.round == "update":
                figures = _update_round(self.view)
            else:
                figures = _in_side(self.view, bench.round, bench.args, bench.timeout)
        except Exception as exc:  # an old side may predate it; a loaded machine fail it
            why = str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}"
            self.failed.setdefault(bench.name, []).append(why)
            return
        for figure, values in figures.items():
            self.samples.setdefault(bench.name, {}).setdefault(figure, []).extend(values)
            medians = self.rounds.setdefault(bench.name, {}).setdefault(figure, [])
            medians.append(statistics.median(values))


def alternate(sides: Sequence[Side], plan: Sequence[Bench]) -> None:
    for r in range(max(b.rounds for b in plan)):
        for bench in plan:
            if r >= bench.rounds:
                continue
            started = time.monotonic()
            for side in sides if r % 2 == 0 else list(reversed(sides)):
                side.run(bench)
            took = time.monotonic() - started
            print(f"  round {r + 1}/{bench.rounds} of {bench.name}: {took:.0f} s")


# -- the table ----------------------------------------------------------------------------


def spread(medians: Sequence[float]) -> float | None:
    """Half the range of the per-round medians over their median (None: one round)."""
    if len(medians) < 2:
        return None
    middle = statistics.median(medians)
    if middle == 0:
        return None
    return (max(medians) - min(medians)) / 2 / abs(middle)


def _cell(values: list[float] | None) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):9.2f} / {p95(values):9.2f}"


def table(before: Side, after: Side, plan: Sequence[Bench]) -> list[str]:
    lines = [
        f"{'figure':<44} {'before median / p95':>21} {'after median / p95':>21}"
        f" {'ratio':>6} {'spread':>7}"
    ]
    for bench in plan:
        figures = list(after.samples.get(bench.name, {})) or list(
            before.samples.get(bench.name, {})
        )
        for figure in figures:
            b = before.samples.get(bench.name, {}).get(figure)
            a = after.samples.get(bench.name, {}).get(figure)
            ratio = "-"
            if a and b and statistics.median(b) != 0:
                ratio = f"{statistics.median(a) / statistics.median(b):6.2f}"
            spreads = [
                s
                for side in (before, after)
                if (s := spread(side.rounds.get(bench.name, {}).get(figure, []))) is not None
            ]
            wide = f"{max(spreads) * 100:5.0f} %" if spreads else "-"
            name = f"{bench.name}: {figure}"
            lines.append(f"{name:<44} {_cell(b):>21} {_cell(a):>21} {ratio:>6} {wide:>7}")
    for label, side in (("before", before), ("after", after)):
        restart = side.samples.get("restart", {})
        if restart.get("command ms") and restart.get("popen ms"):
            floor = statistics.median(restart["command ms"]) / statistics.median(
                restart["popen ms"]
            )
            lines.append(f"command restart / Popen floor, {label}: {floor:.2f}x")
        for name, whys in side.failed.items():
            lines.append(f"{label}: {name}, {len(whys)} round(s) failed, the last: {whys[-1]}")
    return lines


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--round":
        _child_main(sys.argv[2], sys.argv[3])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="the checkout or commit before the change")
    parser.add_argument("new", nargs="?", default=str(HERE), help="after (default: here)")
    parser.add_argument("--quick", action="store_true", help="a sanity run, not a measurement")
    parser.add_argument("--only", nargs="*", help="benchmarks by name (e.g. restart storm)")
    args = parser.parse_args()
    plan = [b for b in benches(args.quick) if not args.only or b.name in args.only]
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        views = [
            stack.enter_context(_view(stack.enter_context(checked_out(s))))
            for s in (args.old, args.new)
        ]
        before, after = Side(views[0]), Side(views[1])
        print(f"before: {args.old}  after: {args.new}")
        try:
            alternate([before, after], plan)
        except KeyboardInterrupt:  # a run cut short still shows the rounds it made
            print("interrupted: the table holds the rounds done")
    print(f"\n{len(plan)} benchmarks in {(time.monotonic() - started) / 60:.1f} min\n")
    for line in table(before, after, plan):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
