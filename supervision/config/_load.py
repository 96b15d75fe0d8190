"""Trees from TOML: a document already read, parsed into a SupervisorSpec. Pure.

    [supervisor]                      # the root: id defaults to the file's stem
    strategy = "one_for_all"
    intensity = 3
    period = 5.0

    [[supervisor.children]]           # a worker: `command` or `target`
    id = "web"
    command = ["python3", "-m", "http.server", "8000"]

    [[supervisor.children]]           # a nested supervisor: it has `children`
    id = "pool"
    strategy = "one_for_one"

    [[supervisor.children.children]]
    id = "job"
    target = "mypkg.jobs:run"         # module:function, resolved by the caller

Every error names the file, the table path (`supervisor.children[2].restart`),
the bad value and what is allowed. Relative `cwd`, `stdout`, `stderr` and
`pid_file` paths are relative to the file's directory.

Real daemons (see docs/how-to/daemons.md):

    stop_signal = "QUIT"              # a name or a number; default "TERM"
    kill_mode = "main"                # or "group" (default)
    ready = "sd_notify"               # READY=1 on NOTIFY_SOCKET (commands)
    watchdog = 10                     # seconds; WATCHDOG=1 at least that often
    pid_file = "run/app.pid"          # a program that forks itself (commands)
    reload = { signal = "HUP", check = ["nginx", "-t"] }   # or reload = "HUP"
    sockets = [{ name = "http", listen = "127.0.0.1:8080" }]  # bound once (docs/sockets.md)
    user = "www-data"                 # and group: as root, run the child (and its
                                      # probes and checks) as that user
    start_check = ["nginx", "-t"]     # run before each start; fails the start if it fails
    start_check_as_root = true        # run it as root, in /, not as the user (as `+`)
    no_new_privileges = true          # no exec may gain privileges (setuid, capabilities)
    limits = { nofile = 4096, core = 0, as = "4G", nproc = "256:512" }   # setrlimit

The engine that runs the subtrees with a `placement` (docs/how-to/ray.md):

    [engine]
    kind = "ray"                      # the only one a file can name
    address = "auto"                  # "auto", "local", "ray://HOST:10001", "HOST:PORT"
    lease_timeout = 30                # seconds, or false (off); RayEngine's parameters,
    liveness_timeout = 5              # one key each (`load_engine`)
    unreachable_timeout = 20
    health_check_period = 1           # Ray's node health check, for a Ray this run starts
    health_check_timeout = 1
    health_check_failure_threshold = 3
    runtime_env = { pip = ["requests"] }   # Ray's, for every remote subtree

Health (docs/health.md):

    ready = { tcp = 8000 }                                   # the child's port answers
    ready = { http = "http://127.0.0.1:8000/health", status = [200] }
    ready = { exec = ["pg_isready", "-h", "127.0.0.1"], timeout = 2 }
    ready = { log = "listening on .*:8000", stream = "stderr" }
    ready = "exited"                                         # a one-shot step
    liveness = { http = "http://127.0.0.1:8000/health", period = 10, timeout = 1,
                 failures = 3, initial_delay = 0 }
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any

from .._errors import SpecError
from ..spec._fields import (
    CAPTURE,
    AutoShutdown,
    Restart,
    Strategy,
)
from ..spec._spec import (
    AnySpec,
    ChildSpec,
    SupervisorSpec,
)
from ._defaults import apply_defaults, read_defaults
from ._engine import (
    read_engine,
)
from ._env_file import (
    EnvFileReader,
    EnvFiles,
)
from ._errors import (
    MISSING,
    ConfigError,
)
from ._foreign import form_problems
from ._keys import (
    ROOT_KEYS,
    SUPERVISOR_KEYS,
    WORKER_KEYS,
)
from ._read import (
    NO_FILE,
    TargetResolver,
    _last,
    _Reader,
)


def _seen(key: tuple[str, str], seen: set[tuple[str, str]]) -> bool:
    """Whether `key` was seen before; it is now."""
    if key in seen:
        return True
    seen.add(key)
    return False


class _Skipped(Exception):
    """A supervisor not built because its children had problems (already recorded)."""


def load_tree(
    text: str | bytes,
    filename: str = NO_FILE,
    *,
    resolve_target: TargetResolver | None = None,
    vars: Mapping[str, object] | None = None,
    read_env_file: EnvFileReader | None = None,
) -> SupervisorSpec:
    """Parse a TOML tree (already read) into a validated SupervisorSpec.

    `filename` is used in messages, as the default root id (its stem) and as the
    base of relative paths. `resolve_target` turns "module:function" into the
    callable; without one, targets load as `UnresolvedTarget` placeholders.
    `vars` are the values of `${NAME}` in string values (supervision/config/_vars.py);
    None substitutes nothing (a `${` stays as written). `read_env_file` reads the
    files `env_file` names, with each child's rights (supervision/config/_env_file.py);
    None reads none: their paths are checked, their variables left out (as
    `actors.load_tree_file` and `nannytree check` never do). Raises ConfigError.
    """
    return _Loader(filename, resolve_target, vars, read_env_file).load(text)


def _follows(error: ConfigError, unset: list[ConfigError]) -> bool:
    """Whether `error` is about a value still holding an unset variable."""
    if "${" in repr(error.value):
        return True
    return any(
        error.path == u.path or error.path.startswith((f"{u.path}.", f"{u.path}[")) for u in unset
    )


class _Loader(_Reader):
    """A tree file's tables walked into specs: the root, each supervisor and worker,
    every child's first problem recorded so that one pass reports them all."""

    def __init__(
        self,
        filename: str,
        resolve: TargetResolver | None,
        values: Mapping[str, object] | None = None,
        read_env_file: EnvFileReader | None = None,
    ) -> None:
        super().__init__(filename, resolve, values)
        self.errors: list[ConfigError] = []  # every child's first problem, in file order
        self.log_defaults: dict[str, Any] = {}  # LOG_KEYS of the supervisors around
        self.env_files = EnvFiles(self, read_env_file, self.errors.append)
        self.unset = []  # a variable with no value: reported with the file's other problems
        self.defaults: dict[str, Any] = {}  # [defaults], read (_defaults.py)
        self.strategy = Strategy.ONE_FOR_ONE  # of the supervisor whose children are read

    def load(self, text: str | bytes) -> SupervisorSpec:
        try:
            spec = self._load(text)
        except ConfigError as e:
            self.errors.extend(e.errors)
        except _Skipped:
            pass
        unset = self.unset or []
        # What the unset variables' places then say is their consequence, not a problem.
        errors = unset + [e for e in self.errors if not _follows(e, unset)]
        if errors:  # a problem of the tree's env file once, not once per child
            seen: set[tuple[str, str]] = set()
            unique = [e for e in errors if not _seen((e.path, str(e)), seen)]
            raise ConfigError.several(unique)
        return spec

    def _load(self, text: str | bytes) -> SupervisorSpec:
        doc = self.document(text)
        self.env_files.tree(doc)
        if "engine" in doc:
            try:
                read_engine(self, doc["engine"], "engine")
            except ConfigError as e:  # reported with the tree's problems
                self.errors.extend(e.errors)
        if "defaults" in doc:
            try:
                self.defaults = read_defaults(self, doc["defaults"])
            except ConfigError as e:  # reported with the tree's problems
                self.errors.extend(e.errors)
        if "supervisor" not in doc:
            raise self.error(
                "supervisor",
                MISSING,
                "a tree file starts with a [supervisor] table, then "
                "[[supervisor.children]] tables, one per child",
            )
        root = doc["supervisor"]
        if not isinstance(root, dict):
            raise self.error("supervisor", root, "expected a table: [supervisor]")
        if "id" not in root:
            stem = PurePath(self.filename).stem if self.filename != NO_FILE else ""
            if not stem or "/" in stem:
                raise self.error("supervisor.id", MISSING, 'give the tree an id, e.g. id = "root"')
            root = {"id": stem, **root}
        return self.supervisor(root, "supervisor", nested=False)

    def supervisor(self, table: dict[str, Any], path: str, *, nested: bool) -> SupervisorSpec:
        # Every problem of the supervisor's own keys is recorded and its children are
        # still read, so one pass of `check` lists a bad strategy and a bad child alike.
        problems: list[ConfigError] = []
        kw: dict[str, Any] = {}

        def read(key: str, reader: Callable[[], Any]) -> None:
            if key in table:
                try:
                    kw[key] = reader()
                except ConfigError as e:
                    problems.extend(e.errors)

        allowed = SUPERVISOR_KEYS if nested else ROOT_KEYS
        try:
            self.check_keys(table, path, allowed)
        except ConfigError as e:
            problems.extend(e.errors)
        try:
            kw["id"] = self.ident(table, path)
        except ConfigError as e:
            problems.extend(e.errors)
        read("strategy", lambda: self.enum(table, path, "strategy", Strategy))
        read("auto_shutdown", lambda: self.enum(table, path, "auto_shutdown", AutoShutdown))
        read("intensity", lambda: self.integer(table, path, "intensity"))
        read("max_children", lambda: self.integer(table, path, "max_children"))
        read("period", lambda: self.seconds(table, path, "period"))
        for key in ("restart", "shutdown", "significant", "backoff"):  # child_fields stops
            # at its first problem: one key at a time
            try:
                self.child_fields({key: table[key]} if key in table else {}, path, kw)
            except ConfigError as e:
                problems.extend(e.errors)
        read("placement", lambda: self.placement(table["placement"], f"{path}.placement"))
        raw = table.get("children", [])
        if not isinstance(raw, list) or not all(isinstance(c, dict) for c in raw):
            problems.append(
                self.error(
                    f"{path}.children", raw, "expected [[...children]] tables, one per child"
                )
            )
            raw = []
        outer, outer_strategy = self.log_defaults, self.strategy
        try:
            self.log_defaults = {**outer, **self.log_fields(table, path)}
        except ConfigError as e:
            problems.extend(e.errors)
        self.errors.extend(problems)  # in file order: the supervisor's keys, then its children
        self.strategy = kw.get("strategy", Strategy.ONE_FOR_ONE)
        try:
            children = self.children(raw, f"{path}.children", kw.get("auto_shutdown"))
        finally:
            self.log_defaults, self.strategy = outer, outer_strategy
        if problems:
            raise _Skipped  # recorded above
        try:
            return SupervisorSpec(children=children, **kw)
        except SpecError as e:
            raise self.spec_error(e, path) from None

    def children(
        self, raw: list[dict[str, Any]], path: str, auto_shutdown: AutoShutdown | None
    ) -> list[AnySpec]:
        seen: dict[str, str] = {}
        specs: list[AnySpec] = []
        before = len(self.errors)
        for i, table in enumerate(raw):
            where = f"{path}[{i}]"
            cid = table.get("id")
            if isinstance(cid, str) and cid in seen:  # reported, and the child still read
                self.errors.append(
                    self.error(
                        f"{where}.id", cid, f"duplicate id (also {seen[cid]}); ids must be unique"
                    )
                )
            elif isinstance(cid, str):
                seen[cid] = where
            try:
                specs.append(self._one_child(table, where, auto_shutdown))
            except ConfigError as e:
                self.errors.extend(e.errors)  # reported with the others; the next child is read
                self.errors.extend(self.more_problems(table, where, e.errors))
            except _Skipped:
                pass  # a nested supervisor whose own children had problems
        if len(self.errors) > before:
            raise _Skipped  # this supervisor is not built: its errors would only follow
        return specs

    def more_problems(
        self, table: dict[str, Any], where: str, found: list[ConfigError]
    ) -> list[ConfigError]:
        """A worker's problems after the first ones: the keys found bad are taken out (a
        bad command or target stands in as a placeholder) and it is read again, until
        it reads or nothing more can be taken out. One pass of `check` lists them all."""
        if "children" in table or "strategy" in table or table.get("type") == "supervisor":
            return []  # a supervisor's children report their own problems
        table, more, seen = dict(table), list[ConfigError](), {e.path for e in found}
        while found:
            keys = {e.path[len(where) + 1 :].split(".")[0].split("[")[0] for e in found}
            if not all(e.path.startswith(f"{where}.") for e in found) or keys & {"", "id"}:
                return more  # about the whole child, or its id: nothing to take out
            for key in keys:
                table.pop(key, None)
                if key in ("command", "target"):
                    table.pop("target", None)
                    table["command"] = ["true"]  # a placeholder, to read the rest
            # A key named in a "did you mean" is not missing twice over.
            meant = {m for e in found for m in re.findall(r'did you mean "(\w+)"', e.expected)}
            try:
                self.worker(table, where)
            except ConfigError as e:
                found = [x for x in e.errors if x.path not in seen]
                found = [x for x in found if not (x.value is MISSING and _last(x.path) in meant)]
                seen |= {x.path for x in found}
                more += found
            else:
                return more
        return more

    def _one_child(
        self,
        table: dict[str, Any],
        where: str,
        auto_shutdown: AutoShutdown | None,
    ) -> AnySpec:
        spec = self.child(table, where)
        if spec.significant and auto_shutdown in (None, AutoShutdown.NEVER):
            raise self.error(
                f"{where}.significant",
                True,
                "only a supervisor with auto_shutdown set watches significant "
                'children: set auto_shutdown = "any_significant" (or '
                '"all_significant") on the supervisor, or drop significant',
            )
        return spec

    def child(self, table: dict[str, Any], path: str) -> AnySpec:
        kind = table.get("type")
        if kind is None:
            kind = "supervisor" if "children" in table or "strategy" in table else "worker"
        if kind == "supervisor":
            return self.supervisor(table, path, nested=True)
        if kind != "worker":
            raise self.error(f"{path}.type", kind, 'expected "worker" or "supervisor"')
        return self.worker(table, path)

    def worker(self, table: dict[str, Any], path: str) -> ChildSpec:
        self.check_keys(table, path, WORKER_KEYS)
        forms = form_problems(table, path, self.error)  # %(ENV_X)s: supervisord's ${X}
        if forms:
            raise ConfigError.several(forms)
        kw: dict[str, Any] = {"id": self.ident(table, path)}
        if "command" not in table and "target" not in table:
            raise self.error(
                f"{path}.command",
                MISSING,
                'give command = ["prog", "arg"] or target = "module:function"',
            )
        if "command" in table and "target" in table:
            raise self.error(
                f"{path}.target",
                table["target"],
                "give command or target, not both; split them into two children",
            )
        if "command" in table:
            kw["command"] = self.command(table["command"], f"{path}.command")
        else:
            kw["target"] = self.target(table["target"], f"{path}.target")
        if "args" in table:
            if not isinstance(table["args"], list):
                raise self.error(f"{path}.args", table["args"], "expected an array, e.g. [1, 2]")
            kw["args"] = tuple(table["args"])
        if "kwargs" in table:
            if not isinstance(table["kwargs"], dict):
                raise self.error(
                    f"{path}.kwargs", table["kwargs"], "expected a table, e.g. { n = 1 }"
                )
            kw["kwargs"] = table["kwargs"]
        self.child_fields(table, path, kw)
        env = self.env(table["env"], f"{path}.env") if "env" in table else None
        env = self.env_files.env_of(table, path, kw["id"], env)  # env_file's, under env
        if env is not None:
            kw["env"] = env
        for key in ("inherit_env", "fresh_interpreter", "warm_start"):
            if key in table:
                kw[key] = self.boolean(table, path, key)
        for key in ("cwd", "stdout", "stderr"):
            if key in table:
                capture = key != "cwd" and table[key] == CAPTURE
                kw[key] = CAPTURE if capture else self.path(table, path, key)
        if "ready" in table:
            kw["ready"] = self.ready(table["ready"], f"{path}.ready")
        for key in ("start_timeout", "min_uptime"):
            if key in table:
                kw[key] = self.seconds(table, path, key, zero=key == "min_uptime")
        if "memory_limit" in table:
            kw["memory_limit"] = self.size(table["memory_limit"], f"{path}.memory_limit")
        if "normal_exit_codes" in table:
            codes = table["normal_exit_codes"]
            if not isinstance(codes, list) or not all(
                type(c) is int and 0 <= c <= 255 for c in codes
            ):
                raise self.error(
                    f"{path}.normal_exit_codes", codes, "expected an array of exit codes 0-255"
                )
            kw["normal_exit_codes"] = frozenset(codes)
        self.daemon_fields(table, path, kw)
        if "restart_limit" in table:
            kw["restart_limit"] = self.restart_limit(
                table["restart_limit"], f"{path}.restart_limit"
            )
        if "required" in table:
            kw["required"] = self.boolean(table, path, "required")
        apply_defaults(kw, table, self.defaults, self.strategy)
        kw.update(self.log_defaults)
        kw.update(self.log_fields(table, path))
        try:
            return ChildSpec(**kw)
        except SpecError as e:
            raise self.spec_error(e, path) from None

    def log_fields(self, table: dict[str, Any], path: str) -> dict[str, Any]:
        """log_max_bytes ("10M"), log_backups and log_timestamps (docs/logs.md)."""
        kw: dict[str, Any] = {}
        if "log_max_bytes" in table:
            size = self.size(table["log_max_bytes"], f"{path}.log_max_bytes")
            if size != 0 and size < 1024:
                raise self.error(
                    f"{path}.log_max_bytes", table["log_max_bytes"], 'expected 0 (never) or >= "1K"'
                )
            kw["log_max_bytes"] = size
        if "log_backups" in table:
            kw["log_backups"] = self.integer(table, path, "log_backups")
        if "log_timestamps" in table:
            kw["log_timestamps"] = self.boolean(table, path, "log_timestamps")
        return kw

    def daemon_fields(self, table: dict[str, Any], path: str, kw: dict[str, Any]) -> None:
        """stop_signal, kill_mode, watchdog, pid_file and reload: for real daemons."""
        if "stop_signal" in table:
            value = table["stop_signal"]
            if type(value) is not int and not isinstance(value, str):
                raise self.error(
                    f"{path}.stop_signal",
                    value,
                    'expected a signal name such as "QUIT" or a number',
                )
            kw["stop_signal"] = value
        if "kill_mode" in table:
            kw["kill_mode"] = table["kill_mode"]
        if "watchdog" in table:
            kw["watchdog"] = self.seconds(table, path, "watchdog")
        if "pid_file" in table:
            kw["pid_file"] = self.path(table, path, "pid_file")
        if "reload" in table:
            kw["reload"] = self.reload(table["reload"], f"{path}.reload")
        if "liveness" in table:
            kw["liveness"] = self.liveness(table["liveness"], f"{path}.liveness")
        for key in ("sockets", "user", "group"):  # checked by ChildSpec (docs/sockets.md)
            if key in table:
                kw[key] = table[key]
        if "start_check" in table:
            kw["start_check"] = self.command(table["start_check"], f"{path}.start_check")
        if "start_check_timeout" in table:
            kw["start_check_timeout"] = self.seconds(table, path, "start_check_timeout")
        if "start_check_as_root" in table:
            kw["start_check_as_root"] = self.boolean(table, path, "start_check_as_root")
        if "no_new_privileges" in table:
            kw["no_new_privileges"] = self.boolean(table, path, "no_new_privileges")
        if "limits" in table:  # checked by ChildSpec (supervision/spec/_limits.py)
            if not isinstance(table["limits"], dict):
                raise self.error(
                    f"{path}.limits", table["limits"], "expected a table, e.g. { nofile = 4096 }"
                )
            kw["limits"] = table["limits"]

    def child_fields(self, table: dict[str, Any], path: str, kw: dict[str, Any]) -> None:
        """restart, shutdown and significant: shared by workers and nested supervisors."""
        if "restart" in table:
            kw["restart"] = self.enum(table, path, "restart", Restart)
        if "shutdown" in table:
            value = table["shutdown"]
            if value not in ("brutal_kill", "infinity") and (
                type(value) not in (int, float) or not 0 <= value < float("inf")
            ):
                raise self.error(
                    f"{path}.shutdown",
                    value,
                    'expected seconds >= 0 from SIGTERM to SIGKILL, "brutal_kill" or "infinity"',
                )
            kw["shutdown"] = value
        if "significant" in table:
            kw["significant"] = self.boolean(table, path, "significant")
        if "backoff" in table:
            kw["backoff"] = self.backoff(table["backoff"], f"{path}.backoff")
