"""The web page `nannytree run --metrics` serves beside its metrics, as a browser
shows it: headless Chromium (Debian's `chromium`, as tests/docs/test_site.py uses;
absent, the browser tests skip unless NANNYTREE_REQUIRE_DOCS=1, as CI sets) driven
over the DevTools protocol on a pipe, so the page's script runs and its live
updates are read from the DOM. A child that prints `<script>`, an `<img onerror>` and
terminal escapes has them shown as inert text, on the tree page and its own.
The HTTP side (routes, headers, the Host check) is read with urllib."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import EventLog
from actors._operate._records import EventRecord
from actors.host._web import RecentEvents, _loopback_host
from supervision import Event, EventKind
from tests.cli.test_commands import DEADLINE, Proc, _env, cli, pids, status
from tests.docs.test_site import CHROMIUM, FLAGS, REQUIRED
from tests.support import living_descendants

# What a hostile child writes: markup that would run, and a terminal's escapes
# (a title change, a colour) that must show as text.
PAYLOAD = (
    r"<script>window.pwned=1</script><img src=x onerror=window.pwned=2>\033]0;pwned\007\033[31mred"
)
TOML_PAYLOAD = PAYLOAD.replace("\\", "\\\\")  # a backslash, in a TOML basic string
TREE = f"""
[supervisor]
id = "web"
intensity = 10
period = 60

[[supervisor.children]]
id = "calm"
command = ["sleep", "600"]

[[supervisor.children]]
id = "evil"
command = ["sh", "-c", "printf '{TOML_PAYLOAD}\\\\n' >&2; exec sleep 600"]
stderr = "capture"
"""

needs_browser = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED,
    reason="no chromium (apt-get install chromium); NANNYTREE_REQUIRE_DOCS=1 makes this a failure",
)


@contextlib.contextmanager
def running(tmp_path: Path) -> Iterator[tuple[Proc, str, dict[str, str]]]:
    """`nannytree run --metrics 0` of TREE: the run, its page's URL, its socket, env."""
    env = _env(tmp_path)
    (tmp_path / "web.toml").write_text(TREE)
    sock = str(tmp_path / "w.sock")
    args = ["--socket", sock, "--plain", "--metrics", "0"]
    with Proc("run", str(tmp_path / "web.toml"), *args, env=env) as run:
        url = run.expect(r"^nannytree: web page: (http://\S+/) \(read-only\)$")[1]
        run.expect(r"web/evil child_started")
        yield run, url, {**env, "SOCK": sock}


