"""Remote subtrees on Ray: restart and detection figures on a local mini-cluster.

    .venv/bin/pip install -e '.[test,ray]'
    .venv/bin/python -m tests.benchmarks.bench_remote [--samples 10] [--out FILE.json]

A head and worker nodes on this machine (ray.cluster_utils.Cluster), the GCS
health check tuned as in the tier-2 tests (500 ms period, 1 s timeout, 3 misses).
Figures (median, p95, n), never assertions:
- restart: SIGKILL of the remote NannyHost process -> the new incarnation's
  children running (which_child says "running" with a new incarnation);
- detection per failure kind, from the fault to the parent's child_exited event:
  process death (SIGKILL of the NannyHost), node removed (remove_node, no grace),
  silent node (SIGSTOP of its raylet and the NannyHost);
- the cost of one remote API call (which_children through child_nanny).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from supervision import ChildSpec, EventKind, Placement, SupervisorSpec

HEALTH = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
    "health_check_initial_delay_ms": 1000,
}
MEMORY = 80 * 1024 * 1024


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(ordered) * 1e3, "p95_ms": p95 * 1e3, "n": len(ordered)}


def wait_for(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("no recovery within the bound")
        time.sleep(0.002)


class Bench:
    def __init__(self) -> None:
        import ray
        from ray.cluster_utils import Cluster

        tmp = tempfile.mkdtemp(prefix="ntb", dir="/tmp")
        os.environ["RAY_TMPDIR"] = tmp
        os.makedirs(os.path.join(tmp, "ray"), exist_ok=True)
        self.ray = ray
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "_system_config": HEALTH,
                "object_store_memory": MEMORY,
            },
        )
        ray.init(address=self.cluster.address, log_to_driver=False)

    def add_node(self) -> Any:
        node = self.cluster.add_node(num_cpus=1, object_store_memory=MEMORY)
        self.cluster.wait_for_nodes()
        return node

    def start(self, nodes: list[Any]) -> Any:
        from actors import Tree
        from actors.ray import RayEngine

        spec = SupervisorSpec(
            id="root",
            intensity=1000,
            period=1.0,
            children=[
                SupervisorSpec(
                    id="sub",
                    placement=Placement(node=nodes[0].node_id, fallback=[n.node_id for n in nodes]),
                    children=[ChildSpec(id="w", command=["sleep", "600"])],
                )
            ],
        )
        return Tree.start(spec, engine=RayEngine(lease_timeout=None))

    def exited_after(self, tree: Any, since: float) -> float:
        def seen() -> bool:
            return any(
                e.context is EventKind.CHILD_EXITED and e.time >= since for e in tree.events()
            )

        wait_for(seen)
        event = next(
            e for e in tree.events() if e.context is EventKind.CHILD_EXITED and e.time >= since
        )
        return float(event.time - since)

    def close(self) -> None:
        self.ray.shutdown()
        self.cluster.shutdown()


def progress(what: str) -> None:
    print(f"bench_remote: {what} done", file=sys.stderr, flush=True)


def run(samples: int) -> dict[str, Any]:
    bench = Bench()
    results: dict[str, Any] = {}
    try:
        node = bench.add_node()
        tree = bench.start([node])

        def info(child: str) -> Any:
            return tree.nanny.which_child(child)

        proxy = tree.nanny.child_nanny("sub").get().proxy()
        calls = []
        for _ in range(max(50, samples * 20)):
            t0 = time.monotonic()
            proxy.which_children().get()
            calls.append(time.monotonic() - t0)
        results["remote_api_call"] = summary(calls)
        progress("remote API calls")

        restarts, detect = [], []
        for _ in range(samples):
            before = info("sub").get().incarnation
            pid = info("sub").get().pid
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            wait_for(
                lambda b=before: (c := info("sub").get()).incarnation > b and c.state == "running"
            )
            restarts.append(time.monotonic() - t0)
            detect.append(bench.exited_after(tree, t0))
        results["restart_after_remote_kill"] = summary(restarts)
        results["detect_process_death"] = summary(detect)
        progress("remote kills")
        tree.stop(timeout=60)

        removed = []
        spare = bench.add_node()
        for _ in range(max(2, samples // 3)):
            victim = bench.add_node()
            tree = bench.start([victim, spare])
            t0 = time.monotonic()
            bench.cluster.remove_node(victim, allow_graceful=False)
            removed.append(bench.exited_after(tree, t0))
            tree.stop(timeout=60)
        results["detect_node_removed"] = summary(removed)
        progress("node removals")

        silent = []
        for _ in range(max(2, samples // 3)):
            victim = bench.add_node()
            tree = bench.start([victim, spare])
            frozen = [p.process.pid for ps in victim.all_processes.values() for p in ps]
            frozen.append(tree.nanny.which_child("sub").get().pid)
            t0 = time.monotonic()
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            try:
                silent.append(bench.exited_after(tree, t0))
            finally:
                for pid in frozen:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
            tree.stop(timeout=60)
            with contextlib.suppress(Exception):
                bench.cluster.remove_node(victim, allow_graceful=False)
        results["detect_silent_node"] = summary(silent)
    finally:
        bench.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--out", help="write the figures as JSON here too")
    args = parser.parse_args()
    import ray

    results = {"ray": ray.__version__, **run(args.samples)}
    for name, value in results.items():
        if isinstance(value, dict):
            print(
                f"{name:28} median {value['median_ms']:9.1f} ms   "
                f"p95 {value['p95_ms']:9.1f} ms   n={value['n']}"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
