"""nannytree's benchmarks: restart latency, exit detection, scale, crash storms,
and the same kill -> restart against supervisord and circus when installed.

    .venv/bin/pip install -e '.[bench]'      # adds supervisor and circus (optional)
    .venv/bin/python -m tests.benchmarks.run [--quick] [--out bench-results]

Prints median, p95 and the sample count of each figure and writes them as JSON.
Figures, never assertions: the tests assert behaviour, this measures it.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from actors import NannyActor
from supervision import Backoff, ChildSpec, EventKind, SupervisorSpec

from . import peers
from .marker import exit_at_once, mark_and_sleep

RESULTS: dict[str, Any] = {}


def summary(name: str, samples: list[float], unit: str = "ms", scale: float = 1000.0) -> dict:
    xs = sorted(s * scale for s in samples)
    row = {
        "median": statistics.median(xs),
        "p95": xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))],
        "n": len(xs),
        "unit": unit,
    }
    RESULTS[name] = row
    print(f"  {name:<44} median {row['median']:9.2f} {unit:<4} p95 {row['p95']:9.2f}  n={len(xs)}")
    return row


def figure(name: str, value: float, unit: str) -> None:
    RESULTS[name] = {"value": value, "unit": unit}
    print(f"  {name:<44} {value:14.2f} {unit}")


# -- the marker: a child reports the monotonic time its user code began -------------


class Marker:
    """A datagram socket that children send time.monotonic() to when they start."""

    def __init__(self) -> None:
        self.path = tempfile.mktemp(prefix="nannytree-bench-")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(30)

    def wait(self) -> float:
        return float(self.sock.recv(64))

    def drain(self) -> None:
        self.sock.setblocking(False)
        try:
            while True:
                self.sock.recv(64)
        except BlockingIOError:
            pass
        finally:
            self.sock.setblocking(True)
            self.sock.settimeout(30)

    def close(self) -> None:
        self.sock.close()
        os.unlink(self.path)

    def code(self) -> str:
        return (
            "import socket, time; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); "
            f"s.sendto(repr(time.monotonic()).encode(), {self.path!r})"
        )


# -- restart latency ------------------------------------------------------------------


def floor(marker: Marker, n: int) -> list[float]:
    """A bare Popen of the same interpreter running the same marker code."""
    samples = []
    for _ in range(n):
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-c", marker.code()])
        samples.append(marker.wait() - t0)
        p.wait()
    return samples


def python_restarts(marker: Marker, n: int, **fields: Any) -> tuple[list[float], list[float]]:
    """(kill -> replacement runs user code, kill -> the nanny's exit event)."""
    spec = SupervisorSpec(
        id="bench",
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id="m", target=mark_and_sleep, args=(marker.path,), **fields)],
    )
    ref = NannyActor.start(spec)
    try:
        marker.wait()
        log = ref.proxy().event_log().get()
        restart, detect = [], []
        for _ in range(n):
            time.sleep(0.02)  # let a warm standby be refilled, as between real crashes
            pid = ref.proxy().which_child("m").get().pid
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            restart.append(marker.wait() - t0)
            exited = log.wait_for(
                lambda e, pid=pid: e.context is EventKind.CHILD_EXITED and e.pid == pid, 10
            )
            detect.append(exited.time - t0)
        return restart, detect
    finally:
        ref.stop()


def command_restarts(n: int, children: int = 1) -> list[float]:
    """kill -> the replacement's pid is known to the nanny (child_started event)."""
    spec = SupervisorSpec(
        id="bench",
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id=f"c{i}", command=["sleep", "100000"]) for i in range(children)],
    )
    ref = NannyActor.start(spec)
    try:
        return _kill_commands(ref, n, children)
    finally:
        ref.stop()


def _kill_commands(ref: Any, n: int, children: int) -> list[float]:
    log = ref.proxy().event_log().get()
    samples = []
    for k in range(n):
        child_id = f"c{(k * 7919) % children}"
        time.sleep(0.005)
        info = ref.proxy().which_child(child_id).get()
        t0 = time.monotonic()
        os.kill(info.pid, signal.SIGKILL)
        started = log.wait_for(
            lambda e, c=child_id, i=info.incarnation: (
                e.context is EventKind.CHILD_STARTED and e.offender == c and e.incarnation == i + 1
            ),
            10,
        )
        samples.append(started.time - t0)
    return samples


def busy_host(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


# -- scale ---------------------------------------------------------------------------


def scale(n: int, kills: int) -> None:
    me = psutil.Process()
    rss0, threads0, fds0 = me.memory_info().rss, me.num_threads(), me.num_fds()
    spec = SupervisorSpec(
        id="bench",
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id=f"c{i}", command=["sleep", "100000"]) for i in range(n)],
    )
    t0 = time.monotonic()
    ref = NannyActor.start(spec)
    started = time.monotonic() - t0
    rss, threads, fds = me.memory_info().rss, me.num_threads(), me.num_fds()
    try:
        figure(f"scale {n}: start all", started * 1000, "ms")
        figure(f"scale {n}: host RSS per child", (rss - rss0) / n / 1024, "KiB")
        figure(f"scale {n}: host threads per child", (threads - threads0) / n, "")
        figure(f"scale {n}: host fds per child", (fds - fds0) / n, "")
        summary(f"scale {n}: command restart (kill -> new pid)", _kill_commands(ref, kills, n))
    finally:
        t0 = time.monotonic()
        ref.stop()
        figure(f"scale {n}: stop all", (time.monotonic() - t0) * 1000, "ms")


