"""`nannytree run --metrics [HOST:]PORT`: the tree's state as Prometheus metrics at
/metrics (and its web page at /, `_web.py`).

A prometheus_client Collector that reads the tree at scrape time the way `nannytree
status` does (TreeInspector.snapshot: a busy supervisor is given QUICK seconds, then
the answer comes from the tree's events), so a scrape never waits on a supervisor
for long. Exits are counted from the events as they happen; CPU and memory are read
with psutil over each child's process tree, at most MAX_FAMILY processes a child.
The metrics are listed in docs/monitoring.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, get_args

import psutil
import pykka
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    StateSetMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

from supervision import ChildState, Event, EventKind

from .._operate._records import Node

if TYPE_CHECKING:
    from .. import EventLog
    from .._operate._snapshot import TreeInspector

PREFIX = "nannytree_"
MAX_SERIES = 4096  # children whose exit counts are kept after they left the tree
MAX_FAMILY = 256  # processes read per child: a fork bomb must not make a scrape slow
# Every state a child can be in ("unknown": a worker status read from events alone).
STATES: tuple[str, ...] = (*get_args(ChildState), "unknown")
HEALTH = ("unknown", "healthy", "failing")
# Events that end an incarnation: each is one exit, by its reason's kind.
EXITS = (EventKind.CHILD_EXITED, EventKind.CHILD_TERMINATED, EventKind.START_FAILED)
CHILD_LABELS = ["tree", "supervisor", "child"]

Windows = dict[str, Callable[[], tuple[float, ...]]]


class ExitCounts:
    """Exits of each child by reason, and the code of its last one, counted from the
    tree's events as they come."""

    def __init__(self, log: EventLog) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str, str], int] = {}
        self._codes: dict[tuple[str, str], int] = {}  # (supervisor, child): last code
        self._unsubscribe = log.subscribe(self._see)

    def _see(self, event: Event) -> None:
        if event.context not in EXITS or event.offender is None or event.reason is None:
            return
        reason = event.reason
        key = (event.supervisor, event.offender, reason.kind.value)
        code = exit_code(reason.code, reason.signal)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            if code is not None:
                self._codes[key[:2]] = code

    def counts(self) -> dict[tuple[str, str, str], int]:
        with self._lock:
            return dict(self._counts)

    def codes(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._codes)

    def forget_gone(self, present: set[tuple[str, str]]) -> None:
        """Past MAX_SERIES counts, forget the children not in `present` (a pool's
        short-lived children would otherwise grow the scrape without bound)."""
        with self._lock:
            if len(self._counts) > MAX_SERIES:
                self._counts = {k: v for k, v in self._counts.items() if k[:2] in present}
            if len(self._codes) > MAX_SERIES:
                self._codes = {k: v for k, v in self._codes.items() if k in present}

    def close(self) -> None:
        self._unsubscribe()


def exit_code(code: int | None, signal: int | None) -> int | None:
    """An exit's code as a number: its exit code, or -N for a death by signal N (as
    Python's returncode); None for an end without either (a failed spawn)."""
    if code is not None:
        return code
    return -signal if signal is not None else None


