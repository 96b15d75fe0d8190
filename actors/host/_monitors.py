"""What `nannytree run` offers to watch it from outside: the event log on disk
(--event-log) and the Prometheus endpoint (--metrics). Both open before the tree
starts, so a path that cannot be written or a port that cannot be bound stops the
run before any child does. docs/monitoring.md describes both."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .. import EventLog, Tree
    from .._operate._snapshot import TreeInspector
    from ._journal import EventJournal
    from ._metrics import MetricsServer


class Monitors:
    """The run's event journal and metrics server, either of which may be absent."""

    def __init__(self, journal: EventJournal | None, metrics: MetricsServer | None) -> None:
        self.journal = journal
        self.metrics = metrics

    @classmethod
    def open(
        cls,
        inspector: TreeInspector,
        log: EventLog,
        *,
        metrics: tuple[str, int] | None = None,
        event_log: Path | None = None,
        max_bytes: int | None = None,
        backups: int | None = None,
    ) -> Monitors:
        """Opens what is asked for (RunOptions' fields of the same names); OSError or
        ValueError saying what and why."""
        journal = server = None
        if event_log is not None:
            journal = open_journal(event_log, inspector, max_bytes, backups)
            journal.follow(log)
        try:
            if metrics is not None:
                server = serve_metrics(metrics, inspector, log)
        except BaseException:
            if journal is not None:
                journal.close()
            raise
        return cls(journal, server)

    def info(self) -> dict[str, Any]:
        """For `hello`: where the metrics and the event log are."""
        found: dict[str, Any] = {}
        if self.metrics is not None:
            found["metrics"] = self.metrics.url
            found["web"] = self.metrics.page_url
        if self.journal is not None:
            found["event_log"] = str(self.journal.path)
        return found

    def announce(self) -> list[str]:
        lines = []
        if self.metrics is not None:
            lines.append(f"metrics: {self.metrics.url}")
            lines.append(f"web page: {self.metrics.page_url} (read-only)")
        if self.journal is not None:
            lines.append(f"event log: {self.journal.path}")
        return lines

    def watch(self, tree: Tree) -> None:
        """The tree about to start: its supervisors' restart windows, as each starts."""
        if self.metrics is not None:
            self.metrics.collector.windows = tree.context.restart_windows

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        if self.journal is not None:
            self.journal.close()


def open_journal(
    path: Path, inspector: TreeInspector, max_bytes: int | None, backups: int | None
) -> EventJournal:
    from ._journal import BACKUPS, MAX_BYTES, EventJournal

    try:
        return EventJournal(
            path,
            MAX_BYTES if max_bytes is None else max_bytes,
            BACKUPS if backups is None else backups,
            record=inspector.record,
        )
    except OSError as e:
        raise OSError(
            f"cannot write the event log {path}: {e.strerror or e}; "
            "pass --event-log with a writable path"
        ) from None


def serve_metrics(
    address: tuple[str, int], inspector: TreeInspector, log: EventLog
) -> MetricsServer:
    from ._metrics import MetricsServer, TreeCollector

    host, port = address
    collector = TreeCollector(inspector, log)
    try:
        return MetricsServer(collector, host, port)
    except OSError as e:
        collector.close()
        raise OSError(
            f"cannot serve metrics on {host}:{port}: {e.strerror or e}; "
            "pass --metrics with a free port (or 0 for any)"
        ) from None
