"""A child's text cannot drive the operator's terminal (issue 10, item 7).

Real children write escape sequences into their exception messages, their
output and their ids; everything the CLI prints shows them escaped (`\\x1b`).
"""

from __future__ import annotations

import io
import json
import re
import signal
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from actors._operate._records import EventRecord, Node
from actors._operate._text import printable
from actors.cli._plain import Painter, status_lines
from actors.cli._view import Header, screen
from actors.testing import wait_gone
from tests.cli.test_commands import Proc, cli, env, pids, status, workers

ESC = "\x1b"
# Retitle the terminal, clear the screen, and a C1 CSI: none may arrive raw.
NASTY = "\\033]0;pwned\\007\\033[2J\\302\\233"

EVIL_PY = """
import time

def crash():
    time.sleep(0.2)
    raise RuntimeError("boom \\x1b]0;pwned\\x07\\x1b[2J")

def steady():
    print("out \\x1b[31mred\\x1b[0m", flush=True)
    time.sleep(600)
"""

TALKER = f"printf 'err {NASTY}\\n' >&2\nexec sleep 600\n"

TREE = """
[supervisor]
id = "evil"
intensity = 1000
period = 1

[[supervisor.children]]
id = "crasher"
target = "evil_children:crash"

[[supervisor.children]]
id = "talker"
command = ["sh", "talker.sh"]
cwd = "{here}"
stderr = "capture"

[[supervisor.children]]
id = "printer"
target = "evil_children:steady"
stdout = "capture"
"""


__all__ = ["env"]  # the fixture, shared with test_cli


def _until(run: Any, text: str, timeout: float = 20.0) -> Any:
    """run() until its stdout holds `text` (a child writes a moment after it starts)."""
    deadline = time.monotonic() + timeout
    while text not in (result := run()).stdout and time.monotonic() < deadline:
        time.sleep(0.05)
    return result


def _no_raw_escape(text: str) -> None:
    assert ESC not in text and "\x07" not in text and "\x9b" not in text, repr(text)


def test_printable_escapes_controls_and_is_idempotent():
    raw = "a\x1b]0;t\x07\r\nb\u202ec\x9b\x7f\\x1b"
    shown = printable(raw)
    assert shown == "a\\x1b]0;t\\x07\\x0d\\x0ab\\u202ec\\x9b\\x7f\\x1b"
    assert printable(shown) == shown
    assert printable("one\n\ttwo\x1b", lines=True) == "one\n\ttwo\\x1b"


def test_escape_sequences_from_real_children_reach_no_output_raw(tmp_path, env):
    (tmp_path / "evil_children.py").write_text(EVIL_PY)
    tree = tmp_path / "evil.toml"
    (tmp_path / "talker.sh").write_text(TALKER)
    tree.write_text(TREE.replace("{here}", str(tmp_path)))
    sock = str(tmp_path / "e.sock")
    with Proc("run", str(tree), "--plain", "--socket", sock, env=env) as run:
        run.expect(r"evil/crasher child_exited .*RuntimeError: boom \\x1b\]0;pwned\\x07")
        run.expect(r"evil/crasher child_exited")  # it keeps crashing while we look
        answer = status(Path(sock), env)
        seen = set(pids(answer).values())

        events = cli("events", "--socket", sock, "-n", "50", env=env)
        assert events.returncode == 0
        _no_raw_escape(events.stdout)
        assert "boom \\x1b]0;pwned\\x07\\x1b[2J" in events.stdout

        shown = cli("status", "--socket", sock, env=env)
        _no_raw_escape(shown.stdout)
        assert "\\x1b" in shown.stdout  # the crasher's last exit, escaped

        logs = _until(lambda: cli("logs", "talker", "--socket", sock, env=env), "err")
        assert logs.returncode == 0
        _no_raw_escape(logs.stdout)
        assert logs.stdout == "err \\x1b]0;pwned\\x07\\x1b[2J\\x9b\n"
        out = _until(lambda: cli("logs", "printer", "--stdout", "--socket", sock, env=env), "out")
        _no_raw_escape(out.stdout)
        assert out.stdout == "out \\x1b[31mred\\x1b[0m\n"

        as_json = cli("events", "--json", "-n", "50", "--socket", sock, env=env)
        _no_raw_escape(as_json.stdout)
        assert any(
            "\x1b" in (json.loads(line).get("reason") or "") for line in as_json.stdout.splitlines()
        )  # the data stays exact; only the terminal is protected
        rc, output = run.finish(signal.SIGINT)
    assert rc == 0
    _no_raw_escape(output)
    assert wait_gone(sorted(seen)) == []