class FamilyStats:
    """CPU seconds and resident bytes of a process and its descendants.

    CPU counts the live processes' own time and what each reaped of its children,
    so the sum does not fall when a descendant exits (an orphan reaped elsewhere
    takes its time with it). The psutil handles are kept between scrapes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: dict[int, psutil.Process] = {}

    def read(self, pid: int) -> tuple[float, int, float] | None:
        """CPU seconds and resident bytes of `pid`'s family, and when `pid` started
        (seconds since the epoch)."""
        with self._lock:
            try:
                proc = self._procs.get(pid)
                if proc is None or not proc.is_running():
                    proc = self._procs[pid] = psutil.Process(pid)
                started = proc.create_time()  # kept by the handle: read once
                family = [proc, *proc.children(recursive=True)[: MAX_FAMILY - 1]]
            except psutil.Error:
                self._procs.pop(pid, None)
                return None
            cpu, rss = 0.0, 0
            for p in family:
                try:
                    with p.oneshot():
                        t = p.cpu_times()
                        cpu += t.user + t.system + t.children_user + t.children_system
                        rss += p.memory_info().rss
                except psutil.Error:
                    continue
            return cpu, rss, started

    def prune(self, alive: set[int]) -> None:
        with self._lock:
            for pid in set(self._procs) - alive:
                del self._procs[pid]


class TreeCollector(Collector):
    """The metrics of one running tree, read at each scrape."""

    def __init__(self, inspector: TreeInspector, log: EventLog) -> None:
        self.inspector = inspector
        self.exits = ExitCounts(log)
        self.stats = FamilyStats()
        # Each supervisor's charged restarts (TreeContext.restart_windows), once started.
        self.windows: Windows = {}
        # The last restart counts read from a supervisor, for an answer from events.
        self._restarts: dict[str, int] = {}

    def close(self) -> None:
        self.exits.close()

    def describe(self) -> list[Metric]:
        return []  # the families depend on the tree: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        tree = self.inspector.spec.id
        now = time.monotonic()
        try:
            root = self.inspector.snapshot(stats=False)
        except pykka.ActorDeadError:  # the tree ended between two questions
            root = Node(id=tree, path=tree, type="supervisor", state="stopped")
        fam = _Families()
        nodes = [n for _, n in root.walk()]
        for node in nodes[1:]:
            self._child(fam, tree, node)
        for node in nodes:
            if node.type == "supervisor":
                self._supervisor(fam, tree, node, now)
        present = {(n.path.rpartition("/")[0], n.id) for n in nodes[1:]}
        self.exits.forget_gone(present)
        if len(self._restarts) > MAX_SERIES:
            paths = {n.path for n in nodes}
            self._restarts = {p: c for p, c in self._restarts.items() if p in paths}
        counts = self.exits.counts()
        totals = dict.fromkeys(sorted(present), 0)  # 0 from its first scrape on
        for (supervisor, child, reason), count in sorted(counts.items()):
            fam.exits.add_metric([tree, supervisor, child, reason], count)
            totals[(supervisor, child)] = totals.get((supervisor, child), 0) + count
        for (supervisor, child), total in totals.items():
            fam.exits_all.add_metric([tree, supervisor, child], total)
        for (supervisor, child), code in sorted(self.exits.codes().items()):
            fam.last_code.add_metric([tree, supervisor, child], code)
        self.stats.prune({n.pid for n in nodes if n.pid is not None and n.node is None})
        fam.up_tree.add_metric([tree], 0 if root.state == "stopped" else 1)
        yield from fam.all()

    def _child(self, fam: _Families, tree: str, node: Node) -> None:
        supervisor = node.path.rpartition("/")[0]
        labels = [tree, supervisor, node.id]
        alive = node.state in ("starting", "running", "paused", "stopping")
        up = alive and (node.pid is not None or node.type == "supervisor")
        fam.up.add_metric(labels, 1 if up else 0)
        fam.ready.add_metric(labels, 1 if node.state == "running" else 0)
        fam.state.add_metric(labels, {s: s == node.state for s in STATES})
        fam.restarts.add_metric(labels, self._restart_count(node))
        if node.uptime is not None:
            fam.uptime.add_metric(labels, node.uptime)
        if node.health is not None:
            status = node.health.get("status")
            fam.health.add_metric(labels, {s: s == status for s in HEALTH})
            fam.health_failures.add_metric(labels, int(node.health.get("failures") or 0))
        if node.type == "worker" and node.pid is not None and node.node is None:
            read = self.stats.read(node.pid)
            if read is not None:
                fam.cpu.add_metric(labels, read[0])
                fam.rss.add_metric(labels, read[1])
                fam.started.add_metric(labels, read[2])

    def _restart_count(self, node: Node) -> int:
        # Read from events (a busy supervisor), a node has no count (incarnation 0):
        # the last one read stands, so the counter does not drop to 0 and back.
        if node.incarnation == 0 and node.restarts == 0:
            return self._restarts.get(node.path, 0)
        self._restarts[node.path] = node.restarts
        return node.restarts

    def _supervisor(self, fam: _Families, tree: str, node: Node, now: float) -> None:
        labels = [tree, node.path]
        if node.intensity is None or node.period is None:
            return
        fam.intensity.add_metric(labels, node.intensity)
        read = self.windows.get(node.path)
        if read is None or node.state not in ("running", "starting"):
            return
        charged = sum(1 for t in read() if t >= now - node.period)
        fam.headroom.add_metric(labels, max(0, node.intensity - charged))


class _Families:
    """One scrape's metric families."""

    def __init__(self) -> None:
        def gauge(name: str, doc: str, labels: list[str] = CHILD_LABELS) -> GaugeMetricFamily:
            return GaugeMetricFamily(PREFIX + name, doc, labels=labels)

        def counter(name: str, doc: str, labels: list[str] = CHILD_LABELS) -> CounterMetricFamily:
            return CounterMetricFamily(PREFIX + name, doc, labels=labels)

        sup = ["tree", "supervisor"]
        self.up_tree = gauge("tree_up", "1 while the tree runs (or starts)", ["tree"])
        self.up = gauge("child_up", "1 while the child has a live process (or runs, a supervisor)")
        self.ready = gauge("child_ready", "1 while the child is running and ready")
        self.state = StateSetMetricFamily(
            PREFIX + "child_state", "the child's state, as status shows it", labels=CHILD_LABELS
        )
        self.restarts = counter("child_restarts", "automatic restarts, as status counts them")
        self.exits = counter(
            "child_exits",
            "ends of the child's processes (exits, stops, failed starts) by reason",
            [*CHILD_LABELS, "reason"],
        )
        self.exits_all = counter(
            "child_process_exits",
            "ends of the child's processes whatever the reason; 0 from the child's start",
        )
        self.last_code = gauge(
            "child_last_exit_code", "the code of the child's last exit (-N: killed by signal N)"
        )
        self.uptime = gauge("child_uptime_seconds", "seconds since the current process started")
        self.started = gauge(
            "child_start_time_seconds", "when the current process started, seconds since the epoch"
        )
        self.cpu = counter(
            "child_cpu_seconds", "CPU seconds of the current process and its descendants"
        )
        self.rss = gauge(
            "child_resident_memory_bytes", "resident bytes of the process and its descendants"
        )
        self.health = StateSetMetricFamily(
            PREFIX + "child_health", "what the liveness probe says", labels=CHILD_LABELS
        )
        self.health_failures = gauge("child_health_failures", "liveness probes failed in a row")
        self.intensity = gauge("supervisor_intensity", "restarts allowed per period", sup)
        self.headroom = gauge(
            "supervisor_restart_headroom", "restarts left in the intensity window now", sup
        )

    def all(self) -> Iterator[Metric]:
        yield from (v for v in vars(self).values() if isinstance(v, Metric))


class MetricsServer:
    """The HTTP endpoint: prometheus_client's WSGI app over a registry of the tree's
    collector only at /metrics, the tree's read-only web page at / (`_web.py`), both
    served by a BoundedHTTPServer (two threads, bounded connections and timeouts,
    whatever a client does: `_http_server.py`). Binding happens here, so a taken
    port is an OSError at start."""

    def __init__(self, collector: TreeCollector, host: str, port: int) -> None:
        import ipaddress

        from prometheus_client import make_wsgi_app

        from ._http_server import BoundedHTTPServer
        from ._web import WebPage

        self.collector = collector
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:  # a name: "localhost" is the only one that means loopback
            loopback = host == "localhost"
        self.page = WebPage(collector.inspector, make_wsgi_app(self.registry), loopback=loopback)
        self._server = BoundedHTTPServer(self.page, host, port)
        self.host, self.port = host, int(self._server.server_address[1])

    @property
    def page_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    @property
    def url(self) -> str:
        return self.page_url + "metrics"

    def close(self) -> None:
        self._server.close()
        self.collector.close()
