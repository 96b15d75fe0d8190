"""`nannytree run --metrics` and `--event-log` end to end, on real processes: metrics
scraped over HTTP while children crash, are stopped and started; every operator
request in `nannytree events` and in the dated JSON Lines file."""

from __future__ import annotations

import datetime
import json
import os
import signal
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from actors.cli._run_flags import metrics_address
from tests.cli.test_commands import DEADLINE, Proc, _env, cli, pids, status

TREE = """
[supervisor]
id = "mon"
intensity = 5
period = 600

[[supervisor.children]]
id = "web"
command = ["sleep", "600"]

[[supervisor.children]]
id = "crashy"
command = ["sleep", "600"]
restart_limit = false  # its crashes spend the root's headroom, which the metrics show

[[supervisor.children]]
id = "db"
command = ["sh", "-c", "trap 'echo reloaded >> {marker}' HUP; while true; do sleep 0.05; done"]
reload = {{ signal = "HUP", check = ["sh", "-c", "test -e {ok}"] }}
"""

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _tree(tmp_path: Path) -> Path:
    path = tmp_path / "mon.toml"
    path.write_text(TREE.format(marker=tmp_path / "reloads", ok=tmp_path / "config-ok"))
    return path


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def child(samples: Samples, name: str, child_id: str, **labels: str) -> float | None:
    key = frozenset({"tree": "mon", "supervisor": "mon", "child": child_id, **labels}.items())
    return samples.get((f"nannytree_{name}", key))


def headroom(samples: Samples) -> float | None:
    key = frozenset({"tree": "mon", "supervisor": "mon"}.items())
    return samples.get(("nannytree_supervisor_restart_headroom", key))


def until(url: str, check: Any, what: str) -> Samples:
    """Scrape until check(samples) holds; fail after DEADLINE, showing the last."""
    deadline = time.monotonic() + DEADLINE
    while True:
        samples = scrape(url)
        if check(samples):
            return samples
        if time.monotonic() > deadline:
            shown = "\n".join(f"{k[0]} {dict(k[1])} {v}" for k, v in sorted(samples.items()))
            raise AssertionError(f"not within {DEADLINE}s: {what}; last scrape:\n{shown}")
        time.sleep(0.05)


def test_metrics_follow_crashes_stops_and_starts(tmp_path: Path) -> None:
    env = _env(tmp_path)
    sock = tmp_path / "m.sock"
    journal = tmp_path / "mon.events.jsonl"
    args = ["--socket", str(sock), "--plain", "--metrics", "0", "--event-log", str(journal)]
    with Proc("run", str(_tree(tmp_path)), *args, env=env) as run:
        url = run.expect(r"^nannytree: metrics: (http://\S+)$")[1]
        assert url.startswith("http://127.0.0.1:")  # loopback unless a host is given
        run.expect(r"mon/db child_started")
        first = until(url, lambda s: child(s, "child_up", "db") == 1, "db up")
        for cid in ("web", "crashy", "db"):
            assert child(first, "child_up", cid) == 1
            assert child(first, "child_ready", cid) == 1
            assert child(first, "child_restarts_total", cid) == 0
            assert (child(first, "child_resident_memory_bytes", cid) or 0) > 0
            assert child(first, "child_cpu_seconds_total", cid) is not None
            assert (child(first, "child_uptime_seconds", cid) or -1) >= 0
        assert headroom(first) == 5
        assert first[("nannytree_tree_up", frozenset({"tree": "mon"}.items()))] == 1

        # Each crash: one more restart, one more exit by "killed", one less headroom.
        for n in (1, 2, 3):
            old = pids(status(sock, env))["mon/crashy"]
            os.kill(old, signal.SIGKILL)

            def moved(s: Samples, n: int = n, old: int = old) -> bool:
                return (
                    child(s, "child_restarts_total", "crashy") == n
                    and child(s, "child_exits_total", "crashy", reason="killed") == n
                    and child(s, "child_up", "crashy") == 1
                    and headroom(s) == 5 - n
                    and pids(status(sock, env)).get("mon/crashy") not in (None, old)
                )

            until(url, moved, f"crash {n} counted")

        # A stopped child is down, its stop an exit by "shutdown"; a start brings it up.
        assert cli("stop", "web", "--socket", str(sock), env=env).returncode == 0
        down = scrape(url)
        assert child(down, "child_up", "web") == 0
        assert child(down, "child_ready", "web") == 0
        assert child(down, "child_state", "web", nannytree_child_state="stopped") == 1
        assert child(down, "child_exits_total", "web", reason="shutdown") == 1
        assert child(down, "child_uptime_seconds", "web") is None
        assert child(down, "child_resident_memory_bytes", "web") is None
        assert headroom(down) == 2  # an operator's stop is no restart
        assert cli("start", "web", "--socket", str(sock), env=env).returncode == 0
        up = scrape(url)
        assert child(up, "child_up", "web") == 1
        assert child(up, "child_restarts_total", "web") == 0
        hello = json.loads(cli("status", "--json", "--socket", str(sock), env=env).stdout)
        assert hello["metrics"] == url
        rc, output = run.finish(signal.SIGINT)
    assert rc == 0, output
    try:
        scrape(url)
    except OSError:
        pass  # the endpoint ends with the run
    else:
        raise AssertionError("the metrics endpoint outlived its run")
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    (stop,) = [e for e in lines if e["detail"].startswith("shutdown by ")]
    assert (stop["what"], stop["who"]) == ("operator_action", "mon")
    assert stop["detail"] == "shutdown by SIGINT: stopping tree 'mon'"
    assert lines[-1]["what"] == "supervisor_stopped"


