"""The run's read-only web page, served beside its metrics (`run --metrics`): a WSGI
app for the BoundedHTTPServer (`_http_server.py`), so the page costs what the
metrics do whatever a browser does. docs/monitoring.md lists what it serves:

    /                the tree: states, pids, restarts, health, last exits; the events
    /child?path=P    one worker: its detail, last exits and the tail of its output
    /events?after=N  the events after sequence number N, as JSON (the page polls it)
    /static/...      the page's script and style (no inline script: the CSP forbids it)
    /metrics         the Prometheus text

HTML comes from Jinja2 templates (actors/host/templates) with autoescape on, and
everything a child wrote is also made printable (terminal escapes shown as `\\x1b`),
so neither markup nor escape sequences from a child act in a browser. There are no
control actions: the HTTP port has no peer credentials to check as the control
socket does (SO_PEERCRED), so the page only reads. On a loopback address the page
answers only to a loopback Host header (a DNS-rebinding page cannot read it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import jinja2

from .._operate._find import TIMEOUTS
from .._operate._records import EventRecord, Node, health_text
from .._operate._text import printable
from ..cli._plain import fmt_duration, state_text
from ._closeup import CloseUp

if TYPE_CHECKING:
    from supervision import Event

    from .. import EventLog
    from .._operate._snapshot import TreeInspector

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

PAGE_EVENTS = 50  # events on a freshly loaded page
POLL_EVENTS = 100  # at most per /events answer: a poll's cost is bounded
LOG_LINES = 40  # lines of a child's output on its page
LOG_BYTES = 8 * 1024  # and at most this many bytes of them
POLL_SECONDS = 1.0  # how often the page asks for new events
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
STATIC = {"page.js": "text/javascript", "page.css": "text/css"}
HEADERS = [
    # Scripts only from this server's /static: a child's text can never run as one.
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]


class RecentEvents:
    """The tree's events as the page shows them (escaped lines), numbered by their
    place in the tree's event log from 1: read from the log at each request, so
    the page holds nothing of its own and no thread (EventLog.since)."""

    def __init__(self, log: EventLog, record: Callable[[Event], EventRecord]) -> None:
        self._log = log
        self._record = record

    def after(self, seq: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """Up to `limit` events numbered above `seq` (those the log still keeps), the
        first ones first, and the number the next poll should give. A `seq` beyond
        the log's end (a page of an earlier run) gets none, and the end."""
        events, end = self._log.since(max(seq, 0), 0)
        first = end - len(events)  # the log's index of events[0] (it may have dropped some)
        kept = events[:limit]
        return [self._row(first + i + 1, e) for i, e in enumerate(kept)], first + len(kept)

    def last(self, count: int) -> tuple[list[dict[str, Any]], int]:
        """The last `count` events, and the number of the last one."""
        _, end = self._log.since(2**62, 0)  # no event: the end, at once
        return self.after(max(0, end - count), count)

    def _row(self, seq: int, event: Event) -> dict[str, Any]:
        record = self._record(event)
        line = str(record)  # escaped by EventRecord
        return {"seq": seq, "line": line, "abnormal": record.abnormal, "who": record.who}


def _row(depth: int, node: Node) -> dict[str, Any]:
    """One line of the tree table, every text in it printable."""
    return {
        "depth": depth,
        "id": printable(node.id),
        "path": node.path,
        "supervisor": node.type == "supervisor",
        "strategy": node.strategy or "",
        "state": printable(state_text(node)),
        "state_class": node.state if node.state.isalpha() else "unknown",
        "pid": node.pid,
        "uptime": fmt_duration(node.uptime),
        "restarts": node.restarts,
        "health": printable(health_text(node.health)),
        "failing": (node.health or {}).get("status") == "failing",
        "last_exit": printable(node.last_exit or ""),
        "abnormal": not node.last_exit_normal,
        "status": printable(node.status),
    }


def _tail(text: str) -> str:
    lines = text.splitlines()[-LOG_LINES:]
    return printable("\n".join(lines)[-LOG_BYTES:], lines=True)


