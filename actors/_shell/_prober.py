"""Who runs a tree's probes: one thread per tree, one selector, started on first use.

A TCP probe is a non-blocking connect; an HTTP probe a connect, one GET and the
status line of the answer (at most HTTP_LIMIT bytes are read: a child's answer
is untrusted); an exec probe a process in a session of its own, run as the child
(`_run_as.py`), watched by its pidfd and killed (its whole group) at the timeout.
Each attempt ends in a callback on this thread with (ok, error); the owner decides
what it means.

Liveness probes are scheduled here too (`watch`), and counted here, so a healthy
child costs its worker no message at all: the worker hears only of a change
(supervision.LivenessCount). Why here and not in the launcher: docs/health.md.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import logging
import os
import selectors
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from supervision import ExecProbe, HttpProbe, Liveness, TcpProbe
from supervision.spec._probes import LivenessCount, Probe, Verdict

from ._run_as import RunAs

log = logging.getLogger("nannytree")

HTTP_LIMIT = 4096  # bytes of an answer read, at most: the status line is in them
OUTPUT_LIMIT = 2048  # bytes of an exec probe's output kept for its error

Done = Callable[[bool, str], None]


class Attempt:
    """One probe attempt in flight; `cancel()` drops it (its callback never comes)."""

    def __init__(self, probe: Probe, site: RunAs, done: Done, deadline: float) -> None:
        self.probe = probe
        self.site = site
        self.done = done
        self.deadline = deadline
        self.cancelled = False
        self.finished = False
        self.sock: socket.socket | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.pidfd: int | None = None
        self.answer = bytearray()
        self.fds: list[int] = []

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class Watch:
    """A liveness watch of one incarnation: its schedule and its count."""

    liveness: Liveness
    site: RunAs
    on_change: Callable[[Verdict, LivenessCount], None]
    count: LivenessCount
    attempt: Attempt | None = None
    stopped: bool = False
    due: float = 0.0
    key: object = field(default=None)


class Prober:
    def __init__(self) -> None:
        # The selector and the wake pipe are made with the thread, on first use: a
        # tree without probes holds no fd for them.
        self._sel: selectors.BaseSelector | None = None
        self._lock = threading.Lock()
        self._incoming: list[Attempt | Watch] = []
        self._wake_r = self._wake_w = -1
        self._thread: threading.Thread | None = None
        self._closed = False
        self._seq = itertools.count()
        # (when, seq, what): an attempt's deadline, or a watch's next probe.
        self._timers: list[tuple[float, int, Attempt | Watch]] = []
        self._addresses: dict[tuple[str, int], tuple[Any, ...]] = {}
        self._running: set[Attempt] = set()

    # -- the API (any thread) -----------------------------------------------------------

    def attempt(self, probe: Probe, site: RunAs, done: Done) -> Attempt:
        """Try `probe` once; `done(ok, error)` on the prober's thread."""
        attempt = Attempt(probe, site, done, 0.0)
        self._submit(attempt)
        return attempt

    def watch(
        self,
        liveness: Liveness,
        site: RunAs,
        on_change: Callable[[Verdict, LivenessCount], None],
    ) -> Watch:
        """Probe every period from `initial_delay` on; `on_change` (on the prober's
        thread) only when the count says something new. `unwatch` ends it."""
        watch = Watch(liveness, site, on_change, LivenessCount(liveness.failures))
        watch.due = time.monotonic() + liveness.initial_delay
        self._submit(watch)
        return watch

    def unwatch(self, watch: Watch) -> None:
        watch.stopped = True
        if watch.attempt is not None:
            watch.attempt.cancel()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _submit(self, item: Attempt | Watch) -> None:
        with self._lock:
            if self._closed:
                return
            self._incoming.append(item)
            if self._thread is None:
                self._sel = selectors.DefaultSelector()
                self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
                self._sel.register(self._wake_r, selectors.EVENT_READ, None)
                self._thread = threading.Thread(
                    target=self._run, name="nannytree-probes", daemon=True
                )
                self._thread.start()
        self._wake()

    def _wake(self) -> None:
        # Under the lock: the thread closes the pipe under it too, so a late wake
        # never writes to an fd number that has been closed (and maybe reused).
        with self._lock, contextlib.suppress(OSError):
            if self._wake_w >= 0:
                os.write(self._wake_w, b"x")

    # -- the thread ---------------------------------------------------------------------

    @property
    def _selector(self) -> selectors.BaseSelector:
        assert self._sel is not None  # made with the thread, which alone uses it
        return self._sel

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed:
                        break
                    incoming, self._incoming = self._incoming, []
                now = time.monotonic()
                for item in incoming:
                    if isinstance(item, Watch):
                        self._at(item.due, item)
                    else:
                        self._begin(item, now)
                self._fire_timers()
                timeout = None
                if self._timers:
                    timeout = max(0.0, self._timers[0][0] - time.monotonic())
                for key, mask in self._selector.select(timeout):
                    if key.data is None:
                        with contextlib.suppress(OSError):
                            while os.read(self._wake_r, 4096):
                                pass
                        continue
                    key.data(mask)
        except Exception:
            log.exception("nannytree: the probe thread failed")
        finally:
            for attempt in list(self._running):
                self._end(attempt, False, "the tree stopped", quiet=True)
            self._selector.close()
            with self._lock:
                pipe, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
                for fd in pipe:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _at(self, when: float, item: Attempt | Watch) -> None:
        heapq.heappush(self._timers, (when, next(self._seq), item))

    def _fire_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _, _, item = heapq.heappop(self._timers)
            if isinstance(item, Watch):
                self._probe_watch(item, now)
            elif not item.finished:
                self._end(item, False, f"no answer within {item.probe.timeout:g} s")

    def _probe_watch(self, watch: Watch, now: float) -> None:
        if watch.stopped:
            return

        def done(ok: bool, error: str) -> None:
            watch.attempt = None
            if watch.stopped:
                return
            verdict = watch.count.observe(ok, error)
            if verdict is not None:
                try:
                    watch.on_change(verdict, watch.count)
                except Exception:
                    log.exception("nannytree: a liveness callback failed")
            if verdict != "stop":
                self._at(now + watch.liveness.period, watch)

        attempt = Attempt(watch.liveness.probe, watch.site, done, 0.0)
        watch.attempt = attempt
        self._begin(attempt, now)

    def _begin(self, attempt: Attempt, now: float) -> None:
        if attempt.cancelled:
            return
        attempt.deadline = now + attempt.probe.timeout
        self._running.add(attempt)
        self._at(attempt.deadline, attempt)
        probe = attempt.probe
        try:
            if isinstance(probe, ExecProbe):
                self._begin_exec(attempt, probe)
            else:
                self._begin_connect(attempt, probe)
        except OSError as e:
            self._end(attempt, False, _os_error(e))

    def _end(self, attempt: Attempt, ok: bool, error: str, *, quiet: bool = False) -> None:
        if attempt.finished:
            return
        attempt.finished = True
        self._running.discard(attempt)
        for fd in attempt.fds:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(fd)
        attempt.fds.clear()
        if attempt.sock is not None:
            attempt.sock.close()
        if attempt.proc is not None:
            self._reap(attempt)
        if not quiet and not attempt.cancelled:
            try:
                attempt.done(ok, error)
            except Exception:
                log.exception("nannytree: a probe callback failed")

    def _listen(self, attempt: Attempt, fd: int, events: int, fn: Callable[[int], None]) -> None:
        with contextlib.suppress(KeyError):
            self._selector.unregister(fd)
        self._selector.register(fd, events, fn)
        if fd not in attempt.fds:
            attempt.fds.append(fd)

    # -- tcp and http -------------------------------------------------------------------

    def _address(self, host: str, port: int) -> tuple[Any, ...]:
        key = (host, port)
        found = self._addresses.get(key)
        if found is None:
            # Resolved once per host and port: probes are of local services, and a
            # resolver that blocks would hold every probe of the tree.
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )[0]
            found = self._addresses[key] = (family, kind, proto, address)
        return found

    def _begin_connect(self, attempt: Attempt, probe: TcpProbe | HttpProbe) -> None:
        try:
            family, kind, proto, address = self._address(probe.host, probe.port)
        except OSError as e:
            self._end(attempt, False, f"cannot resolve {probe.host!r}: {e}")
            return
        sock = socket.socket(family, kind, proto)
        attempt.sock = sock
        sock.setblocking(False)
        code = sock.connect_ex(address)
        if code not in (0, errno.EINPROGRESS):
            self._end(attempt, False, _connect_error(code, probe.port))
            return
        self._listen(
            attempt, sock.fileno(), selectors.EVENT_WRITE, lambda m: self._connected(attempt)
        )

    def _connected(self, attempt: Attempt) -> None:
        sock, probe = attempt.sock, attempt.probe
        assert sock is not None and isinstance(probe, TcpProbe | HttpProbe)
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._end(attempt, False, _connect_error(code, probe.port))
            return
        if isinstance(probe, TcpProbe):
            self._end(attempt, True, "")
            return
        host = probe.host if ":" not in probe.host else f"[{probe.host}]"
        request = (
            f"GET {probe.target} HTTP/1.1\r\nHost: {host}:{probe.port}\r\n"
            "User-Agent: nannytree-probe\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        ).encode("latin-1", "replace")
        try:
            sent = sock.send(request)  # a few hundred bytes: a fresh socket takes them
        except OSError as e:
            self._end(attempt, False, _os_error(e))
            return
        if sent != len(request):
            self._end(attempt, False, "could not send the request")
            return
        self._listen(attempt, sock.fileno(), selectors.EVENT_READ, lambda m: self._answer(attempt))

    def _answer(self, attempt: Attempt) -> None:
        sock, probe = attempt.sock, attempt.probe
        assert sock is not None and isinstance(probe, HttpProbe)
        try:
            data = sock.recv(HTTP_LIMIT - len(attempt.answer))
        except BlockingIOError:
            return
        except OSError as e:
            self._end(attempt, False, _os_error(e))
            return
        attempt.answer += data
        line, newline, _ = bytes(attempt.answer).partition(b"\r\n")
        if not newline and data and len(attempt.answer) < HTTP_LIMIT:
            return  # the status line is not complete yet
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            what = "closed the connection without an answer" if not line else "no HTTP answer"
            self._end(attempt, False, what)
            return
        status = int(parts[1])
        if status in probe.status:
            self._end(attempt, True, "")
        else:
            self._end(attempt, False, f"answered {status}")

    # -- exec ---------------------------------------------------------------------------

    def _begin_exec(self, attempt: Attempt, probe: ExecProbe) -> None:
        if attempt.site.error:
            self._end(attempt, False, f"cannot run {probe.argv[0]!r}: {attempt.site.error}")
            return
        try:
            proc = subprocess.Popen(
                probe.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its group is killed at the timeout
                close_fds=True,
                **attempt.site.popen(),  # as the child: its ids, env and cwd
            )
        except OSError as e:
            self._end(attempt, False, f"cannot run {probe.argv[0]!r}: {_os_error(e)}")
            return
        attempt.proc = proc
        assert proc.stdout is not None
        out = proc.stdout.fileno()
        os.set_blocking(out, False)
        self._listen(attempt, out, selectors.EVENT_READ, lambda m: self._exec_output(attempt))
        attempt.pidfd = os.pidfd_open(proc.pid)
        self._listen(
            attempt, attempt.pidfd, selectors.EVENT_READ, lambda m: self._exec_exited(attempt)
        )

    def _exec_output(self, attempt: Attempt) -> None:
        proc = attempt.proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(fd)
            return
        attempt.answer += data
        del attempt.answer[:-OUTPUT_LIMIT]  # bounded: a probe may say a lot

    def _exec_exited(self, attempt: Attempt) -> None:
        proc = attempt.proc
        assert proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            # Unreaped, its pid still names its group: what it left there goes too.
            os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
        with contextlib.suppress(OSError):
            if proc.stdout is not None:
                attempt.answer += os.read(proc.stdout.fileno(), OUTPUT_LIMIT)
        if code == 0:
            self._end(attempt, True, "")
            return
        said = bytes(attempt.answer[-OUTPUT_LIMIT:]).decode(errors="replace").strip()
        how = f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
        self._end(attempt, False, f"{how}: {said}" if said else how)

    def _reap(self, attempt: Attempt) -> None:
        proc = attempt.proc
        assert proc is not None
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the probe and whatever it started
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(1.0)
        if proc.stdout is not None:
            proc.stdout.close()
        if attempt.pidfd is not None:
            os.close(attempt.pidfd)
            attempt.pidfd = None


def _connect_error(code: int, port: int) -> str:
    if code == errno.ECONNREFUSED:
        return f"nothing listens on port {port} (connection refused)"
    return f"cannot connect to port {port}: {os.strerror(code)}"


def _os_error(e: OSError) -> str:
    return e.strerror or str(e)
