"""Scale and load, each beside a minimal pidfd supervisor measured in the same run.

    python -m tests.benchmarks.scale [--children 1000 3000] [--scale10k] [--kills 40]

For trees of N `sleep` commands: start all, stop all (static children one by
one in reverse, as OTP; simple_one_for_one children at once), restart
(SIGKILL -> the nanny's child_started) p50/p95, detection (SIGKILL -> the
nanny's child_exited) p50, `which_children` p50, host RSS and threads per
child. The baseline is one process with one pidfd per child, no actors:
posix_spawn, epoll, waitpid. Then the busy host (a CPU-bound thread in the
host, default switch interval): kill -> the replacement runs (a Python target
and a command, each reporting on a datagram socket), idle and busy; and the
crash storm: a Python child that exits at once, intensity 10^6, with the CPU
of the host, the launcher and its guardian. Figures only, never assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import select
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

import psutil

from actors import Tree
from supervision import ChildSpec, EventKind, Strategy, SupervisorSpec

from .marker import exit_at_once, mark_and_sleep

SLEEP = ["sleep", "100000"]
print = functools.partial(print, flush=True)


def row(name: str, samples: list[float], scale: float = 1000.0, unit: str = "ms") -> None:
    xs = sorted(s * scale for s in samples)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    print(f"  {name:<52} median {statistics.median(xs):9.2f} {unit}  p95 {p95:9.2f}  n={len(xs)}")


def figure(name: str, value: float, unit: str) -> None:
    print(f"  {name:<52} {value:12.2f} {unit}")


# -- the baseline: one process, one pidfd per child -------------------------------------


class Baseline:
    def __init__(self) -> None:
        self.poll = select.epoll()  # O(1) per wake-up, whatever N
        self.fds: dict[int, int] = {}  # pidfd -> pid
        self.pids: dict[int, int] = {}  # pid -> pidfd
        self.order: list[int] = []
        self.path = os.path.join(os.path.dirname(os.path.realpath(sys.executable)), "")

    def spawn(self) -> int:
        pid = os.posix_spawnp(SLEEP[0], SLEEP, os.environ, setpgroup=0)
        fd = os.pidfd_open(pid)
        self.poll.register(fd, select.EPOLLIN)
        self.fds[fd], self.pids[pid] = pid, fd
        return pid

    def reap(self, fd: int) -> int:
        pid = self.fds.pop(fd)
        del self.pids[pid]
        self.poll.unregister(fd)
        os.close(fd)
        os.waitpid(pid, 0)
        return pid

    def start(self, n: int) -> float:
        t0 = time.monotonic()
        self.order = [self.spawn() for _ in range(n)]
        return time.monotonic() - t0

    def kill_restart(self, kills: int) -> tuple[list[float], list[float]]:
        restart, detect = [], []
        for k in range(kills):
            pid = self.order[(k * 7919) % len(self.order)]
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            (fd, _), *_ = self.poll.poll()
            detect.append(time.monotonic() - t0)
            self.reap(fd)
            new = self.spawn()
            restart.append(time.monotonic() - t0)
            self.order[(k * 7919) % len(self.order)] = new
        return restart, detect

    def stop(self) -> float:
        t0 = time.monotonic()
        for pid in reversed(self.order):
            fd = self.pids[pid]
            os.killpg(pid, signal.SIGTERM)
            one = select.poll()  # not select(): fd numbers pass 1024 at this scale
            one.register(fd, select.POLLIN)
            one.poll()
            self.reap(fd)
        self.order = []
        return time.monotonic() - t0

    def kill_all(self) -> None:
        """Leave nothing behind, whatever happened (a benchmark interrupted midway)."""
        for pid in list(self.pids):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        for fd in list(self.fds):
            self.reap(fd)


# -- nannytree ------------------------------------------------------------------------------


def _kill(tree: Tree, n: int, kills: int) -> tuple[list[float], list[float]]:
    restart, detect = [], []
    for k in range(kills):
        child = f"c{(k * 7919) % n}"
        info = tree.nanny.which_child(child).get()
        time.sleep(0.005)
        since = len(tree.log)  # only the events from now on are looked at
        t0 = time.monotonic()
        os.kill(info.pid, signal.SIGKILL)
        started = tree.log.wait_for(
            lambda e, c=child, i=info.incarnation: (
                e.context is EventKind.CHILD_STARTED and e.offender == c and e.incarnation == i + 1
            ),
            20,
            start=since,
        )
        exited = tree.log.wait_for(
            lambda e, p=info.pid: e.context is EventKind.CHILD_EXITED and e.pid == p,
            20,
            start=since,
        )
        restart.append(started.time - t0)
        detect.append(exited.time - t0)
    return restart, detect


def scale(n: int, kills: int, baseline: bool = True) -> dict[str, list[float]]:
    """Prints the figures for N children; returns them ({name: samples}, in ms, KiB
    and threads) for tests/benchmarks/before_after.py."""
    print(f"\n{n} command children")
    out: dict[str, list[float]] = {}
    if baseline:
        base = Baseline()
        try:
            figure("baseline: start all", base.start(n) * 1000, "ms")
            b_restart, b_detect = base.kill_restart(kills)
            row("baseline: restart (kill -> new pid)", b_restart)
            row("baseline: detection", b_detect)
            figure("baseline: stop all (reverse, one by one)", base.stop() * 1000, "ms")
        finally:
            base.kill_all()
        out["baseline restart ms"] = [x * 1000 for x in b_restart]

    me = psutil.Process()
    rss0, threads0 = me.memory_info().rss, me.num_threads()
    spec = SupervisorSpec(
        id="scale",
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id=f"c{i}", command=SLEEP) for i in range(n)],
    )
    t0 = time.monotonic()
    tree = Tree.start(spec)
    out["start all ms"] = [(time.monotonic() - t0) * 1000]
    out["host RSS per child KiB"] = [(me.memory_info().rss - rss0) / n / 1024]
    figure("nannytree: start all", out["start all ms"][0], "ms")
    figure("nannytree: host RSS per child", out["host RSS per child KiB"][0], "KiB")
    figure("nannytree: host threads per child", (me.num_threads() - threads0) / n, "")
    try:
        restart, detect = _kill(tree, n, kills)
        row("nannytree: restart (kill -> child_started)", restart)
        row("nannytree: detection (kill -> child_exited)", detect)
        calls = []
        for _ in range(20):
            t0 = time.monotonic()
            tree.nanny.which_children().get()
            calls.append(time.monotonic() - t0)
        row("nannytree: which_children", calls)
        out["restart ms"] = [x * 1000 for x in restart]
        out["detection ms"] = [x * 1000 for x in detect]
        out["which_children ms"] = [x * 1000 for x in calls]
    finally:
        t0 = time.monotonic()
        tree.stop()
        out["stop all ms"] = [(time.monotonic() - t0) * 1000]
        figure("nannytree: stop all (reverse, one by one)", out["stop all ms"][0], "ms")

    dynamic = SupervisorSpec(
        id="dyn",
        strategy=Strategy.SIMPLE_ONE_FOR_ONE,
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id="c", command=SLEEP)],
    )
    tree = Tree.start(dynamic)
    t0 = time.monotonic()
    for _ in range(n):
        tree.nanny.start_child(()).get()
    out["start_child x N ms"] = [(time.monotonic() - t0) * 1000]
    figure("nannytree simple_one_for_one: start_child x N", out["start_child x N ms"][0], "ms")
    t0 = time.monotonic()
    tree.stop()
    out["dynamic stop all ms"] = [(time.monotonic() - t0) * 1000]
    figure("nannytree simple_one_for_one: stop all (at once)", out["dynamic stop all ms"][0], "ms")
    return out


# -- the busy host --------------------------------------------------------------------------


class Marker:
    def __init__(self) -> None:
        self.path = tempfile.mktemp(prefix="nt-scale-")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(30)

    def wait(self) -> float:
        return float(self.sock.recv(64))

    def close(self) -> None:
        self.sock.close()
        os.unlink(self.path)


def _command_marker(path: str) -> list[str]:
    code = (
        "import socket,time;s=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM);"
        f"s.sendto(repr(time.monotonic()).encode(),{path!r});time.sleep(1e6)"
    )
    return [sys.executable, "-S", "-c", code]


def restarts(marker: Marker, spec: ChildSpec, n: int) -> list[float]:
    tree = Tree.start(SupervisorSpec(id="b", intensity=10**6, period=1.0, children=[spec]))
    try:
        marker.wait()
        out = []
        for incarnation in range(1, n + 1):
            started = tree.log.wait_for(
                lambda e, i=incarnation: (
                    e.context is EventKind.CHILD_STARTED and e.incarnation == i
                ),
                30,
            )
            time.sleep(0.02)
            tree.nanny.read_output(spec.id).get()  # its exit plan is armed
            t0 = time.monotonic()
            assert started.pid is not None
            os.kill(started.pid, signal.SIGKILL)
            out.append(marker.wait() - t0)
        return out
    finally:
        tree.stop()


def busy(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


def busy_host(n: int) -> None:
    print("\nbusy host: kill -> the replacement runs its first line (default switch interval)")
    marker = Marker()
    python = ChildSpec(id="py", target=mark_and_sleep, args=(marker.path,))
    command = ChildSpec(id="cmd", command=_command_marker(marker.path))
    try:
        idle_py, idle_cmd = restarts(marker, python, n), restarts(marker, command, n)
        stop = threading.Event()
        hog = threading.Thread(target=busy, args=(stop,), daemon=True)
        hog.start()
        try:
            busy_py, busy_cmd = restarts(marker, python, n), restarts(marker, command, n)
        finally:
            stop.set()
            hog.join()
        row("python restart, idle host", idle_py)
        row("python restart, a CPU-bound thread in the host", busy_py)
        row("command restart (runs its first line), idle host", idle_cmd)
        row("command restart, a CPU-bound thread in the host", busy_cmd)
    finally:
        marker.close()


# -- the crash storm ------------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds the living `pids` have used (the gone count 0)."""
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def crash_storm(seconds: float) -> dict[str, list[float]]:
    """Prints the storm's figures; returns them ({name: [value]})."""
    print(f"\ncrash storm: a Python child that exits at once, intensity 10^6, {seconds:g} s")
    spec = SupervisorSpec(
        id="storm",
        intensity=10**6,
        period=1.0,
        children=[ChildSpec(id="crashy", target=exit_at_once)],
    )
    me = psutil.Process()
    tree = Tree.start(spec)
    try:
        launcher: Any = tree.context.spawner
        helpers = [launcher.pid, launcher.guardian_pid]
        time.sleep(0.5)  # past the first start
        c0, h0, n0, t0 = me.cpu_times(), cpu_seconds(helpers), len(tree.log), time.monotonic()
        time.sleep(seconds)
        c1, h1, n1, t1 = me.cpu_times(), cpu_seconds(helpers), len(tree.log), time.monotonic()
    finally:
        tree.stop()
    wall = t1 - t0
    host = (c1.user + c1.system - c0.user - c0.system) / wall * 100
    helper = (h1 - h0) / wall * 100
    starts = (n1 - n0) / 2  # an exit and a start per restart
    figure("restarts per second", starts / wall, "/s")
    figure("host CPU (% of one core)", host, "%")
    figure("launcher + guardian CPU (% of one core)", helper, "%")
    figure("together", host + helper, "%")
    return {
        "restarts /s": [starts / wall],
        "host CPU %": [host],
        "launcher+guardian CPU %": [helper],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, nargs="*", default=[1, 1000])
    parser.add_argument("--scale10k", action="store_true", help="also N = 10,000")
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--only-scale", action="store_true")
    args = parser.parse_args()
    sizes = list(args.children) + ([10_000] if args.scale10k else [])
    if not args.skip_scale:
        for n in sizes:
            scale(n, args.kills)
    if not args.only_scale:
        busy_host(30)
        crash_storm(5.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