class WebPage:
    """The page's WSGI app; `metrics` answers /metrics. `loopback`: the server is
    bound to a loopback address, so the page answers only loopback Host headers."""

    def __init__(self, inspector: TreeInspector, metrics: App, *, loopback: bool) -> None:
        self.inspector = inspector
        self.metrics = metrics
        self.loopback = loopback
        self.events = RecentEvents(inspector.log, inspector.record)
        self.closeup = CloseUp(inspector, inspector.log, _call)
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("actors.host", "templates"),
            autoescape=True,  # every value, in every template
            undefined=jinja2.StrictUndefined,
        )

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return self.metrics(environ, start_response)
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", "read-only: GET or HEAD\n")
        if self.loopback and not _loopback_host(environ.get("HTTP_HOST", "")):
            return _answer(
                start_response,
                "403 Forbidden",
                "this page answers on a loopback address only (Host: 127.0.0.1 or localhost)\n",
            )
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if path == "/":
            part = query.get("part", [""])[0]
            return _html(start_response, self._tree_page(part == "tree"))
        if path == "/child":
            return self._child(start_response, query.get("path", [""])[0])
        if path == "/events":
            try:
                after = int(query.get("after", ["0"])[0])
            except ValueError:
                return _answer(start_response, "400 Bad Request", "after: a whole number\n")
            found, last = self.events.after(after, POLL_EVENTS)
            body = json.dumps({"events": found, "next": last})
            return _answer(start_response, "200 OK", body, "application/json")
        if path.startswith("/static/") and path[len("/static/") :] in STATIC:
            name = path[len("/static/") :]
            source = self.templates.loader.get_source(self.templates, name)[0]  # type: ignore[union-attr]
            return _answer(start_response, "200 OK", source, STATIC[name])
        return _answer(start_response, "404 Not Found", "no such page; the tree is at /\n")

    def _tree_page(self, only_table: bool) -> str:
        root = self.inspector.snapshot(stats=False)
        rows = [_row(depth, node) for depth, node in root.walk()]
        if only_table:
            return self.templates.get_template("tree_table.html").render(rows=rows)
        events, last = self.events.last(PAGE_EVENTS)
        return self.templates.get_template("tree.html").render(
            tree=printable(root.id),
            state=root.state,
            strategy=root.strategy or "",
            intensity=root.intensity,
            period=root.period,
            uptime=fmt_duration(root.uptime),
            rows=rows,
            events=events,
            next=last,
            poll_ms=int(POLL_SECONDS * 1000),
        )

    def _child(self, start_response: Callable[..., Any], path: str) -> Iterable[bytes]:
        from supervision import ChildNotFound

        tree = printable(self.inspector.spec.id)
        try:
            detail = self.closeup.detail(path)
        except (ChildNotFound, LookupError, ValueError) as e:
            text = f"no worker {printable(path)!r} in tree {tree!r}: {printable(e)}"
            page = self.templates.get_template("child.html").render(
                tree=tree, path=printable(path), missing=text
            )
            return _html(start_response, page, "404 Not Found")
        except TIMEOUTS:
            detail = None
        outputs = []
        if detail is not None:
            outputs = [self._output(path, stream) for stream in ("stderr", "stdout")]
            if outputs[0]["file"] and outputs[0]["file"] == outputs[1]["file"]:
                outputs = [{**outputs[0], "stream": "output (stderr and stdout)"}]  # one file
        exits = []
        for record in (detail or {}).get("exits", []):
            exits.append(str(EventRecord.from_dict(record)))  # escaped by EventRecord
        page = self.templates.get_template("child.html").render(
            tree=tree,
            path=printable(path),
            missing=None,
            busy=detail is None,
            detail=_detail_view(detail) if detail is not None else {},
            exits=exits,
            outputs=outputs,
        )
        return _html(start_response, page)

    def _output(self, path: str, stream: str) -> dict[str, str]:
        """The tail of one of a worker's streams, or why there is none to show."""
        try:
            answer = self.closeup.logs(self.inspector.find(path), {"stream": stream})
        except (LookupError, ValueError) as e:
            return {"stream": stream, "text": "", "note": printable(e), "file": ""}
        except TIMEOUTS:
            note = "its supervisor is busy; reload"
            return {"stream": stream, "text": "", "note": note, "file": ""}
        where = "its capture buffer" if answer.get("capture") else str(answer.get("path", ""))
        if answer.get("gone"):
            where += " (moved or deleted)"
        text = _tail(str(answer.get("message", "")))
        return {
            "stream": stream,
            "text": text,
            "note": printable(where),
            "file": answer.get("path", ""),
        }


def _detail_view(detail: dict[str, Any]) -> dict[str, str]:
    """A worker's detail (CloseUp.detail) as the child page's rows, each printable."""
    limit = detail.get("restart_limit")
    rows = {
        "state": detail.get("state"),
        "pid": detail.get("pid") if detail.get("pid") is not None else "-",
        "uptime": fmt_duration(detail.get("uptime")),
        "restarts": detail.get("restarts"),
        "restart": detail.get("restart"),
        "restart limit": f"{limit['intensity']} in {limit['period']:g}s" if limit else "",
        "runs": detail.get("runs"),
        "output": detail.get("output"),
        "status": detail.get("status") or "",
        "health": health_text(detail.get("health")),
        "node": detail.get("node_name") or detail.get("node") or "",
        "note": detail.get("note", ""),
    }
    return {k: printable(v) for k, v in rows.items() if v not in ("", None)}


def _call(target: Any, method: str, *args: Any, timeout: float | None = None) -> Any:
    return target.call(method, *args, timeout=timeout)


def _loopback_host(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name.lower() in LOOPBACK_HOSTS


def _html(start_response: Callable[..., Any], page: str, status: str = "200 OK") -> Iterable[bytes]:
    return _answer(start_response, status, page, "text/html; charset=utf-8")


def _answer(
    start_response: Callable[..., Any],
    status: str,
    body: str,
    kind: str = "text/plain; charset=utf-8",
) -> Iterable[bytes]:
    start_response(status, [("Content-Type", kind), *HEADERS])
    return [body.encode()]