def test_a_child_its_restart_limit_gave_up_on_is_failed_in_the_metrics(tmp_path: Path) -> None:
    """Every child is in exactly one state, `failed` included (its restart_limit was
    exceeded), while its siblings run on."""
    env = _env(tmp_path)
    sock = tmp_path / "m.sock"
    tree = tmp_path / "mon.toml"
    tree.write_text(
        '[supervisor]\nid = "mon"\n'
        '[[supervisor.children]]\nid = "web"\ncommand = ["sleep", "600"]\n'
        '[[supervisor.children]]\nid = "flap"\ncommand = ["sh", "-c", "exit 1"]\n'
        "restart_limit = { intensity = 2, period = 60 }\n"
    )
    with Proc("run", str(tree), "--socket", str(sock), "--plain", "--metrics", "0", env=env) as run:
        url = run.expect(r"^nannytree: metrics: (http://\S+)$")[1]
        run.expect(r"mon/flap child_failed")

        def state(s: Samples, cid: str) -> list[str]:
            return [
                dict(labels)["nannytree_child_state"]
                for (name, labels), value in s.items()
                if name == "nannytree_child_state" and dict(labels)["child"] == cid and value
            ]

        def failed(s: Samples) -> bool:  # restarts: once the nanny answers, not its events
            return state(s, "flap") == ["failed"] and child(s, "child_restarts_total", "flap") == 2

        samples = until(url, failed, "flap failed after 2 restarts")
        assert state(samples, "web") == ["running"]
        assert child(samples, "child_up", "flap") == 0
        assert child(samples, "child_exits_total", "flap", reason="exit_code") == 3
        rc, output = run.finish(signal.SIGINT)
    assert rc == 0, output


