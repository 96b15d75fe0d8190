"""A lost node's `node_down`, live and simulated: the figures behind `Cluster`'s defaults.

    .venv/bin/python -m tests.benchmarks.bench_node_loss [--samples 3] [--out FILE.json]

A head and worker nodes on this machine (ray.cluster_utils.Cluster), as bench_remote.
A subtree on node b (fallback: a spare node) is lost, and the parent's child_exited
(`node_down`) is timed from the fault: a killed node (its raylet SIGKILLed: the
remote host outlives it, fences itself and says so) and a silent node (its raylet,
its workers and the remote host SIGSTOPped: nothing answers). Per setting: Ray's
default health check with the default 30 s lease, and the tests' tuned health check
(bench_remote.HEALTH) with a 6 s lease. Each figure is printed beside what
`simulate` gives with the same settings (`Cluster(...)`, parameters named as
RayEngine's). Figures, never assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import time
from typing import Any

import psutil

from supervision import ChildSpec, EventKind, Placement, SupervisorSpec
from tests.benchmarks.bench_remote import HEALTH, Bench, progress, wait_for

SETTINGS: dict[str, tuple[dict[str, int] | None, float]] = {
    "default": (None, 30.0),  # Ray's health check, RayEngine's lease
    "tuned": (HEALTH, 6.0),
}


def simulated(how: str, setting: str, phase: float) -> float:
    """What `simulate` gives for the same loss, `phase` seconds after a renewal."""
    from supervision.simulate import Cluster, NodeDown, Unreachable, simulate

    health, lease = SETTINGS[setting]
    tuned = (
        {}
        if health is None
        else {
            "health_check_period": health["health_check_period_ms"] / 1000,
            "health_check_timeout": health["health_check_timeout_ms"] / 1000,
            "health_check_failure_threshold": health["health_check_failure_threshold"],
        }
    )
    at = lease + phase  # a renewal beat, then the phase
    fault = NodeDown(at, "b") if how == "killed" else Unreachable(at, "b", 600.0)
    cluster = Cluster(["a", "b", "c"], faults=[fault], lease_timeout=lease, **tuned)
    result = simulate(spec("b", "c"), duration=at + 120.0, cluster=cluster)
    told = next(e.time for e in result.events if e.context is EventKind.CHILD_EXITED)
    return told - at


def node_pids(node: Any) -> list[int]:
    """Every process of a node: Ray's own and the workers its raylet started."""
    pids = {p.process.pid for ps in node.all_processes.values() for p in ps}
    for raylet in node.all_processes.get("raylet", []):
        with contextlib.suppress(psutil.NoSuchProcess):
            pids.update(c.pid for c in psutil.Process(raylet.process.pid).children(True))
    return sorted(pids)


def lose(node: Any, how: str) -> list[int]:
    """Kill or silence `node`; the pids to let go on afterwards."""
    if how == "killed":
        for raylet in node.all_processes["raylet"]:
            os.kill(raylet.process.pid, signal.SIGKILL)
        return []
    frozen = node_pids(node)
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    return frozen


def spec(node: str, spare: str) -> SupervisorSpec:
    return SupervisorSpec(
        id="root",
        intensity=1000,
        period=1.0,
        children=[
            SupervisorSpec(
                id="sub",
                placement=Placement(node=node, fallback=[spare]),
                children=[ChildSpec(id="w", command=["sleep", "600"])],
            )
        ],
    )


def node_down_after(tree: Any, since: float) -> tuple[float, str]:
    def found() -> Any:
        return next(
            (
                e
                for e in tree.events()
                if e.context is EventKind.CHILD_EXITED and e.time >= since and e.offender == "sub"
            ),
            None,
        )

    wait_for(lambda: found() is not None, timeout=300)
    event = found()
    return float(event.time - since), f"{event.reason.kind.value}: {event.reason.message}"


def live(samples: int) -> dict[str, Any]:
    from actors import Tree
    from actors.ray import RayEngine

    results: dict[str, Any] = {}
    for setting, (health, lease) in SETTINGS.items():
        bench = Bench(health)
        try:
            spare = bench.add_node()
            for how in ("killed", "silent"):
                times, sims, reasons = [], [], set()
                n = samples if (how, setting) != ("silent", "default") else min(samples, 2)
                for _ in range(n):
                    victim = bench.add_node()
                    tree = Tree.start(
                        spec(victim.node_id, spare.node_id),
                        engine=RayEngine(lease_timeout=lease),
                    )
                    wait_for(lambda t=tree: t.nanny.which_child("sub").get().state == "running")
                    time.sleep(0.5)  # not a synchronisation: a lease renewed at least once
                    t0 = time.monotonic()
                    frozen = lose(victim, how)
                    try:
                        took, why = node_down_after(tree, t0)
                    finally:
                        for pid in frozen:
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(pid, signal.SIGCONT)
                    times.append(took)
                    sims.append(simulated(how, setting, t0 % (lease / 3)))
                    reasons.add(why.split(" (")[0][:90])
                    tree.stop(timeout=60)
                    with contextlib.suppress(Exception):
                        bench.cluster.remove_node(victim, allow_graceful=False)
                    print(
                        f"  {how} {setting}: {took:.3f} s (simulated {sims[-1]:.3f} s)  {why[:99]}",
                        flush=True,
                    )
                results[f"{how}_{setting}"] = {
                    "samples_s": [round(t, 3) for t in times],
                    "simulated_s": [round(t, 3) for t in sims],
                    "median_s": round(statistics.median(times), 3),
                    "reasons": sorted(reasons),
                }
                progress(f"{how} {setting}")
        finally:
            bench.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--out", help="write the figures as JSON here too")
    args = parser.parse_args()
    results = live(args.samples)
    for name, value in results.items():
        print(f"{name:16} live {value['samples_s']}  simulated {value['simulated_s']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
