"""The keys each table of a tree file accepts, and the limits of a file: public
tuples, read by the loader (_load.py, _read.py, _engine.py), the docs' key table
(docs/_hooks/config_doc.py) and the fuzzers.
"""

from __future__ import annotations

# The limits of a tree file, far above any real tree: past one, the file is refused
# before the costly work (`check` of 100,000 children took 57 s and 321 MB).
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_CHILDREN = 10_000  # workers and supervisors, the root aside
MAX_DEPTH = 32  # levels of children below the root
LIMITS_FIX = "split it into several trees (a `nannytree run` each)"

_AS_CHILD = ("restart", "shutdown", "significant", "backoff")  # what a parent uses
# How a child's log file is kept (docs/logs.md); on a supervisor, the default below it.
LOG_KEYS = ("log_max_bytes", "log_backups", "log_timestamps")
WORKER_KEYS = (
    *("id", "type", *_AS_CHILD),
    *("command", "target", "args", "kwargs", "env", "inherit_env", "cwd", "ready"),
    *("start_timeout", "min_uptime", "memory_limit", "stdout", "stderr"),
    *("normal_exit_codes", "fresh_interpreter", "warm_start"),
    *("stop_signal", "kill_mode", "watchdog", "pid_file", "reload", "liveness"),
    "restart_limit",
    "required",
    *LOG_KEYS,
    *("sockets", "user", "group"),
    *("start_check", "start_check_timeout", "start_check_as_root"),
    *("no_new_privileges", "limits"),
    "env_file",  # supervision/config/_env_file.py
)
PROBE_KEYS = {
    "tcp": ("tcp", "host", "timeout", "period"),
    "http": ("http", "status", "timeout", "period"),
    "exec": ("exec", "timeout", "period", "as_root"),
}
LIVENESS_KEYS = ("failures", "initial_delay")
LOG_READY_KEYS = ("log", "stream")  # ready = { log = "regex", stream = "stderr" }
FILE_READY_KEYS = ("file",)  # ready = { file = "path" }
_READY_TABLES = (
    '{ tcp = 8000 }, { http = "http://127.0.0.1:8000/health" }, { exec = ["prog", "arg"] }, '
    '{ log = "regex" } or { file = "path" }'
)
SUPERVISOR_KEYS = (
    *("id", "type", *_AS_CHILD),
    *("strategy", "intensity", "period", "auto_shutdown", "max_children", "children"),
    "placement",
    *LOG_KEYS,
)
# Keys at the top of a file, before its first table (beside [supervisor] and [engine]).
TREE_KEYS = ("env_file",)  # every worker's env_file, under its own
ROOT_KEYS = tuple(k for k in SUPERVISOR_KEYS if k not in ("type", "placement", *_AS_CHILD))
BACKOFF_KEYS = ("initial", "factor", "max", "jitter", "reset_after")
RESTART_LIMIT_KEYS = ("intensity", "period")
RELOAD_KEYS = ("signal", "check", "check_timeout", "check_as_root")
PLACEMENT_KEYS = ("node", "labels", "resources", "policy", "fallback", "wait")
ENGINE_KINDS = ("ray",)
# Seconds (> 0) or false (off): None is the engine's own "off".
ENGINE_SECONDS_OR_OFF = ("lease_timeout", "liveness_timeout", "unreachable_timeout")
ENGINE_SECONDS = ("health_check_period", "health_check_timeout", "health_check_initial_delay")
ENGINE_COUNTS = ("health_check_failure_threshold",)
ENGINE_TABLES = ("runtime_env",)  # passed as written: the engine checks it
ENGINE_KEYS = (
    *("kind", "address", *ENGINE_SECONDS_OR_OFF, *ENGINE_SECONDS, *ENGINE_COUNTS),
    *ENGINE_TABLES,
)

# -- [defaults]: what every worker of the file gets unless its table says otherwise --
# (supervisord's [program:x] defaults, systemd's drop-ins). docs/otp-semantics.md section 15.
DEFAULTS_KEYS = (
    *("restart", "shutdown", "backoff", "restart_limit", "required"),
    *("stop_signal", "kill_mode", "start_timeout", "min_uptime"),
)
# What a tree file's worker gets for restart_limit when neither its table nor
# [defaults] names one: 5 restarts in 30 s, then `failed` (RestartLimit's defaults).
# Only where a crash restarts the child alone (one_for_one, simple_one_for_one) and
# only for a child that is restarted at all (not temporary).
DEFAULT_RESTART_LIMIT_STRATEGIES = ("one_for_one", "simple_one_for_one")
