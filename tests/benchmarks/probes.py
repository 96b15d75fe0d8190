"""What liveness probes cost: N children, each with an HTTP liveness probe every second.

    python -m tests.benchmarks.probes [--children 1000] [--seconds 20] [--rounds 3]

The children are `sleep` commands; their probes GET /health from one answering
process outside the tree (N listening ports, one per child), so what is measured
is the supervisor's side only: the CPU of the host (the benchmark's process,
where the tree's prober thread runs) and of the launcher and its guardian, over
a window once every child has passed its first probe. Beside it, in the same
session and alternating, the same tree without probes (the idle cost). Figures
only, never assertions: median and p95 over the rounds, and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing
import statistics
import sys
import time
from typing import Any

import psutil

from actors import Tree
from supervision import ChildSpec, EventKind, HttpProbe, Liveness, SupervisorSpec

from .scale import cpu_seconds

print = functools.partial(print, flush=True)
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


def _serve(ports: list[int], ready: Any) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(ANSWER)
        await writer.drain()
        writer.close()

    async def main() -> None:
        for port in ports:
            await asyncio.start_server(answer, "127.0.0.1", port, backlog=64)
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def _ports(n: int) -> list[int]:
    import socket

    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def measure(ports: list[int], probed: bool, seconds: float) -> tuple[float, float]:
    """(host %, launcher + guardian %) of one core over `seconds`, once all are healthy."""
    children = [
        ChildSpec(
            id=f"c{i}",
            command=["sleep", "100000"],
            liveness=Liveness(HttpProbe(f"http://127.0.0.1:{port}/health", period=1.0))
            if probed
            else None,
        )
        for i, port in enumerate(ports)
    ]
    spec = SupervisorSpec(id="probes", children=children)
    me = psutil.Process()
    tree = Tree.start(spec)
    try:
        if probed:
            healthy: set[str] = set()
            deadline = time.monotonic() + 120
            index = 0
            while len(healthy) < len(ports) and time.monotonic() < deadline:
                events, index = tree.log.since(index, 1.0)
                healthy.update(
                    e.offender or "" for e in events if e.context is EventKind.CHILD_HEALTHY
                )
            if len(healthy) < len(ports):
                raise RuntimeError(f"only {len(healthy)} of {len(ports)} became healthy")
        launcher: Any = tree.context.spawner
        helpers = [launcher.pid, launcher.guardian_pid]
        c0, h0, t0 = me.cpu_times(), cpu_seconds(helpers), time.monotonic()
        time.sleep(seconds)  # the window measured: a benchmark, not a test
        c1, h1, t1 = me.cpu_times(), cpu_seconds(helpers), time.monotonic()
        if probed:
            bad = [
                c.id
                for c in tree.ref.proxy().which_children().get()
                if c.health is None or c.health.status != "healthy"
            ]
            if bad:
                raise RuntimeError(f"{len(bad)} children not healthy at the end: {bad[:5]}")
    finally:
        tree.stop()
    wall = t1 - t0
    host = (c1.user + c1.system - c0.user - c0.system) / wall * 100
    return host, (h1 - h0) / wall * 100


def _p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    ports = _ports(opts.children)
    ready = multiprocessing.get_context("spawn").Event()
    server = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(ports, ready), daemon=True
    )
    server.start()
    if not ready.wait(60):
        print("the answering process did not start", file=sys.stderr)
        return 1
    print(
        f"{opts.children} children, an HTTP liveness probe each every 1 s, "
        f"{opts.seconds:g} s windows, {opts.rounds} rounds (alternating with no probes)"
    )
    rows: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    try:
        for _ in range(opts.rounds):
            for probed in (False, True):
                rows[probed].append(measure(ports, probed, opts.seconds))
    finally:
        server.kill()
        server.join()
    for probed in (False, True):
        host = [max(0.0, h) for h, _ in rows[probed]]
        helper = [x for _, x in rows[probed]]
        both = [h + x for h, x in rows[probed]]
        name = "with probes" if probed else "without probes"
        print(
            f"  {name:<15} host {statistics.median(host):6.2f} % (p95 {_p95(host):6.2f})  "
            f"launcher+guardian {statistics.median(helper):5.2f} %  "
            f"together {statistics.median(both):6.2f} % (p95 {_p95(both):6.2f}) of one core"
        )
    cost = statistics.median([h + x for h, x in rows[True]]) - statistics.median(
        [h + x for h, x in rows[False]]
    )
    print(f"  the probes' own cost: {cost:.2f} % of one core ({opts.children} probes/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
