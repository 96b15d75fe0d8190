"""The tutorials (docs/tutorials/), followed step by step on real processes.

Each test does what its page tells the reader to do, with the page's own files
(examples/tutorials/), and checks that what the page says happens does happen.
A `$ nannytree ...` command shown on a page that the test does not run fails it,
so a page cannot grow a step that nothing follows.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from actors.testing import free_port, wait_gone
from tests.support import LiveRun, run_pytest, wait_until

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "tutorials"
EXAMPLES = ROOT / "examples" / "tutorials"
CLI = [sys.executable, "-m", "actors.cli"]
DEADLINE = 20.0
EVENT = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} (\S+) ([a-z_]+)(?: pid=(\d+))?(?: reason=(.*))?$")


def fenced(page: Path, info: str) -> list[str]:
    """The text of every block on `page` fenced as ```<info> (exactly)."""
    return re.findall(rf"^```{re.escape(info)}\n(.*?)^```$", page.read_text(), re.M | re.S)


def page_commands(page: Path) -> set[str]:
    """The `$ nannytree ...` commands the page shows in its console blocks."""
    return {
        line.removeprefix("$ nannytree ").strip()
        for block in fenced(page, "console")
        for line in block.splitlines()
        if line.startswith("$ nannytree ")
    }


def events(text: str) -> list[tuple[str, str, str | None, str | None]]:
    """(path, kind, pid, reason) of each event line (stderr tails aside)."""
    found = []
    for line in text.splitlines():
        m = EVENT.match(line)
        if m:
            found.append((m[1], m[2], m[3], m[4]))
    return found


def workers(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """path -> node, for every worker in a `status --json` answer."""
    found: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any]) -> None:
        if node["type"] == "worker":
            found[node["path"]] = node
        for child in node["children"]:
            walk(child)

    walk(answer["tree"])
    return found


# -- Supervise your services ----------------------------------------------------------------


def test_supervise_your_services(tmp_path: Path) -> None:
    page = PAGES / "services.md"
    shop = tmp_path / "shop"
    shop.mkdir()
    for name in ("shop.toml", "worker.py"):  # step 2: copy the two files
        shutil.copy(EXAMPLES / "shop" / name, shop)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),  # the page's PORT=8001 nannytree run, on a free port
        "XDG_RUNTIME_DIR": str(runtime),
        "NANNYTREE_LOG_DIR": str(tmp_path / "logs"),
        "COLUMNS": "100",
        "TERM": "xterm-256color",
    }
    ran: set[str] = set()

    def nannytree(*args: str, status: int = 0) -> str:
        out = subprocess.run(
            [*CLI, *args], cwd=shop, env=env, capture_output=True, text=True, timeout=60
        )
        ran.add(" ".join(args))
        assert out.returncode == status, (args, out.returncode, out.stdout, out.stderr)
        return out.stdout

    def tree() -> dict[str, dict[str, Any]]:
        """Each worker's row; status exits 3 while one is between two runs."""
        out = subprocess.run(
            [*CLI, "status", "--json"], cwd=shop, env=env, capture_output=True, text=True
        )
        assert out.returncode in (0, 3), out.stderr
        return workers(json.loads(out.stdout))

    def pid(path: str) -> int:
        found = tree()[f"shop/{path}"]["pid"]
        assert found is not None, f"{path} is not running"
        return int(found)

    def running(path: str) -> int | None:
        row = tree()[f"shop/{path}"]
        return int(row["pid"]) if row["state"] == "running" else None

    # 3. check
    out = nannytree("check", "shop.toml")
    assert out.startswith("shop.toml: ok: tree 'shop', 4 workers under 2 supervisors\n"), out
    assert re.search(r"└─ mail\s+rest_for_one\s+permanent\s+infinity\s+max 1 restart in 5s", out)
    assert f"python3 -m http.server {port} --bind 127.0.0.1" in out
    # ... and what it says of the page's mistake (in a copy: the tree stays as it is)
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "shop.toml").write_text(
        (shop / "shop.toml")
        .read_text()
        .replace(
            'command = ["python3", "worker.py", "orders"]\n',
            'command = ["python3", "worker.py", "orders"]\nrestart = "sometimes"\n',
        )
    )
    mistake = subprocess.run(
        [*CLI, "check", "shop.toml"], cwd=wrong, env=env, capture_output=True, text=True
    )
    assert mistake.returncode == 1
    (shown,) = [b for b in fenced(page, "console") if '"sometimes"' in b]
    assert shown == "$ nannytree check shop.toml\n" + mistake.stderr

    # 4. without a terminal, or with --plain: a line per event, as the page shows them
    (shown,) = [b for b in fenced(page, "console") if b.startswith("$ nannytree run ")]
    command, *expected = shown.splitlines()
    args = command.removeprefix("$ nannytree ").split()
    with subprocess.Popen(
        [*CLI, *args],
        cwd=shop,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as plain:
        assert plain.stdout is not None
        lines = [plain.stdout.readline().rstrip("\n") for _ in expected]
        nannytree("wait", "--ready")  # started, not only starting
        plain.send_signal(signal.SIGINT)
        rest = plain.stdout.read()
        assert plain.wait(30) == 0, rest
    ran.add(" ".join(args))

    def same(line: str) -> str:
        line = line.replace(env["NANNYTREE_LOG_DIR"], "/home/me/.local/state/nannytree")
        line = line.replace(env["XDG_RUNTIME_DIR"], "/run/user/1000")
        return re.sub(r"\d+", "N", line)

    assert [same(line) for line in lines] == [same(line) for line in expected], lines
    assert "nannytree: tree 'shop' stopped (SIGINT)" in rest

    # ... and on a terminal: the live view
    seen: set[int] = set()
    with LiveRun(["run", "shop.toml"], shop, env) as run:
        run.wait_screen(r"└─ sender\s+running\s+\d+")
        screen = run.text()
        assert "nannytree shop  one_for_one, max 5 restarts in 30s" in screen
        assert "Ctrl-C stops the tree  ·  children's output:" in screen
        assert (tmp_path / "logs" / "shop" / "shop" / "worker.log").exists()
        assert re.search(r"└─ mail \(rest_for_one\)\s+running", screen), screen

        # 5. status, the web server, the worker's log
        out = nannytree("status")
        assert out.startswith("● shop - running, pid ")
        assert f"socket {runtime / 'nannytree' / 'shop.sock'}" in out
        rows = ("├─ web", "├─ worker", "└─ mail (rest_for_one)", "   ├─ outbox", "   └─ sender")
        for row in rows:
            assert re.search(rf"^{re.escape(row)}\s+running\s", out, re.M), out
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as answer:
            assert answer.status == 200 and b"worker.py" in answer.read()  # lists the folder
        wait_until(
            lambda: (
                re.search(r"orders: done job \d+\n$", nannytree("logs", "worker", "-n", "3"))
                is not None
            ),
            DEADLINE,
            "the worker's log shows a job done",
        )
        assert len(nannytree("logs", "worker", "-n", "3").splitlines()) <= 3

        # 6. restart, stop, start
        before = {path: pid(path) for path in ("web", "worker", "mail/outbox", "mail/sender")}
        seen |= set(before.values())
        out = nannytree("restart", "worker")
        m = re.fullmatch(rf"restarted shop/worker: pid {before['worker']} -> (\d+)\n", out)
        assert m, out
        worker = int(m[1])
        seen.add(worker)
        assert pid("web") == before["web"] and pid("mail/sender") == before["mail/sender"]
        out = nannytree("stop", "sender")
        assert out == f"stopped shop/mail/sender (was pid {before['mail/sender']})\n"
        out = nannytree("status")  # a child stopped on purpose is fine
        strict = nannytree("status", "--strict", status=3)  # not for --strict
        assert re.search(r"^   └─ sender\s+stopped\s", strict, re.M), strict
        assert re.search(r"^   └─ sender\s+stopped\s+-\s+-\s+0\s", out, re.M), out
        assert re.search(rf"^├─ worker\s+running\s+{worker}\s+\d+s\s+0\s", out, re.M), out
        out = nannytree("start", "sender")
        sender = int(re.fullmatch(r"started shop/mail/sender, pid (\d+)\n", out)[1])  # type: ignore[index]
        seen.add(sender)

        # 7. kill -9 the worker: back with a new pid, its restart counted
        os.kill(worker, signal.SIGKILL)
        wait_until(
            lambda: running("worker") not in (worker, None), DEADLINE, "the worker restarted"
        )
        out = nannytree("status", "worker")
        new_worker = pid("worker")
        seen.add(new_worker)
        assert f"        pid: {new_worker}\n" in out and "   restarts: 1\n" in out, out
        assert f"pid {worker}: killed by SIGKILL\n      | orders: started, pid {worker}" in out
        restarted = [
            ("shop/worker", "child_exited", str(worker), "killed by SIGKILL"),
            ("shop/worker", "child_started", str(new_worker), None),
        ]
        wait_until(
            lambda: events(nannytree("events", "-n", "2")) == restarted,
            DEADLINE,
            "the worker's exit and start are the last two events",
        )

        # ... and outbox: rest_for_one restarts sender with it, the rest run on
        outbox = pid("mail/outbox")
        os.kill(outbox, signal.SIGKILL)

        def mail_restarted() -> bool:
            now = tree()
            return all(
                now[f"shop/mail/{c}"]["state"] == "running"
                and now[f"shop/mail/{c}"]["pid"] not in (outbox, sender)
                for c in ("outbox", "sender")
            )

        wait_until(mail_restarted, DEADLINE, "outbox and sender restarted")
        mail_events = [
            ("shop/mail/outbox", "child_exited"),
            ("shop/mail/sender", "child_terminated"),
            ("shop/mail/outbox", "child_started"),
            ("shop/mail/sender", "child_started"),
        ]
        wait_until(
            lambda: (
                [(p, k) for p, k, _, _ in events(nannytree("events", "-n", "4"))] == mail_events
            ),
            DEADLINE,
            "rest_for_one's four events are the last four",
        )
        listed = events(nannytree("events", "-n", "4"))
        assert listed[0][2:] == (str(outbox), "killed by SIGKILL")
        assert listed[1][2:] == (str(sender), "shutdown")
        after = tree()
        seen |= {int(n["pid"]) for n in after.values()}
        assert after["shop/web"]["pid"] == before["web"]
        assert after["shop/worker"]["pid"] == new_worker

        # 8. add the page's fifth child to the file, and update the running tree
        (addition,) = [b for b in fenced(page, "toml") if 'id = "refunds"' in b]
        with (shop / "shop.toml").open("a") as f:
            f.write("\n" + addition)
        assert nannytree("update") == "added: refunds\n"
        now = tree()
        assert now["shop/refunds"]["state"] == "running"
        assert (now["shop/worker"]["pid"], now["shop/worker"]["restarts"]) == (new_worker, 1)
        seen |= {int(n["pid"]) for n in now.values()}
        assert nannytree("update") == "no change\n"

        # 9. shutdown: reverse start order, run exits 0
        assert nannytree("shutdown") == "stopping tree 'shop'\n"
        assert run.p.wait(30) == 0
        run.reader.join(5)
        screen = run.text()
        assert "nannytree: tree 'shop' stopped (`nannytree shutdown` from pid" in screen
        assert re.search(r"└─ refunds\s+stopped\s+-", screen), screen
    assert wait_gone(sorted(seen)) == []
    log = tmp_path / "logs" / "shop" / "events.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    stops = [r["who"] for r in records if r["what"] == "child_terminated"][-6:]
    assert stops == [  # reverse start order, the nested supervisor's children first
        "shop/refunds",
        "shop/mail/sender",
        "shop/mail/outbox",
        "shop/mail",
        "shop/worker",
        "shop/web",
    ]

    commands = page_commands(page)
    assert commands <= ran, f"the page shows commands this test does not run: {commands - ran}"


# -- Test with real processes -----------------------------------------------------------------


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest run in `folder`, as the reader runs it there: a process of its own, and
    no configuration but what the folder has."""
    return run_pytest(*args, cwd=folder)


def test_test_with_real_processes(tmp_path: Path) -> None:
    page = PAGES / "testing.md"
    shop = tmp_path / "shop"
    shop.mkdir()
    for name in ("shop.toml", "worker.py", "test_shop.py"):
        shutil.copy(EXAMPLES / "shop" / name, shop)

    # 3. run them: every test passes, the ones the page lists
    out = pytest_in(shop, "-v", "test_shop.py")
    assert out.returncode == 0, out.stdout + out.stderr
    passed = re.findall(r"^(test_shop\.py::\w+) PASSED", out.stdout, re.M)
    (shown,) = [b for b in fenced(page, "console") if "$ pytest -v test_shop.py" in b]
    assert passed == re.findall(r"^(test_shop\.py::\w+) PASSED", shown, re.M)
    assert re.search(r"=+ 5 passed in [\d.]+s =+$", out.stdout, re.M), out.stdout
    assert living_left(shop) == []

    # 5. misspell the worker's script: strict mode catches its crash, with the cause
    toml = shop / "shop.toml"
    toml.write_text(toml.read_text().replace('"worker.py", "orders"', '"wroker.py", "orders"'))
    out = pytest_in(shop, "-v", "test_shop.py")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "strict mode: tree 'shop' had " in out.stdout
    assert re.search(r"shop/worker child_exited pid=\d+ reason=exit code 2", out.stdout)
    assert f"can't open file '{shop / 'wroker.py'}'" in out.stdout
    assert "nannytree stderr of crashed children: tree 'shop'" in out.stdout
    assert "test_shop.py::test_the_worker_raises PASSED" in out.stdout
    assert living_left(shop) == []


def living_left(folder: Path) -> list[psutil.Process]:
    """Processes still running in `folder` (the tests' children would be)."""
    left = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if p.cwd() == str(folder) and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
    return left


# -- Experiment with restart strategies --------------------------------------------------------


def fences(page: Path) -> list[tuple[str, str]]:
    """(info, text) of every fenced block on `page`, in order."""
    return re.findall(r"^```(\S*)[^\n]*\n(.*?)^```$", page.read_text(), re.M | re.S)


def test_experiment_with_restart_strategies(tmp_path: Path, monkeypatch: Any) -> None:
    """The page's Python, run in order in one namespace from an empty folder (as the
    reader pastes it): each block prints what the text block after it shows, and
    the two plots land in the folder."""
    monkeypatch.chdir(tmp_path)
    blocks = fences(PAGES / "experiments.md")
    namespace: dict[str, Any] = {"__name__": "__tutorial__"}
    compared = 0
    for (info, code), (after, shown) in zip(blocks, [*blocks[1:], ("", "")], strict=True):
        if info != "python":
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "experiments.md", "exec"), namespace)
        if after == "text":
            assert printed.getvalue() == shown, code
            compared += 1
        else:
            assert printed.getvalue() == "", f"prints what the page does not show:\n{code}"
    assert compared == 11
    for picture in ("timeline.png", "sweep.png", "served.png"):
        assert (tmp_path / picture).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


# -- Tune a tree from its own history ---------------------------------------------------


def test_tune_a_tree_from_its_own_history(tmp_path: Path, monkeypatch: Any) -> None:
    """Step 2 on real processes (its journal gets written); step 3's command on the
    journal the page ships prints exactly what the page shows; step 4's Python (skipped
    by the docs' Sybil run: it needs the tutorial's folder) prints what its text blocks
    show."""
    page = PAGES / "tuning-from-history.md"
    folder = tmp_path / "tuning"
    shutil.copytree(EXAMPLES / "tuning", folder)
    env = {
        **os.environ,
        "XDG_RUNTIME_DIR": str(tmp_path),
        "NANNYTREE_LOG_DIR": str(tmp_path / "logs"),
        "COLUMNS": "120",
    }
    ran: set[str] = set()
    blocks = fences(page)
    consoles = [text for info, text in blocks if info == "console"]

    # 2. Record its history: the journal gets jobs' crashes as they happen.
    command = consoles[0].splitlines()[0].removeprefix("$ nannytree ")
    recorded = folder / "recorded.jsonl"
    with LiveRun(command.split(), folder, env) as run:
        run.wait_screen(r"jobs")

        def crashes() -> int:
            if not recorded.exists():
                return 0
            lines = recorded.read_text().splitlines()
            return sum('"what": "child_exited"' in x and "svc/pool/jobs" in x for x in lines)

        wait_until(lambda: crashes() >= 2, DEADLINE, "two crashes of jobs in the journal")
    ran.add(command)

    # 3. The command on the shipped journal: the page's output, line for line.
    first, *shown = consoles[1].splitlines()
    args = re.findall(r"'[^']*'|\S+", first.removeprefix("$ nannytree "))
    out = subprocess.run(
        [*CLI, *(a.strip("'") for a in args)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == shown
    ran.add(first.removeprefix("$ nannytree "))
    assert ran == page_commands(page)

    # 4. The Python, in order, in one namespace, from the tutorial's folder.
    monkeypatch.chdir(folder)
    namespace: dict[str, Any] = {"__name__": "__tutorial__"}
    compared = 0
    for (info, code), (after, text) in zip(blocks, [*blocks[1:], ("", "")], strict=True):
        if info != "python" or "--8<--" in code:
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "tuning-from-history.md", "exec"), namespace)
        assert after == "text", code
        assert printed.getvalue() == text, code
        compared += 1
    assert compared == 2