class Browser:
    """Headless Chromium on the DevTools protocol over a pipe (--remote-debugging-pipe:
    it reads commands on fd 3 and writes answers on fd 4, each a JSON text ended by
    NUL). One page; `js` evaluates an expression in it."""

    def __init__(self) -> None:
        if CHROMIUM is None:
            pytest.fail("chromium is not installed (apt-get install chromium); it is required")
        self.profile = tempfile.TemporaryDirectory(prefix="nt-chromium-")
        to_chrome, self._send_fd = os.pipe()
        self._read_fd, from_chrome = os.pipe()
        # Above 9, so that putting them at 3 and 4 cannot clobber one with the other.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome, from_chrome)]
        for fd in (to_chrome, from_chrome):
            os.close(fd)
        place = (
            f"import os, sys; os.dup2({high[0]}, 3); os.dup2({high[1]}, 4); "
            "os.execv(sys.argv[1], sys.argv[1:])"
        )
        argv = [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile.name}", "--remote-debugging-pipe"]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", place, *argv],
            pass_fds=high,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for fd in high:
            os.close(fd)
        self._next = 0
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.errors: list[str] = []  # the page's uncaught exceptions and console errors
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Runtime.enable", session=self.session)

    def _read(self) -> None:
        pending = b""
        with open(self._read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                pending += chunk
                *messages, pending = pending.split(b"\0")
                for raw in messages:
                    message = json.loads(raw)
                    method = message.get("method")
                    if method == "Runtime.exceptionThrown":
                        self.errors.append(json.dumps(message["params"]["exceptionDetails"]))
                    elif method == "Runtime.consoleAPICalled":
                        if message["params"]["type"] == "error":
                            self.errors.append(json.dumps(message["params"]["args"]))
                    elif "id" in message:
                        self._answers.put(message)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._send_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + DEADLINE
        while True:
            answer = self._answers.get(timeout=max(0.0, deadline - time.monotonic()))
            if answer["id"] == self._next:
                if "error" in answer:
                    raise AssertionError(f"{method}: {answer['error']}")
                return answer["result"]  # type: ignore[no-any-return]

    def open(self, url: str) -> None:
        self.call("Page.navigate", session=self.session, url=url)
        self.until(f"location.href === {json.dumps(url)} && document.readyState === 'complete'")

    def js(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", session=self.session, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def until(self, expression: str, what: str = "") -> None:
        """Evaluate `expression` until it is true; fail after DEADLINE with the page."""
        deadline = time.monotonic() + DEADLINE
        while not self.js(expression):
            if time.monotonic() > deadline:
                text = self.js("document.body ? document.body.innerText : ''")
                raise AssertionError(f"not within {DEADLINE}s: {what or expression}\n{text}")
            time.sleep(0.05)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # its helpers too
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        os.close(self._send_fd)
        self._reader.join(5)
        self.profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def get(url: str, host: str | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=DEADLINE) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as e:
        with e:  # it holds the connection
            return e.code, dict(e.headers), e.read().decode()


@needs_browser
def test_the_page_shows_the_tree_live_and_a_childs_markup_and_escapes_inert(
    tmp_path: Path,
) -> None:
    with running(tmp_path) as (run, url, env), Browser() as browser:
        browser.open(url)
        assert browser.js("document.title") == "web · nannytree"
        browser.until("document.querySelector('#tree').innerText.includes('evil')")
        rows = browser.js(
            "[...document.querySelectorAll('#tree tbody tr')].map(r => r.innerText.split('\\t'))"
        )
        by_id = {row[0].strip(): row for row in rows}
        assert by_id["calm"][1] == "running" and by_id["evil"][1] == "running", rows
        old = pids(status(Path(env["SOCK"]), env))["web/evil"]
        assert by_id["evil"][2] == str(old)

        # A crash after the page loaded: its event comes by the page's poll, the
        # child's stderr tail in it, and the table follows.
        os.kill(old, signal.SIGKILL)
        browser.until(
            "document.querySelector('#events').innerText.includes('web/evil child_exited')",
            "the crash's event on the page",
        )
        browser.until(
            "[...document.querySelectorAll('#tree tbody tr')].some(r =>"
            " r.cells[0].innerText.trim() === 'evil' && r.cells[4].innerText === '1'"
            " && r.cells[1].innerText === 'running')",
            "the table showing the restart",
        )
        events = browser.js("document.querySelector('#events').innerText")
        assert "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>" in events
        assert "\\x1b]0;pwned\\x07\\x1b[31mred" in events  # the escapes, as text
        assert "\x1b" not in events
        assert "killed by SIGKILL" in events
        assert browser.js("typeof window.pwned") == "undefined"
        assert browser.js("document.scripts.length") == 1  # page.js alone
        assert browser.js("document.querySelectorAll('main img').length") == 0

        # The child's own page: its detail and the tail of its captured stderr.
        browser.open(url + "child?path=web%2Fevil")
        assert browser.js("document.querySelector('h1').innerText") == "Child web/evil"
        tail = browser.js("document.querySelector('#stderr').innerText")
        assert tail.count("<script>window.pwned=1</script>") == 1, tail  # this run's capture
        assert "\\x1b[31mred" in tail and "\x1b" not in tail
        exits = browser.js("document.querySelector('.exits').innerText")
        assert "web/evil child_exited" in exits and "killed by SIGKILL" in exits
        assert browser.js("typeof window.pwned") == "undefined"
        assert browser.js("document.scripts.length") == 1
        assert browser.errors == [], browser.errors
        assert cli("shutdown", "--socket", env["SOCK"], env=env).returncode == 0
        assert run.finish()[0] == 0
    assert not living_descendants(), "a browser or the run left a process behind"


def test_the_page_and_metrics_paths_headers_and_host_check(tmp_path: Path) -> None:
    with running(tmp_path) as (run, url, env):
        code, headers, body = get(url)
        assert code == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert "nannytree_child_up" not in body  # `/` is the page, no longer the metrics
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert "&lt;script&gt;" not in body  # the tree page shows no output, only events
        code, headers, metrics = get(url + "metrics")
        assert code == 200 and headers["Content-Type"].startswith("text/plain; version=")
        assert 'nannytree_child_up{child="evil",supervisor="web",tree="web"} 1.0' in metrics
        code, _, body = get(url + "child?path=web%2Fevil")
        assert code == 200
        assert "&lt;script&gt;window.pwned=1&lt;/script&gt;&lt;img src=x onerror" in body
        assert "<script>window" not in body and "\x1b" not in body
        code, _, body = get(url + "child?path=web%2Fnobody")
        assert code == 404 and "no worker &#39;web/nobody&#39; in tree &#39;web&#39;" in body
        code, _, body = get(url + "events?after=0")
        answer = json.loads(body)
        assert [e["seq"] for e in answer["events"]] == list(range(1, answer["next"] + 1))
        assert any(
            e["line"].endswith(
                "web/evil child_started pid="
                + str(pids(status(Path(env["SOCK"]), env))["web/evil"])
            )
            for e in answer["events"]
        )
        code, _, body = get(url + f"events?after={answer['next']}")
        assert json.loads(body) == {"events": [], "next": answer["next"]}
        assert get(url + "events?after=x")[0] == 400
        assert get(url + "nothing")[0] == 404
        # DNS rebinding: a page of another name that resolves to loopback cannot read it.
        code, _, body = get(url, host="attacker.example:80")
        assert code == 403 and "loopback address only" in body
        assert get(url + "metrics", host="attacker.example:80")[0] == 200  # scrapes as before
        post = urllib.request.Request(url, data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(post, timeout=DEADLINE)
        with refused.value:
            assert refused.value.code == 405
        assert cli("shutdown", "--socket", env["SOCK"], env=env).returncode == 0
        assert run.finish()[0] == 0


# -- the page's parts, without a browser -------------------------------------------------------


def _event(n: int) -> Event:
    return Event(time=float(n), supervisor="t", context=EventKind.CHILD_STARTED, offender=f"c{n}")


def test_events_are_numbered_by_their_place_in_the_log_and_polls_are_bounded() -> None:
    log = EventLog(max_events=10)
    events = RecentEvents(log, EventRecord.from_event)
    assert events.after(0, 100) == ([], 0)
    for n in range(1, 6):
        log.append(_event(n))
    found, after = events.after(0, 3)
    assert ([e["seq"] for e in found], after) == ([1, 2, 3], 3)
    assert found[0]["line"].endswith(" t/c1 child_started")
    found, after = events.after(after, 100)
    assert ([e["seq"] for e in found], after) == ([4, 5], 5)
    assert events.after(5, 100) == ([], 5)
    last, after = events.last(2)
    assert ([e["seq"] for e in last], after) == ([4, 5], 5)
    for n in range(6, 21):  # the log keeps 10: 1-10 are gone
        log.append(_event(n))
    found, after = events.after(3, 100)
    assert ([e["seq"] for e in found], after) == (list(range(11, 21)), 20)
    assert events.after(99, 100) == ([], 20)  # a page of an earlier run: from the end


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1:9100", True),
        ("localhost:9100", True),
        ("LOCALHOST", True),
        ("[::1]:9100", True),
        ("[::1]", True),
        ("attacker.example:9100", False),
        ("127.0.0.1.attacker.example", False),
        ("", False),
    ],
)
def test_the_page_answers_loopback_host_headers_only(host: str, loopback: bool) -> None:
    assert _loopback_host(host) is loopback
