"""supervisord's and systemd's key names, and supervisord's %(...)s expansions, in a
tree file: refused with nannytree's key and the value as nannytree takes it
(supervision/config/_foreign.py; the migration guides' mapping)."""

from __future__ import annotations

import pytest

from supervision import ConfigError, load_tree

FOREIGN_KEYS = [
    (
        "stopwaitsecs = 10",
        'stopwaitsecs is supervisord\'s: did you mean "shutdown"? use shutdown = 10',
    ),
    ('autorestart = "unexpected"', 'use restart = "transient"'),
    ("autorestart = false", 'use restart = "temporary"'),
    ("startretries = 3", "use restart_limit = { intensity = 3, period = 60 }"),
    ('stopsignal = "QUIT"', 'use stop_signal = "QUIT"'),
    ("""environment = 'A="x y",B=2'""", 'use env = { A = "x y", B = "2" }'),
    ('directory = "/srv/app"', 'did you mean "cwd"? use cwd = "/srv/app"'),
    ('stdout_logfile = "/var/log/a.log"', 'use stdout = "/var/log/a.log"'),
    ("startsecs = 5", "use min_uptime = 5"),
    ('exitcodes = "0,3"', "use normal_exit_codes = [0, 3]"),
    (
        "autostart = true",
        "autostart is supervisord's: use nothing: every child starts with its tree",
    ),
    ('EnvironmentFile = "-/etc/default/app"', 'use env_file = "-/etc/default/app"'),
    (
        'TimeoutStopSec = "20s"',
        'TimeoutStopSec is systemd\'s: did you mean "shutdown"? use shutdown = 20',
    ),
    ('Restart = "on-failure"', 'use restart = "transient"'),
    ('ExecStart = "/usr/bin/app"', 'use command = "/usr/bin/app"'),
    ('exec_start_pre = "/usr/bin/app -t"', 'use start_check = "/usr/bin/app -t"'),
    ('Type = "notify"', 'use ready = "sd_notify"'),
    ('KillMode = "mixed"', 'use kill_mode = "main"'),
    ("RestartSec = 2", "use backoff = { initial = 2, factor = 1, max = 2, jitter = 0 }"),
]


@pytest.mark.parametrize(("line", "hint"), FOREIGN_KEYS)
def test_a_supervisord_or_systemd_key_names_nannytrees(line: str, hint: str) -> None:
    text = (
        f'[supervisor]\nid = "t"\n[[supervisor.children]]\nid = "a"\ncommand = ["true"]\n{line}\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_tree(text, "t.toml")
    (error,) = caught.value.errors
    assert error.path == f"supervisor.children[0].{line.split()[0]}"
    assert hint in error.expected, error.expected


def test_a_foreign_key_whose_key_is_not_allowed_here_says_so() -> None:
    with pytest.raises(ConfigError) as caught:
        load_tree('[supervisor]\nid = "t"\nstopwaitsecs = 3\n', "t.toml")
    assert "stopwaitsecs is supervisord's: nannytree's is shutdown" in str(caught.value)


def test_execstart_without_command_is_not_also_missing_a_command() -> None:
    text = '[supervisor]\nid = "t"\n[[supervisor.children]]\nid = "a"\nExecStart = "/bin/app"\n'
    with pytest.raises(ConfigError) as caught:
        load_tree(text, "t.toml")
    assert [e.path for e in caught.value.errors] == ["supervisor.children[0].ExecStart"]


FORMS = [
    (
        'command = "app --port %(ENV_PORT)s"',
        "command",
        "%(ENV_PORT)s is supervisord's: write ${PORT}",
    ),
    ('args = ["%(ENV_X)s"]', "args", "write ${X}"),
    ('cwd = "%(here)s/app"', "cwd", "relative paths are relative to its folder"),
    ('stdout = "/var/log/%(program_name)s.log"', "stdout", "write the child's id"),
    ('env = { N = "%(process_num)02d" }', "env.N", "simple_one_for_one"),
]


@pytest.mark.parametrize(("line", "where", "fix"), FORMS)
def test_a_supervisord_expansion_is_named_with_nannytrees_way(
    line: str, where: str, fix: str
) -> None:
    # The child's program, unless the line gives it (args go with a target).
    program = {"args": 'target = "m:f"', "command": ""}.get(where, 'command = ["true"]')
    text = f'[supervisor]\nid = "t"\n[[supervisor.children]]\nid = "a"\n{program}\n{line}\n'
    with pytest.raises(ConfigError) as caught:
        load_tree(text, "t.toml")
    (error,) = caught.value.errors
    assert error.path == f"supervisor.children[0].{where}"
    assert fix in error.expected, error.expected


def test_a_python_logging_format_is_not_taken_for_supervisords() -> None:
    text = '[supervisor]\nid = "t"\n[[supervisor.children]]\nid = "a"\ncommand = ["true"]\n'
    text += 'env = { LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s" }\n'
    assert load_tree(text, "t.toml").children[0].env == {
        "LOG_FORMAT": "%(asctime)s %(levelname)s %(message)s"
    }
