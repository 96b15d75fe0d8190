"""Keys of supervisord's and systemd's files written in a tree file: each gets a "did
you mean" naming nannytree's key, its value written as nannytree takes it where it
can be ("`stopwaitsecs` is supervisord's: use `shutdown = 10`"). The mapping is the
migration guides' (docs/how-to/from-supervisord.md, from-systemd.md). Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_SUPERVISORD = "supervisord"
_SYSTEMD = "systemd"


def _toml(value: Any) -> str:
    """A value as TOML text: a string quoted, a number or boolean as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def _number(value: Any) -> str:
    """Seconds or a count: as written if it is a number (systemd's "10s" too)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec)?", text)
    return match[1] if match else "SECONDS"


def _same(key: str) -> Callable[[Any], str]:
    return lambda v: f"{key} = {_toml(v)}"


def _seconds(key: str) -> Callable[[Any], str]:
    return lambda v: f"{key} = {_number(v)}"


def _choice(key: str, table: dict[str, str], other: str) -> Callable[[Any], str]:
    def hint(value: Any) -> str:
        found = table.get(str(value).lower())
        return f'{key} = "{found}"' if found else other

    return hint


def _fixed(text: str) -> Callable[[Any], str]:
    return lambda v: text


def _codes(value: Any) -> str:
    codes = re.findall(r"\d+", str(value)) if not isinstance(value, list) else value
    return f"normal_exit_codes = [{', '.join(str(c) for c in codes)}]"


def _environment(value: Any) -> str:
    """supervisord's `A="1",B=2` or systemd's `A=1 B=2` as an env table."""
    pairs = re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\'[^\']*\'|[^,\s]*)', str(value))
    if not pairs:
        return 'env = { NAME = "value" }'
    inner = ", ".join(f"{k} = {json.dumps(v.strip(chr(34) + chr(39)))}" for k, v in pairs)
    return f"env = {{ {inner} }}"


_RESTART_SUPERVISORD = {"true": "permanent", "unexpected": "transient", "false": "temporary"}
_RESTART_SYSTEMD = {
    "always": "permanent",
    "on-failure": "transient",
    "on-abnormal": "transient",
    "no": "temporary",
}
_TYPE = {"simple": "started", "exec": "started", "notify": "sd_notify", "oneshot": "exited"}

# Foreign key -> (whose, the nannytree key it becomes or None, the hint from its value).
FOREIGN: dict[str, tuple[str, str | None, Callable[[Any], str]]] = {
    # supervisord's [program:x] (docs/how-to/from-supervisord.md)
    "stopwaitsecs": (_SUPERVISORD, "shutdown", _seconds("shutdown")),
    "autorestart": (
        _SUPERVISORD,
        "restart",
        _choice("restart", _RESTART_SUPERVISORD, 'restart = "permanent"'),
    ),
    "startretries": (
        _SUPERVISORD,
        "restart_limit",
        lambda v: f"restart_limit = {{ intensity = {_number(v)}, period = 60 }}",
    ),
    "stopsignal": (_SUPERVISORD, "stop_signal", _same("stop_signal")),
    "environment": (_SUPERVISORD, "env", _environment),
    "directory": (_SUPERVISORD, "cwd", _same("cwd")),
    "stdout_logfile": (_SUPERVISORD, "stdout", _same("stdout")),
    "stderr_logfile": (_SUPERVISORD, "stderr", _same("stderr")),
    "startsecs": (_SUPERVISORD, "min_uptime", _seconds("min_uptime")),
    "exitcodes": (_SUPERVISORD, "normal_exit_codes", _codes),
    "stdout_logfile_maxbytes": (_SUPERVISORD, "log_max_bytes", _same("log_max_bytes")),
    "stdout_logfile_backups": (_SUPERVISORD, "log_backups", _same("log_backups")),
    "redirect_stderr": (
        _SUPERVISORD,
        "stderr",
        _fixed("stdout and stderr the same path, or neither (the default log file holds both)"),
    ),
    "stopasgroup": (_SUPERVISORD, "kill_mode", _fixed('kill_mode = "group" (the default)')),
    "killasgroup": (_SUPERVISORD, "kill_mode", _fixed('kill_mode = "group" (the default)')),
    "autostart": (_SUPERVISORD, None, _fixed("nothing: every child starts with its tree")),
    "priority": (_SUPERVISORD, None, _fixed("the order of the children in the file")),
    "numprocs": (
        _SUPERVISORD,
        None,
        _fixed('a supervisor with strategy = "simple_one_for_one" and `nannytree add`'),
    ),
    "process_name": (_SUPERVISORD, "id", _same("id")),
    "minfds": (_SUPERVISORD, "limits", lambda v: f"limits = {{ nofile = {_number(v)} }}"),
    "minprocs": (_SUPERVISORD, "limits", lambda v: f"limits = {{ nproc = {_number(v)} }}"),
    # systemd's [Service] (docs/how-to/from-systemd.md)
    "ExecStart": (_SYSTEMD, "command", _same("command")),
    "ExecStartPre": (_SYSTEMD, "start_check", _same("start_check")),
    "ExecReload": (
        _SYSTEMD,
        "reload",
        _fixed('reload = "HUP", or { signal = "HUP", check = [...] }'),
    ),
    "ExecStop": (_SYSTEMD, None, _fixed("nothing: a child is stopped by its stop_signal")),
    "EnvironmentFile": (_SYSTEMD, "env_file", _same("env_file")),
    "Environment": (_SYSTEMD, "env", _environment),
    "WorkingDirectory": (_SYSTEMD, "cwd", _same("cwd")),
    "User": (_SYSTEMD, "user", _same("user")),
    "Group": (_SYSTEMD, "group", _same("group")),
    "TimeoutStopSec": (_SYSTEMD, "shutdown", _seconds("shutdown")),
    "TimeoutStartSec": (_SYSTEMD, "start_timeout", _seconds("start_timeout")),
    "Restart": (
        _SYSTEMD,
        "restart",
        _choice("restart", _RESTART_SYSTEMD, 'restart = "permanent"'),
    ),
    "RestartSec": (
        _SYSTEMD,
        "backoff",
        lambda v: (
            f"backoff = {{ initial = {_number(v)}, factor = 1, max = {_number(v)}, jitter = 0 }}"
        ),
    ),
    "KillSignal": (_SYSTEMD, "stop_signal", _same("stop_signal")),
    "KillMode": (
        _SYSTEMD,
        "kill_mode",
        _choice("kill_mode", {"control-group": "group", "mixed": "main"}, 'kill_mode = "group"'),
    ),
    "WatchdogSec": (_SYSTEMD, "watchdog", _seconds("watchdog")),
    "PIDFile": (_SYSTEMD, "pid_file", _same("pid_file")),
    "Type": (_SYSTEMD, "ready", _choice("ready", _TYPE, 'ready = "started"')),
    "SuccessExitStatus": (_SYSTEMD, "normal_exit_codes", _codes),
    "StandardOutput": (_SYSTEMD, "stdout", _fixed('stdout = "path" or "capture"')),
    "StandardError": (_SYSTEMD, "stderr", _fixed('stderr = "path" or "capture"')),
    "MemoryMax": (_SYSTEMD, "memory_limit", _same("memory_limit")),
    "NoNewPrivileges": (_SYSTEMD, "no_new_privileges", _fixed("no_new_privileges = true")),
    "LimitNOFILE": (_SYSTEMD, "limits", lambda v: f"limits = {{ nofile = {_toml(v)} }}"),
    "LimitNPROC": (_SYSTEMD, "limits", lambda v: f"limits = {{ nproc = {_toml(v)} }}"),
    "LimitCORE": (_SYSTEMD, "limits", lambda v: f"limits = {{ core = {_toml(v)} }}"),
    "StartLimitBurst": (
        _SYSTEMD,
        "restart_limit",
        lambda v: f"restart_limit = {{ intensity = {_number(v)}, period = 10 }}",
    ),
    "StartLimitIntervalSec": (
        _SYSTEMD,
        "restart_limit",
        lambda v: f"restart_limit = {{ intensity = 5, period = {_number(v)} }}",
    ),
}
# ExecStart as execstart or exec_start too; supervisord's own names as written.
_BY_LOWER = {k.lower().replace("_", ""): k for k in FOREIGN if k[0].isupper()}


def foreign_hint(key: str, value: Any, allowed: tuple[str, ...]) -> str | None:
    """The hint for a key of supervisord's or systemd's (None: not one of theirs)."""
    name = key if key in FOREIGN else _BY_LOWER.get(key.lower().replace("_", ""))
    if name is None:
        return None
    whose, ours, hint = FOREIGN[name]
    if ours is not None and ours not in allowed:
        return f"{key} is {whose}'s: nannytree's is {ours}, which is not a key of this table"
    try:
        text = hint(value)
    except Exception:  # a value of a shape the hint does not expect: the key alone
        text = ours or "nothing"
    meant = f'did you mean "{ours}"? ' if ours is not None else ""
    return f"{key} is {whose}'s: {meant}use {text}"


# supervisord's expansions in a value (`%(ENV_PORT)s`, `%(here)s`): passed on as
# written, a program would get them as text; each gets nannytree's way to say it.
_FORM = re.compile(
    r"%\((ENV_[A-Za-z_][A-Za-z0-9_]*|here|program_name|process_num|group_name"
    r"|host_node_name|numprocs)\)[-#0 +]*\d*[sd]"
)
FORM_KEYS = ("command", "args", "cwd", "stdout", "stderr", "pid_file", "env", "start_check")


def _form_fix(name: str) -> str:
    if name.startswith("ENV_"):
        var = name.removeprefix("ENV_")
        return f"write ${{{var}}} (from nannytree's environment; ${{{var}:-default}} for a default)"
    return {
        "here": "write a path relative to the tree file: relative paths are relative to its folder",
        "program_name": "write the child's id",
        "group_name": "write its supervisor's id",
        "host_node_name": "write the host's name",
        "process_num": "copies of a program are a simple_one_for_one supervisor's children, "
        "added with `nannytree add`",
        "numprocs": "copies of a program are a simple_one_for_one supervisor's children, "
        "added with `nannytree add`",
    }[name]


def form_problems(
    table: dict[str, Any], path: str, error: Callable[[str, Any, str], Any]
) -> list[Any]:
    """An error (made by `error(path, value, expected)`) for each value of a worker's
    FORM_KEYS that holds one of supervisord's %(...)s expansions."""
    found = []
    for key in FORM_KEYS:
        value = table.get(key)
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for name, item in items:
            texts = item if isinstance(item, list) else [item]
            for text in texts:
                match = _FORM.search(text) if isinstance(text, str) else None
                if match is None:
                    continue
                where = f"{path}.{key}" if name is None else f"{path}.{key}.{name}"
                found.append(
                    error(where, item, f"{match[0]} is supervisord's: {_form_fix(match[1])}")
                )
                break
    return found
