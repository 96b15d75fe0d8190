"""What each key of a tree file means: the source of the site's TOML reference
(docs/_hooks/reference.py loads it; no runtime code reads it). Pure.

Every table a tree file has is one `TableDoc`: the key tuple the loader checks
(`supervision/config/_keys.py`), the spec class its keys become, and one `KeyDoc` per key:
its type as written in TOML, the field it maps to ("ChildSpec.command") and a
sentence. Defaults are not written here: the reference reads them from the field
itself (the dataclass default, or the engine's parameter). A key added to a tuple
without a `KeyDoc` here fails tests/docs/test_reference.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from supervision.config._keys import (
    BACKOFF_KEYS,
    DEFAULTS_KEYS,
    ENGINE_KEYS,
    FILE_READY_KEYS,
    LIVENESS_KEYS,
    LOG_READY_KEYS,
    PLACEMENT_KEYS,
    PROBE_KEYS,
    RELOAD_KEYS,
    RESTART_LIMIT_KEYS,
    ROOT_KEYS,
    SUPERVISOR_KEYS,
    TREE_KEYS,
    WORKER_KEYS,
)
from supervision.spec._probes import LIVENESS_PERIOD, READY_PERIOD
from supervision.spec._sockets import SOCKET_KEYS


@dataclass(frozen=True)
class KeyDoc:
    """One key: its TOML type, the spec field it sets ("Class.field", or None when it
    sets none), a sentence, and the default to show when the field has none."""

    toml: str
    field: str | None
    text: str
    default: str | None = None


@dataclass(frozen=True)
class TableDoc:
    """One table of a tree file: where it is written, its keys, what they mean."""

    name: str  # the anchor and the table's key, e.g. "worker", "backoff"
    title: str
    where: str  # how it is written in a file
    keys: tuple[str, ...]
    docs: dict[str, KeyDoc]


_AS_CHILD = {
    "restart": KeyDoc(
        '"permanent" | "transient" | "temporary"',
        "{spec}.restart",
        "permanent: restarted whatever ends it; transient: only after an abnormal exit; "
        "temporary: never, and forgotten when it ends.",
    ),
    "shutdown": KeyDoc(
        'float (seconds) | "brutal_kill" | "infinity"',
        "{spec}.shutdown",
        "Seconds from the stop signal to SIGKILL; brutal_kill: SIGKILL at once; infinity: "
        "wait forever. A supervisor's bounds its whole subtree.",
    ),
    "significant": KeyDoc(
        "boolean",
        "{spec}.significant",
        "Its exit may stop its supervisor, when that one sets auto_shutdown.",
    ),
    "backoff": KeyDoc(
        "boolean | table",
        "{spec}.backoff",
        "Wait between restarts: true (the defaults), false, or a "
        "[backoff table](#backoff). None: restarted at once, as OTP.",
    ),
}

_LOG = {
    "log_max_bytes": KeyDoc(
        'integer (bytes) | string ("10M")',
        "ChildSpec.log_max_bytes",
        "Rotate a child's log file before it passes this size (0: never); powers of "
        "1024. None: `nannytree run --log-max-bytes` (10M). See [logs](../logs.md).",
    ),
    "log_backups": KeyDoc(
        "integer",
        "ChildSpec.log_backups",
        "Older log files kept, file.1 ... file.N (0 to 1000). None: `--log-backups` (5).",
    ),
    "log_timestamps": KeyDoc(
        "boolean",
        "ChildSpec.log_timestamps",
        "Start each line of the log file with its UTC time. None: `--log-timestamps` (off).",
    ),
}


def _below(docs: dict[str, KeyDoc]) -> dict[str, KeyDoc]:
    """The log keys on a supervisor: the default of every worker below it."""
    return {
        k: KeyDoc(d.toml, d.field, "The default for every worker below. " + d.text)
        for k, d in docs.items()
    }


def _spec(docs: dict[str, KeyDoc], spec: str) -> dict[str, KeyDoc]:
    return {
        k: KeyDoc(d.toml, d.field.format(spec=spec) if d.field else None, d.text, d.default)
        for k, d in docs.items()
    }


_WORKER = {
    "id": KeyDoc(
        "string",
        "ChildSpec.id",
        'Unique among its siblings, without "/".',
        default="required",
    ),
    "type": KeyDoc(
        '"worker" | "supervisor"',
        None,
        "What the table is; guessed when left out: a supervisor has children or strategy.",
        default='"worker"',
    ),
    **_spec(_AS_CHILD, "ChildSpec"),
    "command": KeyDoc(
        "array of strings | string",
        "ChildSpec.command",
        "Exactly one of command or target. The program and its arguments, no shell; "
        "a string is split with shell quoting rules (no pipes or $VARS: write "
        '["sh", "-c", "..."]).',
    ),
    "target": KeyDoc(
        'string ("module:function")',
        "ChildSpec.target",
        "Exactly one of command or target. A Python function, imported from the "
        "file's directory or the Python path, and run in the child.",
    ),
    "args": KeyDoc("array", "ChildSpec.args", "Positional arguments of the target."),
    "kwargs": KeyDoc("table", "ChildSpec.kwargs", "Keyword arguments of the target."),
    "env": KeyDoc(
        "table of strings",
        "ChildSpec.env",
        "Variables added to the parent's environment (or the whole of it, with "
        "inherit_env = false). With user, only PATH and the locale are the parent's: "
        "pass anything else here, on purpose.",
    ),
    "inherit_env": KeyDoc(
        "boolean",
        "ChildSpec.inherit_env",
        "false: start from an empty environment. With user, only PATH, LANG, LANGUAGE, "
        "TZ and LC_* are inherited.",
    ),
    "cwd": KeyDoc(
        "string (path)",
        "ChildSpec.cwd",
        "Working directory, relative to the file's directory. None: the parent's.",
    ),
    "ready": KeyDoc(
        "string | float | table",
        "ChildSpec.ready",
        'When the child counts as started: "started", "notify" (a target calls '
        'actors.child.ready()), "sd_notify" (a command sends READY=1), "exited" (a '
        "one-shot step), seconds of uptime, or a [probe table](#readiness-probes). "
        "See [health](../health.md).",
    ),
    "start_timeout": KeyDoc(
        "float (seconds)",
        "ChildSpec.start_timeout",
        "How long `ready` may take; later, the start fails (reason start_timeout).",
    ),
    "min_uptime": KeyDoc(
        "float (seconds)",
        "ChildSpec.min_uptime",
        "An exit sooner than this after the start is a failed start (supervisord's startsecs).",
    ),
    "memory_limit": KeyDoc(
        'integer (bytes) | string ("512M")',
        "ChildSpec.memory_limit",
        "Bound on the RSS of the child's process tree (powers of 1024); over it the "
        "child is stopped (reason memory_limit). None: no limit.",
    ),
    "stdout": KeyDoc(
        'string (path) | "capture"',
        "ChildSpec.stdout",
        "A file to append to (relative to the file's directory), or capture: the last "
        "64 KiB, for `nannytree logs`. None: `nannytree run --child-output`.",
    ),
    "stderr": KeyDoc(
        'string (path) | "capture"',
        "ChildSpec.stderr",
        "As stdout. The tail of stderr travels with an abnormal exit reason whatever it says.",
    ),
    "normal_exit_codes": KeyDoc(
        "array of integers (0-255)",
        "ChildSpec.normal_exit_codes",
        "Exit codes that count as a normal exit.",
    ),
    "fresh_interpreter": KeyDoc(
        "boolean",
        "ChildSpec.fresh_interpreter",
        "A target runs in a new interpreter instead of a fork of the launcher (slower); "
        "one with user or group always does.",
    ),
    "warm_start": KeyDoc(
        "boolean",
        "ChildSpec.warm_start",
        "A target's next incarnation waits forked ahead, imports done: a restart only says go.",
    ),
    "stop_signal": KeyDoc(
        'string ("QUIT", "SIGQUIT") | integer',
        "ChildSpec.stop_signal",
        "The signal that asks the child to stop; SIGKILL follows after `shutdown`.",
    ),
    "kill_mode": KeyDoc(
        '"group" | "main"',
        "ChildSpec.kill_mode",
        "group: the stop signal goes to the child's process group; main: to its main "
        "process only, the group SIGKILLed when shutdown runs out (systemd's KillMode=mixed).",
    ),
    "watchdog": KeyDoc(
        "float (seconds)",
        "ChildSpec.watchdog",
        "The child must send WATCHDOG=1 (a command) or call actors.child.heartbeat() "
        "(a target) this often, or it is stopped (reason watchdog).",
    ),
    "pid_file": KeyDoc(
        "string (path)",
        "ChildSpec.pid_file",
        "For a command that forks itself into the background: the file naming its "
        "main process (systemd's Type=forking).",
    ),
    "reload": KeyDoc(
        'string ("HUP") | integer | table',
        "ChildSpec.reload",
        "What `nannytree reload ID` does: a signal, or a [reload table](#reload).",
    ),
    "liveness": KeyDoc(
        "table",
        "ChildSpec.liveness",
        "A [liveness probe](#liveness): a ready child that fails it too often is "
        "stopped (reason unhealthy) and restarted.",
    ),
    "restart_limit": KeyDoc(
        "table | false",
        "ChildSpec.restart_limit",
        "The child's own restart intensity, a [restart_limit table](#restart_limit): "
        "one restart too many leaves it failed, its siblings running. In a tree file, "
        "left out: `{ intensity = 5, period = 30 }` for a worker restarted alone "
        "(one_for_one, simple_one_for_one; not temporary), or [defaults](#defaults)'; "
        "false: none, its restarts charge its supervisor, as OTP's.",
    ),
    "required": KeyDoc(
        "boolean",
        "ChildSpec.required",
        "false: a failed first start leaves the child failed (supervisord's FATAL) and "
        "its siblings start; true: it fails the tree's start, as OTP's init.",
    ),
    **_LOG,
    "sockets": KeyDoc(
        "array of tables",
        "ChildSpec.sockets",
        "Listening sockets bound once and passed to every incarnation, systemd's way: "
        "[socket tables](#sockets). See [sockets](../sockets.md).",
    ),
    "user": KeyDoc(
        "string | integer",
        "ChildSpec.user",
        "Run the child, its probes and checks as this user, with its groups, HOME, USER, "
        "LOGNAME, SHELL and a clean environment (nannytree as root only).",
    ),
    "group": KeyDoc(
        "string | integer", "ChildSpec.group", "Run the child with this group (as root only)."
    ),
    "start_check": KeyDoc(
        "array of strings | string",
        "ChildSpec.start_check",
        "A command run before each start, as the child (its user, env and cwd); a "
        "failure fails the start (systemd's ExecStartPre=).",
    ),
    "start_check_timeout": KeyDoc(
        "float (seconds)",
        "ChildSpec.start_check_timeout",
        "How long start_check may run.",
    ),
    "start_check_as_root": KeyDoc(
        "boolean",
        "ChildSpec.start_check_as_root",
        "true: run start_check as nannytree (root), with its environment, in /, not as "
        "the child's user (systemd's + prefix). Only with user or group.",
    ),
    "no_new_privileges": KeyDoc(
        "boolean",
        "ChildSpec.no_new_privileges",
        "No exec by the child or its descendants may gain privileges: setuid binaries "
        "and file capabilities do nothing (systemd's NoNewPrivileges=).",
    ),
    "limits": KeyDoc(
        "table",
        "ChildSpec.limits",
        "Resource limits set before the child starts (systemd's LimitNOFILE= and friends): "
        '{ nofile = 4096, core = 0, as = "4G", nproc = "256:512" }; a number, "infinity" '
        'or "SOFT:HARD". Unset: the limits nannytree was started with. See '
        "[the launcher](../launcher.md#resource-limits-and-no_new_privileges).",
    ),
    "env_file": KeyDoc(
        "string | array of strings (paths)",
        None,
        "Files of KEY=VALUE lines in systemd's EnvironmentFile= format, read when the "
        "tree is loaded (check, run, update), with the child's user's rights; `-` before "
        "a path: it may be missing. Its variables override the top-level env_file's; "
        "env overrides both. [Environment files](#environment-files).",
        default="none",
    ),
}

_TREE = {
    "env_file": KeyDoc(
        "string | array of strings (paths)",
        None,
        "Env files for every worker of the tree; a worker's own env_file and env "
        "override them. [Environment files](#environment-files).",
        default="none",
    ),
}

_SUPERVISOR_OWN = {
    "strategy": KeyDoc(
        '"one_for_one" | "one_for_all" | "rest_for_one" | "simple_one_for_one"',
        "SupervisorSpec.strategy",
        "Which children a failure restarts: itself; all; itself and those started "
        "after it; simple_one_for_one: one template, children added at run time.",
    ),
    "intensity": KeyDoc(
        "integer",
        "SupervisorSpec.intensity",
        "At most this many restarts in any `period`; one more and the supervisor gives up.",
    ),
    "period": KeyDoc("float (seconds)", "SupervisorSpec.period", "The window of `intensity`."),
    "auto_shutdown": KeyDoc(
        '"never" | "any_significant" | "all_significant"',
        "SupervisorSpec.auto_shutdown",
        "Stop the supervisor when any (or all) of its significant children ended.",
    ),
    "max_children": KeyDoc(
        "integer",
        "SupervisorSpec.max_children",
        "simple_one_for_one only: at most this many children. None: no bound.",
    ),
    "children": KeyDoc(
        "array of tables",
        "SupervisorSpec.children",
        "Its children, `[[...children]]` tables, started in file order.",
    ),
}

_SUPERVISOR = {
    "id": KeyDoc(
        "string", "SupervisorSpec.id", 'Unique among its siblings, without "/".', default="required"
    ),
    "type": KeyDoc(
        '"supervisor"',
        None,
        "Makes a table a supervisor; not needed when it has children or strategy.",
        default="guessed",
    ),
    **_spec(_AS_CHILD, "SupervisorSpec"),
    **_SUPERVISOR_OWN,
    "placement": KeyDoc(
        "table",
        "SupervisorSpec.placement",
        "Run this subtree on another host: a [placement table](#placement). None: in "
        "its parent's process.",
    ),
    **_below(_LOG),
}

_ROOT = {
    "id": KeyDoc(
        "string",
        "SupervisorSpec.id",
        "The tree's id: names its control socket and its log folder.",
        default="the file's name without .toml",
    ),
    **{k: d for k, d in _SUPERVISOR.items() if k in ROOT_KEYS and k != "id"},
}

_BACKOFF = {
    "initial": KeyDoc(
        "float (seconds)", "Backoff.initial", "The wait after the first failure in a row."
    ),
    "factor": KeyDoc(
        "float", "Backoff.factor", "Each further failure in a row multiplies the wait by this."
    ),
    "max": KeyDoc("float (seconds)", "Backoff.max", "The longest wait."),
    "jitter": KeyDoc(
        "float (fraction in [0, 1))", "Backoff.jitter", "Each wait is +/- this fraction."
    ),
    "reset_after": KeyDoc(
        "float (seconds)",
        "Backoff.reset_after",
        "A run this long starts the count of failures again.",
    ),
}

_RESTART_LIMIT = {
    "intensity": KeyDoc(
        "integer",
        "RestartLimit.intensity",
        "At most this many restarts of the child in any `period`; one more leaves it failed.",
    ),
    "period": KeyDoc("float (seconds)", "RestartLimit.period", "The window of `intensity`."),
}

_RELOAD = {
    "signal": KeyDoc(
        "string | integer",
        "Reload.signal",
        "Sent to the child's main process (not KILL or STOP).",
    ),
    "check": KeyDoc(
        "array of strings | string",
        "Reload.check",
        "Run first, as the child (its user, env and cwd); a failure refuses the reload (nginx -t).",
    ),
    "check_timeout": KeyDoc(
        "float (seconds)", "Reload.check_timeout", "A longer check refuses the reload."
    ),
    "check_as_root": KeyDoc(
        "boolean",
        "Reload.check_as_root",
        "true: run the check as nannytree (root), with its environment, in /, not as the "
        "child's user (systemd's + prefix). Only with user or group.",
    ),
}

_PLACEMENT = {
    "node": KeyDoc(
        "string",
        "Placement.node",
        'A node id or name: required by "pinned", the first choice of "prefer".',
    ),
    "labels": KeyDoc(
        "table of strings", "Placement.labels", "Labels an eligible node carries, same values."
    ),
    "resources": KeyDoc(
        "table of numbers", "Placement.resources", "Custom resources an eligible node offers."
    ),
    "policy": KeyDoc(
        '"prefer" | "pinned" | "spread"',
        "Placement.policy",
        "prefer: where it ran, else node, else fallback, else any; pinned: only node; "
        "spread: the next eligible node each restart. See [multihost](../multihost.md).",
    ),
    "fallback": KeyDoc(
        "array of strings", "Placement.fallback", 'Nodes "prefer" tries, in order, after node.'
    ),
    "wait": KeyDoc(
        "float (seconds)",
        "Placement.wait",
        "How long a restart no node can take stays pending, charged nothing. None: "
        "until a node fits.",
    ),
}

_PROBE_TIMING = {
    "timeout": KeyDoc("float (seconds)", "{spec}.timeout", "How long one attempt may take."),
    "period": KeyDoc(
        "float (seconds)",
        "{spec}.period",
        f"Between attempts. None: {READY_PERIOD:g} s as readiness, {LIVENESS_PERIOD:g} s "
        "as liveness.",
    ),
}

_PROBES = {
    "tcp": {
        "tcp": KeyDoc(
            "integer (port)",
            "TcpProbe.port",
            "Passes when the port accepts a connection (as readiness: a port the child holds).",
            default="required",
        ),
        "host": KeyDoc("string", "TcpProbe.host", "The address to connect to."),
        **_spec(_PROBE_TIMING, "TcpProbe"),
    },
    "http": {
        "http": KeyDoc(
            'string ("http://...")',
            "HttpProbe.url",
            "Passes when a GET answers a status in `status` (plain http only).",
            default="required",
        ),
        "status": KeyDoc(
            "integer | array of integers", "HttpProbe.status", "The statuses that pass."
        ),
        **_spec(_PROBE_TIMING, "HttpProbe"),
    },
    "exec": {
        "exec": KeyDoc(
            "array of strings | string",
            "ExecProbe.argv",
            "Passes when this command exits 0, run as the child (its user, env and cwd).",
            default="required",
        ),
        **_spec(_PROBE_TIMING, "ExecProbe"),
        "as_root": KeyDoc(
            "boolean",
            "ExecProbe.as_root",
            "true: run it as nannytree (root), with its environment, in /, not as the "
            "child's user (systemd's + prefix). Only with user or group.",
        ),
    },
}

_LOG_READY = {
    "log": KeyDoc(
        "string (regex)",
        "LogLine.pattern",
        "Ready once a line the child writes matches (re.search); readiness only.",
        default="required",
    ),
    "stream": KeyDoc('"stdout" | "stderr" | "both"', "LogLine.stream", "The stream read."),
}

_FILE_READY = {
    "file": KeyDoc(
        "string (path)",
        "ReadyFile.path",
        "Ready once this file exists (removed before each start); relative to the file's "
        "directory.",
        default="required",
    ),
}

_LIVENESS = {
    "failures": KeyDoc(
        "integer", "Liveness.failures", "Failed probes in a row that stop the child."
    ),
    "initial_delay": KeyDoc(
        "float (seconds)",
        "Liveness.initial_delay",
        "Probing starts this long after the child became ready.",
    ),
}

_SOCKETS = {
    "name": KeyDoc(
        "string",
        "ListenSocket.name",
        "Its name in LISTEN_FDNAMES (letters, digits, _.-). None: the child's id.",
    ),
    "listen": KeyDoc(
        "string",
        "ListenSocket.listen",
        '"127.0.0.1:8080", "[::1]:8080", "0.0.0.0:80", "/run/app.sock" or "@app" '
        "(abstract); literal addresses only.",
        default="required",
    ),
    "backlog": KeyDoc(
        "integer",
        "ListenSocket.backlog",
        "The listen queue: connections wait in it while the child restarts.",
    ),
}

_ENGINE = {
    "kind": KeyDoc('"ray"', "EngineConfig.kind", "The engine; the only one a file can name."),
    "address": KeyDoc(
        "string",
        "EngineConfig.address",
        '"auto", "local", "ray://HOST:10001" (a Ray client) or "HOST:PORT" (a GCS). '
        "None: a cluster on this host, else one started for the run. `--engine` wins.",
    ),
    "lease_timeout": KeyDoc(
        "float (seconds) | false",
        "RayEngine.lease_timeout",
        "A remote subtree stops its children when its lease is not renewed this long (false: off).",
    ),
    "liveness_timeout": KeyDoc(
        "float (seconds) | false",
        "RayEngine.liveness_timeout",
        "Ping each remote supervisor this often; silent, it ends remote_unresponsive.",
    ),
    "unreachable_timeout": KeyDoc(
        "float (seconds) | false",
        "RayEngine.unreachable_timeout",
        "Declare node_down after this long unreachable. None: Ray's verdict.",
    ),
    "health_check_period": KeyDoc(
        "float (seconds)",
        "RayEngine.health_check_period",
        "Ray's node health check, for a Ray this run starts. None: Ray's (3 s).",
    ),
    "health_check_timeout": KeyDoc(
        "float (seconds)", "RayEngine.health_check_timeout", "None: Ray's (10 s)."
    ),
    "health_check_initial_delay": KeyDoc(
        "float (seconds)", "RayEngine.health_check_initial_delay", "None: Ray's (5 s)."
    ),
    "health_check_failure_threshold": KeyDoc(
        "integer",
        "RayEngine.health_check_failure_threshold",
        "Missed checks before Ray declares a node dead. None: Ray's (5).",
    ),
    "runtime_env": KeyDoc(
        "table",
        "RayEngine.runtime_env",
        "Ray's runtime environment, for every remote subtree, passed as written.",
    ),
}

# [defaults]: the worker keys' own meanings; restart_limit's default is the file's.
_DEFAULTS = {
    **{k: _WORKER[k] for k in DEFAULTS_KEYS if k != "restart_limit"},
    "restart_limit": KeyDoc(
        "table | false",
        None,
        "The [restart_limit](#restart_limit) of every worker restarted alone (one_for_one, "
        "simple_one_for_one; not temporary) that sets none; false: none (OTP's charging).",
        default="{ intensity = 5, period = 30 }",
    ),
}

TABLES: tuple[TableDoc, ...] = (
    TableDoc("root", "The root supervisor", "`[supervisor]`", ROOT_KEYS, _ROOT),
    TableDoc(
        "worker",
        "A worker",
        "`[[supervisor.children]]` with `command` or `target`",
        WORKER_KEYS,
        _WORKER,
    ),
    TableDoc(
        "defaults",
        "Defaults for every worker",
        "`[defaults]`, beside `[supervisor]`: a worker's table overrides each key",
        DEFAULTS_KEYS,
        _DEFAULTS,
    ),
    TableDoc(
        "supervisor",
        "A nested supervisor",
        '`[[supervisor.children]]` with `children`, `strategy` or `type = "supervisor"`',
        SUPERVISOR_KEYS,
        _SUPERVISOR,
    ),
    TableDoc(
        "backoff",
        "backoff",
        "`backoff = { ... }` on a worker or a nested supervisor",
        BACKOFF_KEYS,
        _BACKOFF,
    ),
    TableDoc(
        "restart_limit",
        "restart_limit",
        "`restart_limit = { ... }` on a worker",
        RESTART_LIMIT_KEYS,
        _RESTART_LIMIT,
    ),
    TableDoc("reload", "reload", "`reload = { ... }` on a worker", RELOAD_KEYS, _RELOAD),
    TableDoc(
        "readiness-probes",
        "Readiness probes: tcp",
        "`ready = { tcp = PORT, ... }` on a worker (and a liveness probe)",
        PROBE_KEYS["tcp"],
        _PROBES["tcp"],
    ),
    TableDoc(
        "probe-http",
        "Readiness probes: http",
        '`ready = { http = "URL", ... }` on a worker (and a liveness probe)',
        PROBE_KEYS["http"],
        _PROBES["http"],
    ),
    TableDoc(
        "probe-exec",
        "Readiness probes: exec",
        '`ready = { exec = ["prog", ...], ... }` on a worker (and a liveness probe)',
        PROBE_KEYS["exec"],
        _PROBES["exec"],
    ),
    TableDoc(
        "probe-log",
        "Readiness: a log line",
        '`ready = { log = "regex", ... }` on a worker',
        LOG_READY_KEYS,
        _LOG_READY,
    ),
    TableDoc(
        "probe-file",
        "Readiness: a file",
        '`ready = { file = "path" }` on a worker',
        FILE_READY_KEYS,
        _FILE_READY,
    ),
    TableDoc(
        "liveness",
        "liveness",
        "`liveness = { ... }` on a worker: the keys of one probe (tcp, http or exec, "
        "above), and these",
        LIVENESS_KEYS,
        _LIVENESS,
    ),
    TableDoc(
        "sockets",
        "sockets",
        '`sockets = [{ listen = "127.0.0.1:8080", name = "http" }]` on a worker',
        SOCKET_KEYS,
        _SOCKETS,
    ),
    TableDoc(
        "placement",
        "placement",
        "`placement = { ... }` on a nested supervisor",
        PLACEMENT_KEYS,
        _PLACEMENT,
    ),
    TableDoc("engine", "The engine", "`[engine]`, beside `[supervisor]`", ENGINE_KEYS, _ENGINE),
    TableDoc(
        "top-level",
        "Top-level keys",
        "at the top of the file, before its first table",
        TREE_KEYS,
        _TREE,
    ),
)
"""Every table of a tree file, in the order the reference shows them."""
