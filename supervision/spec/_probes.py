"""Probes: how the shell asks a running child's service whether it answers.

A probe is one attempt, bounded by its `timeout`, repeated every `period`:
`TcpProbe` (the child's port accepts a connection), `HttpProbe` (a GET answers a
status in a set), `ExecProbe` (a command exits 0). `LogLine` is readiness only:
a line of the child's output matches. `Liveness` wraps a probe with how many
failures in a row make a child unhealthy. Validated when built; a bad field
raises SpecError naming the field (the spec that holds it adds the child).
See docs/health.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

from .._errors import SpecError

READY_PERIOD = 0.1  # seconds between readiness attempts, unless the probe says
LIVENESS_PERIOD = 10.0  # seconds between liveness attempts, unless the probe says
PROBE_TIMEOUT = 1.0  # seconds one attempt may take
HTTP_OK = range(200, 400)


def _seconds(value: Any, name: str, *, low: float = 0.0, strict: bool = True) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < low
        or (strict and value == low)
    ):
        relation = ">" if strict else ">="
        raise SpecError(None, name, value, f"expected seconds {relation} {low:g}")
    return float(value)


def _period(probe: Any, name: str) -> None:
    if probe.period is not None:
        object.__setattr__(probe, "period", _seconds(probe.period, f"{name}.period"))
    object.__setattr__(probe, "timeout", _seconds(probe.timeout, f"{name}.timeout"))


def check_root_program(argv: Sequence[str], as_root: Any, name: str, flag: str) -> None:
    """A program's root opt-in (`flag`): a bool; with it, a program that runs in `/`
    must not be named relative to a folder (the child's cwd it would have meant)."""
    if type(as_root) is not bool:
        raise SpecError(None, flag, as_root, "expected true or false")
    program, key = argv[0], flag.split(".")[-1]
    if as_root and "/" in program and not program.startswith("/"):
        raise SpecError(
            None,
            name,
            list(argv),
            f"{key} runs it as root in /, not in the child's cwd, so {program!r} would not "
            "be the child's file: give its absolute path (one root owns)",
        )


def _port(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise SpecError(None, name, value, "expected a TCP port number in 1-65535")
    return value


@dataclass(frozen=True)
class TcpProbe:
    """Ready (or alive) when `host`:`port` accepts a TCP connection.

    As readiness, the listening socket must belong to the child (its process or a
    descendant): a port another process holds is not ready, and says whose it is.
    """

    port: int
    host: str = "127.0.0.1"
    timeout: float = PROBE_TIMEOUT
    period: float | None = None  # None: READY_PERIOD as readiness, LIVENESS_PERIOD as liveness

    def __post_init__(self) -> None:
        _port(self.port, "tcp")
        if not isinstance(self.host, str) or not self.host or "\0" in self.host:
            raise SpecError(None, "tcp.host", self.host, "expected a host name or address")
        _period(self, "tcp")

    def __str__(self) -> str:
        return f"tcp {self.host}:{self.port}"


@dataclass(frozen=True)
class HttpProbe:
    """Ready (or alive) when a GET of `url` answers a status in `status` (200-399).

    Plain http only (a probe of a local service; for https use TcpProbe or an
    ExecProbe running curl). As readiness, the port must belong to the child.
    """

    url: str
    status: Iterable[int] = HTTP_OK
    timeout: float = PROBE_TIMEOUT
    period: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or "\0" in self.url or any(c in self.url for c in "\r\n"):
            raise SpecError(
                None, "http", self.url, 'expected a URL such as "http://127.0.0.1:8000/health"'
            )
        parts = urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:
            raise SpecError(
                None,
                "http",
                self.url,
                'expected an http:// URL with a host, such as "http://127.0.0.1:8000/health" '
                "(https is not probed: use tcp, or exec with curl)",
            )
        try:
            _port(parts.port or 80, "http")
        except ValueError:
            raise SpecError(None, "http", self.url, "the URL's port is not a number") from None
        status = self.status
        if isinstance(status, int) and not isinstance(status, bool):
            status = (status,)
        if isinstance(status, range):
            codes: range | tuple[int, ...] = status
        elif isinstance(status, Iterable) and not isinstance(status, str | bytes):
            codes = tuple(sorted(set(status)))
        else:
            codes = ()
        if not codes or not all(
            isinstance(c, int) and not isinstance(c, bool) and 100 <= c <= 599 for c in codes
        ):
            raise SpecError(
                None, "http.status", self.status, "expected HTTP status codes in 100-599"
            )
        object.__setattr__(self, "status", codes)
        _period(self, "http")

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80

    @property
    def target(self) -> str:
        """The request target: the URL's path and query."""
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def __str__(self) -> str:
        return f"http {self.url}"


@dataclass(frozen=True)
class ExecProbe:
    """Ready (or alive) when `argv` exits 0 within `timeout`: run as the child (its
    user's ids, its environment and working directory), in a process group of its own,
    killed with its group at the timeout.

    `as_root=True` (only for a child with `user` or `group`; systemd's `+` prefix)
    runs it as nannytree instead, with nannytree's own environment, in `/`: its
    program must then be a name on nannytree's PATH or an absolute path.
    """

    argv: Sequence[str]
    timeout: float = PROBE_TIMEOUT
    period: float | None = None
    as_root: bool = False

    def __post_init__(self) -> None:
        argv = self.argv
        if (
            isinstance(argv, str | bytes)
            or not isinstance(argv, Sequence)
            or not argv
            or not all(isinstance(a, str) and "\0" not in a for a in argv)
        ):
            raise SpecError(None, "exec", argv, 'expected an argv list such as ["pg_isready"]')
        object.__setattr__(self, "argv", tuple(argv))
        _period(self, "exec")
        check_root_program(self.argv, self.as_root, "exec", "exec.as_root")

    def __str__(self) -> str:
        return "exec " + " ".join(self.argv)


Stream: TypeAlias = Literal["stdout", "stderr", "both"]
STREAMS = ("stdout", "stderr", "both")


@dataclass(frozen=True)
class LogLine:
    """Ready once a line the child writes to `stream` matches `pattern` (re.search).

    Works whatever stdout/stderr say (the launcher tees the stream it reads).
    """

    pattern: str
    stream: Stream = "both"

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not self.pattern:
            raise SpecError(None, "log", self.pattern, "expected a regular expression")
        try:
            re.compile(self.pattern)
        except re.error as e:
            raise SpecError(
                None, "log", self.pattern, f"expected a valid regular expression ({e})"
            ) from None
        if self.stream not in STREAMS:
            raise SpecError(
                None, "log.stream", self.stream, f"expected one of {', '.join(STREAMS)}"
            )

    @property
    def streams(self) -> tuple[int, ...]:
        """The file descriptors read: 1 stdout, 2 stderr."""
        return {"stdout": (1,), "stderr": (2,), "both": (1, 2)}[self.stream]

    def __str__(self) -> str:
        return f"log {self.pattern!r}"


Probe: TypeAlias = TcpProbe | HttpProbe | ExecProbe
PROBES = (TcpProbe, HttpProbe, ExecProbe)


@dataclass(frozen=True)
class Liveness:
    """A running, ready child is probed every `probe.period` seconds (default 10)
    from `initial_delay` seconds after it became ready; `failures` failed probes in
    a row (default 3) stop it with the abnormal reason `unhealthy`, and its
    supervisor restarts it by its strategy, counted in the restart intensity."""

    probe: Probe
    failures: int = 3
    initial_delay: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.probe, PROBES):
            raise SpecError(
                None,
                "liveness.probe",
                self.probe,
                "expected TcpProbe(...), HttpProbe(...) or ExecProbe(...)",
            )
        f = self.failures
        if isinstance(f, bool) or not isinstance(f, int) or f < 1:
            raise SpecError(None, "liveness.failures", f, "expected an integer >= 1")
        object.__setattr__(
            self,
            "initial_delay",
            _seconds(self.initial_delay, "liveness.initial_delay", strict=False),
        )

    @property
    def period(self) -> float:
        return self.probe.period if self.probe.period is not None else LIVENESS_PERIOD

    @property
    def detection(self) -> float:
        """Seconds from a service going silent to the stop of its child, at most: the
        next probe begins within a period, and each failing one takes its timeout (the
        one after begins a period after it began, or at once if it took longer)."""
        step = max(self.period, self.probe.timeout)
        return self.period + (self.failures - 1) * step + self.probe.timeout


def ready_period(probe: Probe) -> float:
    return probe.period if probe.period is not None else READY_PERIOD


Verdict: TypeAlias = Literal["healthy", "unhealthy", "failing", "stop"]


@dataclass
class LivenessCount:
    """Counts one incarnation's liveness probes: what each result means.

    `observe` returns what changed: "healthy" (a pass, the first since the start
    or after failing), "unhealthy" (a failure after a pass, or the first probe
    failing), "failing" (one more failure in a row, below the threshold), "stop"
    (`threshold` failures in a row: stop the child, reason unhealthy), or None
    (nothing new: a pass after a pass).
    """

    threshold: int
    failures: int = 0
    status: Literal["unknown", "healthy", "failing"] = "unknown"
    error: str = ""

    def observe(self, ok: bool, error: str = "") -> Verdict | None:
        if ok:
            was, self.status, self.failures, self.error = self.status, "healthy", 0, ""
            return None if was == "healthy" else "healthy"
        self.failures += 1
        self.error = error
        first = self.status != "failing"
        self.status = "failing"
        if self.failures >= self.threshold:
            return "stop"
        return "unhealthy" if first else "failing"
