"""The simulator at 1,000 children, before and after, alternating in one session.

    python -m tests.benchmarks.simulate_ab OLD [NEW] [--rounds 10] [--no-events]

OLD and NEW are checkouts (a folder) or commits (checked out into a temporary git
worktree, removed after); NEW defaults to this checkout. Each round runs, in a
fresh interpreter per side, bench_simulate's tree (a one_for_one root of 10
supervisors x 100 workers, each crashing with an MTBF of an hour, 24 virtual
hours) three times on the round's seed, events kept unless --no-events; the
sides alternate, and which goes first alternates round by round, so the
machine's noise falls on both alike. Prints, per side, the median CPU-seconds of
every run (simulated hours and events per CPU-second) and the ratio of the
medians; and the same for the fastest run of each round (the least disturbed).
The tree is built here, not imported from the side's benchmarks (an old
checkout may not have them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.ab import HERE, checked_out

HOURS = 24.0

ROUND = """
import json, sys, time
from supervision import ChildSpec, SupervisorSpec
from supervision.simulate import Exponential, simulate

def noop():
    pass

subs = [
    SupervisorSpec(f"s{j}", intensity=10**6, period=5.0,
                   children=[ChildSpec(f"w{i}", target=noop) for i in range(100)])
    for j in range(10)
]
spec = SupervisorSpec("root", intensity=10**6, period=5.0, children=subs)
faults = {f"s{j}/w{i}": Exponential(mtbf=3600.0) for j in range(10) for i in range(100)}
seed, keep = int(sys.argv[1]), sys.argv[2] == "1"
cpus, events = [], 0
for _ in range(3):
    started = time.process_time()
    result = simulate(spec, faults, duration=HOURS * 3600.0, seed=seed, keep_events=keep)
    cpus.append(time.process_time() - started)
    events = len(result.events)
import supervision
print(json.dumps({"cpus": cpus, "events": events, "file": supervision.__file__}))
"""


def one_round(side: Path, seed: int, keep: bool) -> dict[str, object]:
    code = f"HOURS = {HOURS}\n" + ROUND
    out = subprocess.run(
        [sys.executable, "-c", code, str(seed), "1" if keep else "0"],
        env={"PYTHONPATH": str(side), "PATH": "/usr/bin:/bin"},
        cwd="/",  # not this checkout: the side's `supervision` must be the one imported
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    if not str(found["file"]).startswith(str(side)):
        raise RuntimeError(f"imported {found['file']}, not the checkout {side}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", default=str(HERE))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-events", action="store_true")
    args = parser.parse_args()
    keep = not args.no_events
    with checked_out(args.old) as old, checked_out(args.new) as new:
        sides = {"before": old, "after": new}
        runs: dict[str, list[float]] = {k: [] for k in sides}
        fastest: dict[str, list[float]] = {k: [] for k in sides}
        events: dict[str, list[int]] = {k: [] for k in sides}
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            for name in order:
                found = one_round(sides[name], r % 3, keep)
                cpus = [float(c) for c in found["cpus"]]  # type: ignore[attr-defined]
                runs[name].extend(cpus)
                fastest[name].append(min(cpus))
                events[name].append(int(found["events"]))  # type: ignore[call-overload]
    print(
        f"1,000 children, {HOURS:g} h, events {'kept' if keep else 'dropped'}, "
        f"{args.rounds} rounds x 3 runs a side"
    )
    for label, figures in (("every run", runs), ("each round's fastest", fastest)):
        medians = {k: statistics.median(v) for k, v in figures.items()}
        for name, median in medians.items():
            per_event = statistics.mean(events[name]) / median
            print(
                f"  {label:<21} {name:<6}: {median:.3f} CPU-s, {median / HOURS * 1000:.1f} "
                f"CPU-ms per simulated hour, {HOURS / median:.1f} h per CPU-second"
                + (f", {per_event:,.0f} events per CPU-second" if keep else "")
            )
        print(f"  {label:<21} after is {medians['before'] / medians['after']:.2f}x faster")


if __name__ == "__main__":
    main()