def test_ids_from_a_tree_file_are_escaped_by_check(tmp_path, env):
    tree = tmp_path / "ids.toml"
    tree.write_text(
        '[supervisor]\nid = "t\\u001b[2Jx"\n'
        '[[supervisor.children]]\nid = "c\\u001b]0;x\\u0007"\ncommand = ["sleep", "1"]\n'
    )
    out = cli("check", str(tree), env=env)
    _no_raw_escape(out.stdout + out.stderr)
    assert "\\x1b" in out.stdout + out.stderr


def test_the_live_view_escapes_ids_reasons_and_notes():
    root = Node(
        id="r\x1b[2J",
        path="r",
        type="supervisor",
        state="running",
        strategy="one_for_one",
        intensity=3,
        period=5.0,
    )
    root.children = [
        Node(
            id="w\x1b]0;x\x07",
            path="r/w",
            type="worker",
            state="running",
            last_exit="RuntimeError: \x1b[31m",
            last_exit_normal=False,
        )
    ]
    record = EventRecord(time=0.0, who="r/w", what="child_exited", reason="x\x1b[2Jy")
    header = Header("r\x1b[2J", 1, "/s\x1b", None, note="n\x1b")
    buffer = io.StringIO()
    Console(file=buffer, width=200, force_terminal=True).print(screen(root, [record], header))
    # rich's own styling is escape sequences too: look only at what is not rich's.
    text = buffer.getvalue()
    assert "\x1b[2J" not in text and "\x1b]0;x" not in text and "\x07" not in text
    assert text.count("\\x1b") >= 5


NOTIFIER = """
import os, socket, sys, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
text = b"READY=1\\nSTATUS=" + sys.argv[1].encode() + b" \\x1b[2J up"
sock.sendto(text, os.environ["NOTIFY_SOCKET"])
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
sock.sendto(b"STATUS=draining", os.environ["NOTIFY_SOCKET"])
time.sleep(600)
"""

NOTIFYING_TREE = """
[supervisor]
id = "n"
[[supervisor.children]]
id = "db"
command = ["python3", "{script}", "db", "{go}"]
ready = "sd_notify"
[[supervisor.children]]
id = "plain"
command = ["sleep", "600"]
[[supervisor.children]]
id = "pool"
strategy = "one_for_one"
[[supervisor.children.children]]
id = "cache"
command = ["python3", "{script}", "cache", "{go}"]
ready = "sd_notify"
"""


def test_status_shows_each_childs_sd_notify_status_escaped(tmp_path, env):
    """`status` gains a status column (a nested child's too) and `status ID` a status
    line, with the child's last STATUS= text escaped; `--json` keeps it exact."""
    script, go = tmp_path / "notifier.py", tmp_path / "go"
    script.write_text(NOTIFIER)
    tree = tmp_path / "n.toml"
    tree.write_text(NOTIFYING_TREE.format(script=script, go=go))
    sock = tmp_path / "n.sock"
    with Proc("run", str(tree), "--plain", "--socket", str(sock), env=env) as run:
        run.expect(r"n/pool child_started")
        want = {"n/db": "db \x1b[2J up", "n/plain": "", "n/pool/cache": "cache \x1b[2J up"}
        # Until the root has answered its start, status answers from the events
        # (rows without STATUS=): wait for the tree to be up.
        deadline = time.monotonic() + 20
        while True:
            answer = status(sock, env)
            found = {p: n["status"] for p, n in workers(answer).items()}
            if found == want:
                break
            assert time.monotonic() < deadline, found
            time.sleep(0.05)
        seen = set(pids(answer).values())
        shown = cli("status", "--socket", str(sock), env=env)
        _no_raw_escape(shown.stdout)
        header = next(line for line in shown.stdout.splitlines() if line.startswith("tree"))
        assert header.split()[-1] == "status"
        assert re.search(r"├─ db\s+running.*db \\x1b\[2J up$", shown.stdout, re.M)
        assert re.search(r"└─ cache\s+running.*cache \\x1b\[2J up$", shown.stdout, re.M)
        detail = cli("status", "db", "--socket", str(sock), env=env)
        _no_raw_escape(detail.stdout)
        assert re.search(r"^\s+status: db \\x1b\[2J up$", detail.stdout, re.M), detail.stdout
        go.touch()  # the children's next STATUS= replaces the last one
        want = {"n/db": "draining", "n/plain": "", "n/pool/cache": "draining"}
        deadline = time.monotonic() + 20
        while (found := {p: n["status"] for p, n in workers(status(sock, env)).items()}) != want:
            assert time.monotonic() < deadline, found
            time.sleep(0.05)
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone(sorted(seen)) == []


def test_status_has_no_status_column_when_no_child_sent_one():
    root = Node(id="t", path="t", type="supervisor", state="running")
    root.strategy, root.intensity, root.period = "one_for_one", 3, 5.0
    root.children = [Node(id="a", path="t/a", type="worker", state="running")]
    header = status_lines(Painter(io.StringIO()), {"pid": 1}, root)[4]
    assert header.split()[-2:] == ["last", "exit"]