# -- crash storms --------------------------------------------------------------------


def crash_storm(label: str, seconds: float, **flags: Any) -> None:
    backoff = flags.pop("backoff", None)
    spec = SupervisorSpec(
        id="storm",
        children=[ChildSpec(id="crashy", target=exit_at_once, backoff=backoff)],
        **flags,
    )
    me = psutil.Process()
    ref = NannyActor.start(spec)
    # The storm, not the tree's start (the launcher's ~0.1 s): from the first start on.
    t0, cpu0 = time.monotonic(), me.cpu_times()
    log = ref.proxy().event_log().get()
    ended = ref.actor_stopped.wait(seconds)
    wall = time.monotonic() - t0
    cpu1 = me.cpu_times()
    if not ended:
        ref.stop()
    starts = sum(1 for e in log.snapshot() if e.context is EventKind.CHILD_STARTED)
    cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / wall * 100
    if ended:
        figure(f"crash storm, {label}: time to give up", wall * 1000, "ms")
    figure(f"crash storm, {label}: restarts", starts, "")
    if not ended:  # a give-up within milliseconds makes no rate worth reporting
        figure(f"crash storm, {label}: restarts per second", starts / wall, "/s")
        figure(f"crash storm, {label}: host CPU (% of one core)", cpu, "%")


# -- main ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    parser.add_argument("--out", default="bench-results", help="directory for results.json")
    args = parser.parse_args(argv)
    # Children import the targets' modules; with PYTHONDONTWRITEBYTECODE set (as on
    # this machine) they would compile them at every start. Compile once, as pip does.
    root = Path(__file__).resolve().parents[2]
    for package in ("actors", "supervision", "tests/benchmarks"):
        compileall.compile_dir(root / package, quiet=1)
    n = 15 if args.quick else 60
    sizes = (100,) if args.quick else (100, 500, 1000)
    print(
        f"nannytree benchmarks on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}\n"
    )
    marker = Marker()
    try:
        print("restart latency: SIGKILL -> the replacement runs user code")
        base = summary("floor: fresh interpreter (Popen)", floor(marker, n // 2))
        fork, detect = python_restarts(marker, n)
        fork_row = summary("python target (fork from the launcher)", fork)
        warm, _ = python_restarts(marker, n, warm_start=True)
        warm_row = summary("python target, warm_start", warm)
        fresh, _ = python_restarts(marker, n // 2, fresh_interpreter=True)
        fresh_row = summary("python target, fresh_interpreter", fresh)
        summary("command child (kill -> new pid in the nanny)", command_restarts(n))
        for label, row in (("fork", fork_row), ("warm", warm_row), ("fresh", fresh_row)):
            figure(f"ratio to the floor: {label}", row["median"] / base["median"], "x")
        print("\nexit detection: SIGKILL -> the nanny's exit event")
        summary("detection", detect)
        print("\nwith a CPU-bound thread in the host")
        stop = threading.Event()
        hog = threading.Thread(target=busy_host, args=(stop,), daemon=True)
        hog.start()
        try:
            busy, busy_detect = python_restarts(marker, n // 2)
            summary("python target, host busy", busy)
            summary("detection, host busy", busy_detect)
            default = sys.getswitchinterval()
            sys.setswitchinterval(0.0005)
            try:
                busy, busy_detect = python_restarts(marker, n // 2)
            finally:
                sys.setswitchinterval(default)
            summary("python target, host busy, switchinterval 0.5 ms", busy)
            summary("detection, host busy, switchinterval 0.5 ms", busy_detect)
        finally:
            stop.set()
            hog.join()
    finally:
        marker.close()
    print("\nscale: command children in one tree")
    for size in sizes:
        scale(size, 20 if args.quick else 40)
    print("\ncrash storm: a child that exits at once")
    crash_storm("intensity 1/5s (OTP default)", 10, intensity=1, period=5.0)
    crash_storm("intensity 10^6/1s, 3 s", 3, intensity=10**6, period=1.0)
    crash_storm(
        "backoff 10 ms..0.5 s, 3 s",
        3,
        intensity=10**6,
        period=1.0,
        backoff=Backoff(initial=0.01, max=0.5, reset_after=10.0),
    )
    print("\npeers: kill -> the replacement ran (sh writes to a FIFO), same command for all")
    peers.compare(n=10 if args.quick else 30, record=summary, ratio=figure)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(RESULTS, indent=2))
    print(f"\nwritten: {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