def test_a_metrics_port_in_use_stops_the_run_before_any_child(tmp_path: Path) -> None:
    env = _env(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = cli("run", str(_tree(tmp_path)), "--plain", "--metrics", str(port), env=env)
    assert out.returncode == 1, out
    assert f"cannot serve metrics on 127.0.0.1:{port}: Address already in use" in out.stderr
    assert "child_started" not in out.stdout
    bad = cli("run", str(_tree(tmp_path)), "--metrics", "host:port", env=env)
    assert bad.returncode == 2 and "--metrics takes PORT or HOST:PORT" in bad.stderr


def test_operator_requests_are_events_and_dated_lines_on_disk(tmp_path: Path) -> None:
    env = _env(tmp_path)
    sock = tmp_path / "m.sock"
    journal = tmp_path / "mon.events.jsonl"
    args = ["--socket", str(sock), "--plain", "--event-log", str(journal)]
    requests = [
        (["stop", "web"], "operator_action", "mon/web", "stop web by uid "),
        (["start", "web"], "operator_action", "mon/web", "start web by uid "),
        (["restart", "crashy"], "operator_action", "mon/crashy", "restart crashy by uid "),
        (["signal", "crashy", "USR1"], "operator_action", "mon/crashy", "signal USR1 crashy by "),
        (["pause", "db"], "operator_action", "mon/db", "pause db by uid "),
        (["resume", "db"], "operator_action", "mon/db", "resume db by uid "),
        (["reload", "db"], "operator_refused", "mon/db", "reload db by uid "),
        (["reload", "db"], "operator_action", "mon/db", "reload db by uid "),
        (["update"], "operator_action", "mon", "update by uid "),
        (["stop", "nope"], "operator_refused", "mon", "stop nope by uid "),
        (["reset", "mon"], "operator_action", "mon", "reset mon by uid "),
        (["logs", "--reopen"], "operator_action", "mon", "logs --reopen by uid "),
    ]
    with Proc("run", str(_tree(tmp_path)), *args, env=env) as run:
        run.expect(r"mon/db child_started")
        for n, (words, *_) in enumerate(requests):
            if n == 7:
                (tmp_path / "config-ok").touch()  # the second reload's check passes
            cli(*words, "--socket", str(sock), env=env)
        out = cli("events", "--json", "-n", "100", "--socket", str(sock), env=env)
        shown = [json.loads(line) for line in out.stdout.splitlines()]
        assert cli("shutdown", "--socket", str(sock), env=env).returncode == 0
        rc, output = run.finish()
    assert rc == 0, output
    operator = [e for e in shown if e["what"].startswith("operator_")]
    assert len(operator) == len(requests), operator
    uid = os.getuid()
    for event, (_, what, who, start) in zip(operator, requests, strict=True):
        assert (event["what"], event["who"]) == (what, who)
        assert event["detail"].startswith(start.replace("by uid ", f"by uid {uid} ")), event
    refused = operator[6]["detail"]
    assert "refused:" in refused and "its check" in refused
    assert operator[9]["detail"].endswith(
        "refused: no child 'nope' in tree 'mon'; `nannytree status` lists them"
    )

    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    on_disk = [line for line in lines if line["what"].startswith("operator_")]
    assert [(e["what"], e["who"], e["detail"]) for e in on_disk[:-1]] == [
        (e["what"], e["who"], e["detail"]) for e in operator
    ]
    assert on_disk[-1]["what"] == "operator_action"
    assert on_disk[-1]["detail"].startswith(f"shutdown by uid {uid} (pid ")
    today = datetime.datetime.now(datetime.UTC).date()
    for line in lines:
        stamp = datetime.datetime.fromisoformat(line["ts"])
        assert stamp.utcoffset() == datetime.timedelta(0)
        assert abs((stamp.date() - today).days) <= 1
    assert lines[-1]["what"] == "supervisor_stopped"  # written to the end of the run
    assert "operator_action stop web by uid" in output  # and printed as it happens


def test_a_scrape_answers_at_once_while_a_supervisor_is_busy_starting(tmp_path: Path) -> None:
    tree = tmp_path / "slow.toml"
    tree.write_text(
        '[supervisor]\nid = "mon"\nintensity = 4\n'
        '[[supervisor.children]]\nid = "quick"\ncommand = ["sleep", "600"]\n'
        '[[supervisor.children]]\nid = "sluggish"\ncommand = ["sleep", "600"]\nready = 8\n'
        "start_timeout = 20\n"
        '[[supervisor.children]]\nid = "later"\ncommand = ["sleep", "600"]\n'
    )
    env = _env(tmp_path)
    args = ["--socket", str(tmp_path / "s.sock"), "--plain", "--metrics", "0"]
    with Proc("run", str(tree), *args, env=env) as run:
        url = run.expect(r"^nannytree: metrics: (http://\S+)$")[1]
        run.expect(r"mon/quick child_started")
        asked = time.monotonic()
        samples = scrape(url)  # the root waits on sluggish's `ready` for 8 s
        took = time.monotonic() - asked
        assert took < 2.0, f"a scrape took {took:.2f}s during a slow start"
        assert child(samples, "child_ready", "quick") == 1
        assert child(samples, "child_ready", "sluggish") == 0
        assert child(samples, "child_state", "later", nannytree_child_state="starting") == 1
        assert child(samples, "child_up", "later") == 0  # no process yet
        assert headroom(samples) == 4
        assert samples[("nannytree_tree_up", frozenset({"tree": "mon"}.items()))] == 1
        rc, output = run.finish(signal.SIGINT)
    assert rc == 0, output


def test_the_metrics_address_is_loopback_unless_a_host_is_written() -> None:
    assert metrics_address("9100") == ("127.0.0.1", 9100)
    assert metrics_address("0.0.0.0:9100") == ("0.0.0.0", 9100)
    assert metrics_address("[::1]:9100") == ("::1", 9100)
    assert metrics_address("localhost:0") == ("localhost", 0)
    for bad in ("", "web", "9100:", ":9100", "host:70000", "1.2.3.4:-1"):
        try:
            metrics_address(bad)
        except ValueError as e:
            assert "--metrics takes PORT or HOST:PORT" in str(e)
        else:
            raise AssertionError(f"{bad!r} was taken")


def test_the_event_log_is_kept_by_default_in_the_trees_log_folder(tmp_path: Path) -> None:
    """Without --event-log, the events go to `<log dir>/<tree>/events.jsonl`, beside
    the children's logs (never the runtime directory), dated, to the end of the run."""
    env = {**_env(tmp_path), "NANNYTREE_LOG_DIR": str(tmp_path / "logs")}
    sock = tmp_path / "m.sock"
    with Proc("run", str(_tree(tmp_path)), "--socket", str(sock), "--plain", env=env) as run:
        run.expect(r"mon/db child_started")
        cli("stop", "web", "--socket", str(sock), env=env)
        assert cli("shutdown", "--socket", str(sock), env=env).returncode == 0
        rc, output = run.finish()
    assert rc == 0, output
    journal = tmp_path / "logs" / "m" / "events.jsonl"
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    whats = [line["what"] for line in lines]
    assert whats[0] == "supervisor_started" and whats[-1] == "supervisor_stopped", whats
    assert "operator_action" in whats
    assert all(
        datetime.datetime.fromisoformat(line["ts"]).utcoffset() is not None for line in lines
    )
    assert not list(tmp_path.glob("*.events.jsonl"))
