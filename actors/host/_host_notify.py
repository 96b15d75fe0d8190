"""`nannytree run` under a service manager: the sending side of sd_notify.

When NOTIFY_SOCKET is set (systemd's Type=notify, docs/systemd.md), `run` says
READY=1 once the tree has started, STATUS= with a short summary of it whenever
its events change it ("9 children running", "restarting web"), STOPPING=1 when it
stops, and, when WATCHDOG_USEC is set for this process, WATCHDOG=1 at half that
period. The receiving side, for children, is actors/_shell/_sd_notify.py.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from .._operate._records import Node

SUMMARY_PERIOD = 0.5  # seconds: STATUS= is summed up again at most this often
STATUS_LIMIT = 200  # characters of a STATUS= line
# What a child is doing instead of running, as STATUS= says it (first found first).
_BUSY = {
    "restarting": "restarting",
    "backoff": "restarting",
    "starting": "starting",
    "stopping": "stopping",
    "unreachable": "unreachable",
    "pending": "waiting for a node",
}


def notify_address(environ: Mapping[str, str]) -> str | None:
    """The socket NOTIFY_SOCKET names ("@name" is Linux's abstract namespace)."""
    path = environ.get("NOTIFY_SOCKET", "")
    if not path or not (path.startswith("/") or path.startswith("@")):
        return None  # unset, or an address family (vsock) we do not speak
    return "\0" + path[1:] if path.startswith("@") else path


def watchdog_period(environ: Mapping[str, str], pid: int) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WATCHDOG_USEC), None without one or
    when WATCHDOG_PID names another process (it was meant for our parent)."""
    owner = environ.get("WATCHDOG_PID", "")
    if owner and owner != str(pid):
        return None
    try:
        usec = int(environ.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    return usec / 2e6 if usec > 0 else None


def summary(root: Node) -> str:
    """A tree in a few words: what is not running yet first, else how many run."""
    workers = [n for _, n in root.walk() if n.type == "worker"]
    busy = [n for n in workers if n.state in _BUSY]
    if root.state == "stopped":
        return "stopped"
    if busy:
        doing = _BUSY[busy[0].state]
        alike = [n for n in busy if _BUSY[n.state] == doing]
        names = ", ".join(n.path.split("/", 1)[-1] for n in alike[:3])
        more = f" and {len(alike) - 3} more" if len(alike) > 3 else ""
        return f"{doing} {names}{more}"
    running = sum(1 for n in workers if n.state in ("running", "paused"))
    text = f"{running} {'child' if running == 1 else 'children'} running"
    failed = [n.path.split("/", 1)[-1] for n in workers if n.state == "failed"]
    stopped = len(workers) - running - len(failed)
    if failed:  # its restart_limit gave up, or an optional child could not start: systemd's
        # `failed`, worth a word of its own
        more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
        text += f", {len(failed)} failed ({', '.join(failed[:3])}{more})"
    return text + (f", {stopped} stopped" if stopped else "")


class HostNotifier:
    """Speaks sd_notify to the service manager that started us; quiet if none did."""

    def __init__(self, address: str, watchdog: float | None) -> None:
        self._address = address
        self._watchdog = watchdog
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._done = threading.Event()
        self._summary: Callable[[], str] | None = None
        self._last = ""
        self._thread = threading.Thread(target=self._loop, name="nannytree-sd-notify", daemon=True)
        self._thread.start()

    @classmethod
    def from_environ(cls) -> HostNotifier | None:
        """From NOTIFY_SOCKET and WATCHDOG_USEC, which are then taken out of our
        environment (as sd_notify's unset_environment): they are ours, not the
        children's, who would otherwise speak for the whole service."""
        address = notify_address(os.environ)
        watchdog = watchdog_period(os.environ, os.getpid())
        for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
            os.environ.pop(name, None)
        return None if address is None else cls(address, watchdog)

    def send(self, fields: Iterable[str]) -> bool:
        """One datagram of `KEY=value` lines; False if the manager is gone."""
        data = "\n".join(fields).encode(errors="replace")
        with self._lock:
            try:
                self._sock.sendto(data, self._address)
            except OSError:
                return False
        return True

    def ready(self, summary: Callable[[], str]) -> None:
        """The tree has started: READY=1 with its summary, then STATUS= as it changes."""
        text = _line(summary())
        self._last = text
        self.send(["READY=1", f"STATUS={text}", f"MAINPID={os.getpid()}"])
        self._summary = summary

    def changed(self, *_: object) -> None:
        """Something happened in the tree: sum it up again (at most every SUMMARY_PERIOD)."""
        self._changed.set()

    def stopping(self, why: str) -> None:
        self._summary = None
        self.send(["STOPPING=1", f"STATUS={_line(f'stopping ({why})')}"])

    def close(self) -> None:
        self._done.set()
        self._changed.set()
        self._thread.join(5.0)
        with self._lock:
            self._sock.close()

    def _loop(self) -> None:
        period = self._watchdog
        ping = time.monotonic()
        while not self._done.is_set():
            now = time.monotonic()
            if period is not None and now >= ping:
                self.send(["WATCHDOG=1"])
                ping = now + period
            if not self._changed.wait(ping - now if period is not None else None):
                continue
            gather = min(SUMMARY_PERIOD, period) if period is not None else SUMMARY_PERIOD
            if self._done.wait(gather):  # a burst of events: one STATUS= for all
                return
            self._changed.clear()
            self._sum_up()

    def _sum_up(self) -> None:
        summary = self._summary
        if summary is None:
            return
        try:
            text = _line(summary())
        except Exception:  # a tree being torn down: nothing to sum up
            return
        if text != self._last:
            self._last = text
            self.send([f"STATUS={text}"])


def _line(text: str) -> str:
    """One line, bounded: what a manager shows in `systemctl status`."""
    flat = " ".join(text.split())
    return flat[:STATUS_LIMIT]
