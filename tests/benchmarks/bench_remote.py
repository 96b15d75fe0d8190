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

    .venv/bin/python -m tests.benchmarks.bench_remote --node-loss [--samples 3]

measures instead a lost node -> the parent's child_exited event (and its reason)
and -> the subtree running on the spare node: removed (remove_node, no grace:
its processes die, the remote host's worker outlives its raylet and fences
itself) or silent (its Ray processes and the remote host SIGSTOPped), for each
lease (off, 3 s, the default 30 s), with the health check tuned as above and
with Ray's default one (3 s period, 10 s timeout, 5 misses; a silent node once).

    .venv/bin/python -m tests.benchmarks.bench_remote --liveness [--samples 3]

measures the opt-in liveness check (T = 2 s, a 6 s lease, Ray's default health
check): the remote host alone, or its whole node, SIGSTOPped, or the host alone
while `status`-like reads poll the tree every 50 ms -> the verdict
(`remote_unresponsive`, from the log), -> the parent's child_exited (then it is
thawed), -> running again.

    .venv/bin/python -m tests.benchmarks.bench_remote --namespaced [--node-loss|--liveness]

runs the same on worker nodes in PID and mount namespaces of their own
(tests/support/ray_cluster.py, `NsNode`; root): each node sees and kills only its
own processes, as real hosts. There "removed" kills the node's Ray daemons (`ray
start` and its children: the raylet, its agents), as remove_node does, and
"silent" stops every process of the node's namespace (a power cut or a paused VM,
seen from outside), the remote child and its launcher too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
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
    def __init__(self, health: dict[str, int] | None = HEALTH, namespaced: bool = False) -> None:
        import ray
        from ray.cluster_utils import Cluster

        tmp = tempfile.mkdtemp(prefix="ntb", dir="/tmp")
        os.environ["RAY_TMPDIR"] = tmp
        os.makedirs(os.path.join(tmp, "ray"), exist_ok=True)
        self.ray = ray
        self.tmp = tmp
        self.namespaced = namespaced
        self.ns_nodes: list[Any] = []
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                **({"_system_config": health} if health else {}),
                "object_store_memory": MEMORY,
            },
        )
        ray.init(address=self.cluster.address, log_to_driver=False)

    def add_node(self) -> Any:
        if self.namespaced:
            from tests.support.ray_cluster import NS_START, NsNode

            resource = f"ns{len(self.ns_nodes) + 1}"
            ns = NsNode(self.cluster.address, resource, os.path.join(self.tmp, f"{resource}.log"))
            self.ns_nodes.append(ns)
            ns.join(time.monotonic() + NS_START)
            return ns
        node = self.cluster.add_node(num_cpus=1, object_store_memory=MEMORY)
        self.cluster.wait_for_nodes()
        return node

    def remove(self, node: Any) -> None:
        """The whole node gone (a namespaced one: every process of it)."""
        if self.namespaced:
            node.kill()
        else:
            self.cluster.remove_node(node, allow_graceful=False)

    def remove_ray(self, node: Any) -> None:
        """Its Ray daemons killed, the OS answering (a remote host outlives them)."""
        if not self.namespaced:
            self.cluster.remove_node(node, allow_graceful=False)
            return
        init = node.host_pid(1)  # the namespace's init: ray start is its child
        starter = [p for p in _children(init) if " start " in _cmdline(p)] if init else []
        daemons = [*starter, *(c for p in starter for c in _children(p))]
        for pid in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def host_pid(self, node: Any, tree: Any) -> int:
        """The remote host's pid here (a namespaced node shows its own)."""
        pid = int(tree.nanny.which_child("sub").get().pid)
        return int(node.host_pid(pid)) if self.namespaced else pid

    def silent(self, node: Any, tree: Any) -> list[int]:
        """What a silent node stops: its Ray processes and the remote host; a
        namespaced node, every process of it."""
        if self.namespaced:
            return list(node.pids())
        frozen = [p.process.pid for ps in node.all_processes.values() for p in ps]
        return [*frozen, self.host_pid(node, tree)]

    def start(
        self, nodes: list[Any], lease: float | None = None, liveness: float | None = None
    ) -> Any:
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
        engine = RayEngine(lease_timeout=lease, liveness_timeout=liveness)
        return Tree.start(spec, engine=engine)

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
        for ns in self.ns_nodes:
            ns.kill()
        self.ray.shutdown()
        self.cluster.shutdown()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def progress(what: str) -> None:
    print(f"bench_remote: {what} done", file=sys.stderr, flush=True)


def run(samples: int, namespaced: bool = False) -> dict[str, Any]:
    bench = Bench(namespaced=namespaced)
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
            pid = bench.host_pid(node, tree)
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
            bench.remove_ray(victim)
            removed.append(bench.exited_after(tree, t0))
            tree.stop(timeout=60)
            with contextlib.suppress(Exception):
                bench.remove(victim)
        results["detect_node_removed"] = summary(removed)
        progress("node removals")

        silent = []
        for _ in range(max(2, samples // 3)):
            victim = bench.add_node()
            tree = bench.start([victim, spare])
            frozen = bench.silent(victim, tree)
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
                bench.remove(victim)
        results["detect_silent_node"] = summary(silent)
    finally:
        bench.close()
    return results


def restarted(tree: Any) -> bool:
    child = tree.nanny.which_child("sub").get()
    return bool(child.restarts == 1 and child.state == "running")


def lose(bench: Bench, victim: Any, tree: Any, how: str) -> list[int]:
    """Lose `victim`: "removed" (its processes killed, the remote host's worker left
    without its raylet) or "silent" (its Ray processes and the remote host stopped,
    as a power cut looks from outside); the pids to let go on afterwards."""
    if how == "removed":
        bench.remove_ray(victim)
        return []
    frozen = bench.silent(victim, tree)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    return frozen


def node_loss(
    samples: int, namespaced: bool = False, losses: tuple[str, ...] = ("removed", "silent")
) -> dict[str, Any]:
    """A lost node -> the parent's child_exited, and -> running on the spare node, per
    kind of loss, lease and health check."""
    results: dict[str, Any] = {}
    leases = (None, 3.0, 30.0)
    cases = {
        "tuned": [(how, lease) for how in ("removed", "silent") for lease in leases],
        "ray-default": [("removed", None), ("removed", 30.0), ("silent", 30.0)],
    }
    cases = {k: [(how, lease) for how, lease in v if how in losses] for k, v in cases.items()}
    for checked, health in (("tuned", HEALTH), ("ray-default", None)):
        bench = Bench(health, namespaced)
        try:
            spare = bench.add_node()
            for how, lease in cases[checked]:
                down, back, kinds = [], [], set()
                n = samples if checked == "tuned" or how == "removed" else 1  # 65 s each
                for _ in range(n):
                    victim = bench.add_node()
                    tree = bench.start([victim, spare], lease)
                    t0 = time.monotonic()
                    frozen = lose(bench, victim, tree, how)
                    try:
                        wait_for(partial(restarted, tree), timeout=300)
                    finally:
                        for pid in frozen:
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(pid, signal.SIGCONT)
                    back.append(time.monotonic() - t0)
                    down.append(bench.exited_after(tree, t0))
                    kinds.add(tree.nanny.which_child("sub").get().last_exit.kind.value)
                    tree.stop(timeout=60)
                    with contextlib.suppress(Exception):
                        bench.remove(victim)
                name = f"{how}_{checked}_health_lease_{lease or 'off'}"
                results[name + "_to_exit"] = {**summary(down), "reasons": sorted(kinds)}
                results[name + "_to_running"] = summary(back)
                progress(name)
        finally:
            bench.close()
    return results


class _Verdicts(logging.Handler):
    """The times (time.monotonic()) the liveness verdicts were logged."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "did not answer" in record.getMessage():
            self.times.append(time.monotonic())


def _poll(tree: Any, done: threading.Event) -> None:
    """What `status` and `status ID` ask, every 50 ms, until `done`."""
    while not done.is_set():
        with contextlib.suppress(Exception):
            tree.nanny.which_tree().get(timeout=15)
        with contextlib.suppress(Exception):
            tree.nanny.child_nanny("sub").get().proxy().which_child("w").get(timeout=15)
        done.wait(0.05)


def liveness(
    samples: int, timeout: float = 2.0, lease: float = 6.0, namespaced: bool = False
) -> dict[str, Any]:
    """The liveness check's bound: a frozen remote host or node -> its verdict, its
    child_exited and the subtree running again (Ray's default health check, so the
    node is not declared dead meanwhile)."""
    verdicts = _Verdicts()
    logging.getLogger("nannytree").addHandler(verdicts)
    logging.getLogger("nannytree").setLevel(logging.INFO)
    results: dict[str, Any] = {}
    bench = Bench(None, namespaced)
    try:
        spare = bench.add_node()
        for what in ("host", "node", "host_polled"):
            verdict, down, back = [], [], []
            for _ in range(samples):
                victim = bench.add_node()
                tree = bench.start([victim, spare], lease, timeout)
                host = bench.host_pid(victim, tree)
                frozen = bench.silent(victim, tree) if what == "node" else [host]
                verdicts.times.clear()
                polling = threading.Event()
                if what == "host_polled":
                    threading.Thread(target=_poll, args=(tree, polling), daemon=True).start()
                t0 = time.monotonic()
                for pid in frozen:
                    os.kill(pid, signal.SIGSTOP)
                try:
                    down.append(bench.exited_after(tree, t0))
                finally:
                    # Thawed once its exit is told: a frozen node that Ray still lists
                    # is where "prefer" starts the subtree again.
                    for pid in frozen:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGCONT)
                wait_for(partial(restarted, tree), timeout=300)
                back.append(time.monotonic() - t0)
                polling.set()
                verdict.append(verdicts.times[0] - t0)
                tree.stop(timeout=60)
                with contextlib.suppress(Exception):
                    bench.remove(victim)
            name = f"liveness_{timeout:g}s_lease_{lease:g}s_frozen_{what}"
            results[name + "_to_verdict"] = summary(verdict)
            results[name + "_to_exit"] = summary(down)
            results[name + "_to_running"] = summary(back)
            progress(name)
    finally:
        bench.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--out", help="write the figures as JSON here too")
    parser.add_argument(
        "--node-loss", action="store_true", help="time a lost node's node_down per setting"
    )
    parser.add_argument(
        "--liveness", action="store_true", help="time the liveness check on a frozen host"
    )
    parser.add_argument(
        "--losses", default="removed,silent", help="with --node-loss: which kinds of loss"
    )
    parser.add_argument(
        "--namespaced",
        action="store_true",
        help="worker nodes in PID and mount namespaces of their own (root)",
    )
    args = parser.parse_args()
    import ray

    ns = args.namespaced
    if args.liveness:
        figures = liveness(args.samples, namespaced=ns)
    elif args.node_loss:
        figures = node_loss(args.samples, ns, tuple(args.losses.split(",")))
    else:
        figures = run(args.samples, ns)
    results = {"ray": ray.__version__, **figures}
    for name, value in results.items():
        if isinstance(value, dict):
            print(
                f"{name:48} median {value['median_ms']:9.1f} ms   "
                f"p95 {value['p95_ms']:9.1f} ms   n={value['n']}   {value.get('reasons', '')}"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
