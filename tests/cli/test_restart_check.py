"""`nannytree restart` of a child with a reload check, end to end (docs/reference/cli.md,
`restart`): the check runs first, as `reload` runs it; when it fails the restart is
refused with its output and the child runs on, its pid unchanged."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from actors.testing import wait_gone
from tests.cli.test_commands import _env, cli, pids, status
from tests.cli.test_update import started


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return _env(tmp_path)


def test_a_restart_whose_check_fails_is_refused_and_the_child_runs_on(
    tmp_path: Path, env: dict[str, str]
) -> None:
    ok = tmp_path / "config-ok"
    check = f"test -e {ok} || {{ echo 'nginx: [emerg] unknown directive \\\"frob\\\"'; exit 1; }}"
    text = (
        '[supervisor]\nid = "shop"\n'
        '[[supervisor.children]]\nid = "web"\ncommand = ["sleep", "600"]\nshutdown = 2\n'
        f'reload = {{ signal = "HUP", check = ["sh", "-c", "{check}"] }}\n'
    )
    tree, sock = tmp_path / "t.toml", str(tmp_path / "t.sock")
    with started(tree, text, sock, env, "shop/web") as run:
        before = pids(status(Path(sock), env))["shop/web"]
        out = cli("restart", "web", "--socket", sock, env=env)
        assert out.returncode == 1, out
        assert "child 'web': not restarted, it runs on: its check" in out.stderr, out
        assert 'nginx: [emerg] unknown directive "frob"' in out.stderr, out
        assert "or stop and start it to restart it anyway" in out.stderr, out
        assert pids(status(Path(sock), env))["shop/web"] == before
        everything = cli("restart", "all", "--socket", sock, env=env)
        assert everything.returncode == 1 and "not restarted" in everything.stderr, everything
        assert pids(status(Path(sock), env))["shop/web"] == before
        ok.touch()  # the configuration fixed: the restart goes through
        out = cli("restart", "web", "--socket", sock, env=env)
        assert out.returncode == 0, out
        after = pids(status(Path(sock), env))["shop/web"]
        assert after != before and out.stdout == f"restarted shop/web: pid {before} -> {after}\n"
        rc, _ = run.finish(signal.SIGINT)
    assert rc == 0
    assert wait_gone([before, after]) == []
