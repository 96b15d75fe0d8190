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

import difflib
import json
import re
import shlex
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from .._errors import NannyError, SpecError
from ..spec._fields import (
    CAPTURE,
    AutoShutdown,
    Backoff,
    ReadyFile,
    Reload,
    Restart,
    Strategy,
)
from ..spec._placement import Placement
from ..spec._probes import ExecProbe, HttpProbe, Liveness, LogLine, Probe, TcpProbe
from ..spec._restart_limit import RestartLimit
from ..spec._spec import (
    AnySpec,
    ChildSpec,
    SupervisorSpec,
)
from ._vars import VarError, substitute

TargetResolver = Callable[[str], Callable[..., Any]]
"""Turns "package.module:function" into the callable; raises when it cannot."""

NO_FILE = "<string>"
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "missing"})()
"""The value of a ConfigError about something absent: a key, or the whole file (path "")."""

_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}

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
    *LOG_KEYS,
    *("sockets", "user", "group"),
    *("start_check", "start_check_timeout", "start_check_as_root"),
    *("no_new_privileges", "limits"),
)
_PROBE_KEYS = {
    "tcp": ("tcp", "host", "timeout", "period"),
    "http": ("http", "status", "timeout", "period"),
    "exec": ("exec", "timeout", "period", "as_root"),
}
_LIVENESS_KEYS = ("failures", "initial_delay")
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
_ADDRESS = re.compile(r"^(auto|local|ray://[^\s/:]+(:\d+)?|[^\s/:]+:\d+)$")
ADDRESS_FORMS = '"auto", "local", "ray://HOST:10001" (a Ray client) or "HOST:PORT" (a GCS)'


class ConfigError(NannyError, ValueError):
    """A tree file is invalid: names the file, the table path, the value and the fix."""

    def __init__(self, filename: str, path: str, value: Any, expected: str) -> None:
        self.filename = filename
        self.path = path
        self.value = value
        self.expected = expected
        # Every problem found in the file (a check reports them all); this one first.
        self.errors: list[ConfigError] = [self]
        where = f"{filename}: {path}" if path else filename
        if not path and value is MISSING:
            super().__init__(f"{filename}: {expected}")
        elif value is MISSING:
            super().__init__(f"{where} is missing; {expected}")
        else:
            super().__init__(f"{where} is {show(value)}; {expected}")

    @classmethod
    def several(cls, errors: list[ConfigError]) -> ConfigError:
        """One error for many: the first's fields, every message, `errors` all of them."""
        first = errors[0]
        if len(errors) == 1:
            return first
        combined = cls(first.filename, first.path, first.value, first.expected)
        combined.errors = list(errors)
        lines = "\n".join(f"  {e}" for e in errors)
        combined.args = (f"{first.filename}: {len(errors)} problems:\n{lines}",)
        return combined


class TooLarge(ConfigError):
    """A tree file past MAX_FILE_BYTES, MAX_CHILDREN or MAX_DEPTH: refused before it
    is read further (no other problem of it is looked for)."""


def check_size(size: int, filename: str) -> None:
    """TooLarge if a file of `size` bytes is past MAX_FILE_BYTES."""
    if size > MAX_FILE_BYTES:
        raise TooLarge(
            filename,
            "",
            MISSING,
            f"larger than {MAX_FILE_BYTES // 1024**2} MiB ({MAX_FILE_BYTES:,} bytes), the "
            f"limit of a tree file; {LIMITS_FIX}",
        )


def _check_tree_size(doc: dict[str, Any], filename: str) -> None:
    """TooLarge if the document's tree has more than MAX_CHILDREN children or nests
    supervisors deeper than MAX_DEPTH; iterative, and it stops at the first excess."""
    root = doc.get("supervisor")
    count = 0
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        table, depth = stack.pop()
        children = table.get("children") if isinstance(table, dict) else None
        if not isinstance(children, list):
            continue
        if children and depth >= MAX_DEPTH:
            raise TooLarge(
                filename,
                "",
                MISSING,
                f"children nested more than {MAX_DEPTH} levels below the root, the limit of "
                f"a tree file; flatten it, or {LIMITS_FIX}",
            )
        count += len(children)
        if count > MAX_CHILDREN:
            raise TooLarge(
                filename,
                "",
                MISSING,
                f"more than {MAX_CHILDREN:,} children, the limit of a tree file; {LIMITS_FIX}",
            )
        stack += [(c, depth + 1) for c in children]


@dataclass(frozen=True)
class EngineConfig:
    """A tree file's `[engine]` table: the engine that runs its placed subtrees.

    `options` holds only the settings the file gave, each under the name of the
    engine's parameter (`lease_timeout`: seconds, or None for off); the rest keep
    the engine's defaults. `address` None: the engine's default (Ray: a cluster on
    this host, else one started for the run).
    """

    kind: str = "ray"
    address: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def over(self, base: EngineConfig | None) -> EngineConfig:
        """These settings over `base` (flags over a file): each one given here wins."""
        if base is None:
            return self
        return EngineConfig(
            self.kind,
            self.address if self.address is not None else base.address,
            {**base.options, **self.options},
        )


def load_engine(
    text: str | bytes,
    filename: str = NO_FILE,
    *,
    vars: Mapping[str, object] | None = None,
) -> EngineConfig | None:
    """The `[engine]` table of a tree file (already read), validated; None without one.

    Raises ConfigError as `load_tree` does (which validates the table too)."""
    loader = _Loader(filename, None, vars)
    doc = loader.document(text)
    if "engine" not in doc:
        return None
    return loader.engine(doc["engine"], "engine")


def show(value: Any, limit: int = 80) -> str:
    """A value as TOML-ish text for messages."""
    text = json.dumps(value, default=repr, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _choices(enum: Any) -> str:
    return "expected one of " + ", ".join(f'"{m.value}"' for m in enum)


def _huge_ints(value: Any, path: str) -> list[tuple[str, int]]:
    """The integers of a document outside TOML's 64-bit range, by their paths."""
    if type(value) is int:
        return [(path, value)] if not -(1 << 63) <= value < 1 << 63 else []
    if isinstance(value, dict):
        items: Any = ((f"{path}.{k}" if path else k, v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return []
    return [found for where, v in items for found in _huge_ints(v, where)]


def _last(path: str) -> str:
    """The key a table path ends with: `supervisor.children[1].command` -> `command`."""
    return path.rsplit(".", 1)[-1]


class _Skipped(Exception):
    """A supervisor not built because its children had problems (already recorded)."""


@dataclass(frozen=True)
class UnresolvedTarget:
    """A `target = "module:function"` loaded without a resolver (e.g. to check a file).

    Calling it fails: load the tree through `actors` to import targets for real.
    """

    ref: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"target {self.ref!r} was never imported; load the tree with a resolver "
            "(actors.cli does) to run it"
        )


def load_tree(
    text: str | bytes,
    filename: str = NO_FILE,
    *,
    resolve_target: TargetResolver | None = None,
    vars: Mapping[str, object] | None = None,
) -> SupervisorSpec:
    """Parse a TOML tree (already read) into a validated SupervisorSpec.

    `filename` is used in messages, as the default root id (its stem) and as the
    base of relative paths. `resolve_target` turns "module:function" into the
    callable; without one, targets load as `UnresolvedTarget` placeholders.
    `vars` are the values of `${NAME}` in string values (supervision/config/_vars.py);
    None substitutes nothing (a `${` stays as written). Raises ConfigError.
    """
    return _Loader(filename, resolve_target, vars).load(text)


class _Loader:
    def __init__(
        self,
        filename: str,
        resolve: TargetResolver | None,
        values: Mapping[str, object] | None = None,
    ) -> None:
        self.filename = filename
        self.resolve = resolve
        self.values = values
        self.base = None if filename == NO_FILE else PurePath(filename).parent
        self.errors: list[ConfigError] = []  # every child's first problem, in file order
        self.log_defaults: dict[str, Any] = {}  # LOG_KEYS of the supervisors around

    def error(self, path: str, value: Any, expected: str) -> ConfigError:
        return ConfigError(self.filename, path, value, expected)

    # -- the document -------------------------------------------------------------

    def load(self, text: str | bytes) -> SupervisorSpec:
        try:
            spec = self._load(text)
        except ConfigError as e:
            self.errors.extend(e.errors)
        except _Skipped:
            pass
        if self.errors:
            raise ConfigError.several(self.errors)
        return spec

    def _load(self, text: str | bytes) -> SupervisorSpec:
        doc = self.document(text)
        if "engine" in doc:
            try:
                self.engine(doc["engine"], "engine")
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

    def document(self, text: str | bytes) -> dict[str, Any]:
        """The TOML document, variables substituted, its top-level keys checked."""
        check_size(len(text) if isinstance(text, bytes) else len(text.encode()), self.filename)
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(self.filename, "", MISSING, f"not UTF-8 text ({e})") from None
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(
                self.filename, "", MISSING, f"not valid TOML: {e}; fix the syntax there"
            ) from None
        except RecursionError:  # tomllib recurses once per level of nested arrays or tables
            raise ConfigError(
                self.filename, "", MISSING, "not valid TOML: arrays or tables nested too deep"
            ) from None
        _check_tree_size(doc, self.filename)
        huge = [self.error(p, v, "TOML integers are 64-bit") for p, v in _huge_ints(doc, "")]
        if huge:  # tomllib reads any size; a float() of one would overflow
            raise ConfigError.several(huge)
        if self.values is not None:
            try:
                doc = substitute(doc, self.values)
            except VarError as e:
                raise ConfigError.several(
                    [self.error(p.path, p.value, p.expected) for p in e.problems]
                ) from None
        self.check_keys(doc, "", ("supervisor", "engine"))
        return doc

    def check_keys(self, table: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> None:
        unknown = []
        for key in table:
            if key not in allowed:
                near = difflib.get_close_matches(key, allowed, n=1)
                longer = [a for a in allowed if a.startswith(f"{key}_")]
                near = near or (longer if len(longer) == 1 else [])  # lease: lease_timeout
                hint = f'did you mean "{near[0]}"? ' if near else ""
                where = f"{path}.{key}" if path else key
                unknown.append(
                    self.error(
                        where, table[key], f"unknown key; {hint}allowed here: {', '.join(allowed)}"
                    )
                )
        if unknown:
            raise ConfigError.several(unknown)  # every unknown key is reported

    # -- supervisors -----------------------------------------------------------------

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
        outer = self.log_defaults
        try:
            self.log_defaults = {**outer, **self.log_fields(table, path)}
        except ConfigError as e:
            problems.extend(e.errors)
        self.errors.extend(problems)  # in file order: the supervisor's keys, then its children
        try:
            children = self.children(raw, f"{path}.children", kw.get("auto_shutdown"))
        finally:
            self.log_defaults = outer
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

    # -- workers -----------------------------------------------------------------------

    def worker(self, table: dict[str, Any], path: str) -> ChildSpec:
        self.check_keys(table, path, WORKER_KEYS)
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
        if "env" in table:
            kw["env"] = self.env(table["env"], f"{path}.env")
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

    def probe(self, value: dict[str, Any], path: str, extra: tuple[str, ...] = ()) -> Probe:
        """{ tcp = 8000 }, { http = "url" } or { exec = [...] }, with timeout and period."""
        kinds = [k for k in _PROBE_KEYS if k in value]
        if len(kinds) != 1:
            raise self.error(
                path,
                value,
                'expected exactly one of tcp = PORT, http = "URL" or exec = ["prog", ...]',
            )
        kind = kinds[0]
        self.check_keys(value, path, (*_PROBE_KEYS[kind], *extra))
        fields = {k: v for k, v in value.items() if k not in (kind, *extra)}
        for key in ("timeout", "period"):
            if key in fields:
                fields[key] = self.seconds(fields, path, key)
        try:
            if kind == "tcp":
                return TcpProbe(value["tcp"], **fields)
            if kind == "http":
                return HttpProbe(value["http"], **fields)
            return ExecProbe(self.command(value["exec"], f"{path}.exec"), **fields)
        except SpecError as e:
            field = e.field if "." in e.field else kind
            raise self.error(f"{path}.{field.split('.')[-1]}", e.value, e.expected) from None

    def liveness(self, value: Any, path: str) -> Liveness:
        if not isinstance(value, dict):
            raise self.error(
                path,
                value,
                'expected a table such as { http = "http://127.0.0.1:8000/health", '
                "period = 10, failures = 3 }",
            )
        probe = self.probe(value, path, _LIVENESS_KEYS)
        fields: dict[str, Any] = {}
        if "failures" in value:
            fields["failures"] = self.integer(value, path, "failures")
        if "initial_delay" in value:
            fields["initial_delay"] = self.seconds(value, path, "initial_delay", zero=True)
        try:
            return Liveness(probe, **fields)
        except SpecError as e:
            raise self.error(f"{path}.{e.field.split('.')[-1]}", e.value, e.expected) from None

    def reload(self, value: Any, path: str) -> Reload:
        """`reload = "HUP"` or a table: { signal = "HUP", check = ["nginx", "-t"] }."""
        if isinstance(value, dict):
            self.check_keys(value, path, RELOAD_KEYS)
            fields = dict(value)
            if "check" in fields:
                fields["check"] = self.command(fields["check"], f"{path}.check")
        elif isinstance(value, str) or type(value) is int:
            fields = {"signal": value}
        else:
            raise self.error(
                path,
                value,
                'expected a signal such as "HUP", or a table such as '
                '{ signal = "HUP", check = ["nginx", "-t"] }',
            )
        try:
            return Reload(**fields)
        except SpecError as e:
            field = e.field.removeprefix("reload.")
            raise self.error(f"{path}.{field}", e.value, e.expected) from None

    def command(self, value: Any, path: str) -> tuple[str, ...]:
        if isinstance(value, str):
            try:
                argv = shlex.split(value)
            except ValueError as e:
                raise self.error(path, value, f"cannot split it into arguments: {e}") from None
        elif isinstance(value, list) and all(isinstance(a, str) for a in value):
            argv = list(value)
        else:
            raise self.error(path, value, 'expected an array of strings, e.g. ["sleep", "10"]')
        if not argv:
            raise self.error(path, value, 'expected a program to run, e.g. ["sleep", "10"]')
        for i, arg in enumerate(argv):
            if "\0" in arg:
                raise self.error(f"{path}[{i}]", arg, "an argument cannot contain NUL bytes")
        return tuple(argv)

    def target(self, value: Any, path: str) -> Callable[..., Any]:
        if not isinstance(value, str) or not _TARGET.match(value):
            raise self.error(
                path, value, 'expected "package.module:function", e.g. "myapp.jobs:run"'
            )
        if self.resolve is None:
            return UnresolvedTarget(value)
        try:
            target = self.resolve(value)
        except Exception as e:
            raise self.error(
                path,
                value,
                f"cannot import it ({type(e).__name__}: {e}); the module must be "
                "importable from the tree file's directory or the Python path",
            ) from None
        if not callable(target):
            raise self.error(path, value, f"names a {type(target).__name__}, not a function")
        return target

    def ready(self, value: Any, path: str) -> Any:
        if value in ("started", "notify", "sd_notify", "exited"):
            return value
        if type(value) in (int, float) and 0 < value < float("inf"):
            return float(value)
        if isinstance(value, dict) and list(value) == list(FILE_READY_KEYS):
            return ReadyFile(self.path(value, path, "file"))
        if (
            isinstance(value, dict)
            and len([k for k in (*_PROBE_KEYS, "log", "file") if k in value]) > 1
        ):
            raise self.error(
                path, value, f"expected one kind of readiness in the table: {_READY_TABLES}"
            )
        if isinstance(value, dict) and "log" in value:
            self.check_keys(value, path, LOG_READY_KEYS)
            try:
                return LogLine(value["log"], value.get("stream", "both"))
            except SpecError as e:
                field = "stream" if e.field.endswith("stream") else "log"
                raise self.error(f"{path}.{field}", e.value, e.expected) from None
        if isinstance(value, dict) and any(k in value for k in _PROBE_KEYS):
            return self.probe(value, path)
        raise self.error(
            path,
            value,
            'expected "started", "notify" (a target calls actors.child.ready()), '
            '"sd_notify" (a command sends READY=1 to NOTIFY_SOCKET), "exited" (a one-shot '
            f"step), seconds of uptime, or a table: {_READY_TABLES}",
        )

    def env(self, value: Any, path: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise self.error(path, value, 'expected a table, e.g. env = { PORT = "8000" }')
        for name, var in value.items():
            if not name or "=" in name or "\0" in name:
                raise self.error(
                    f"{path}.{json.dumps(name)}",
                    var,
                    "an environment variable name must be non-empty, without '=' or NUL bytes",
                )
            if isinstance(var, str) and "\0" in var:
                raise self.error(f"{path}.{name}", var, "a value cannot contain NUL bytes")
            if not isinstance(var, str):
                raise self.error(
                    f"{path}.{name}", var, f'expected a string; quote it: {name} = "{var}"'
                )
        return dict(value)

    # -- fields ---------------------------------------------------------------------------

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

    def backoff(self, value: Any, path: str) -> Backoff | None:
        """`backoff = true` (the defaults), `false`, or a table of Backoff's fields."""
        if isinstance(value, bool):
            return Backoff() if value else None
        if not isinstance(value, dict):
            raise self.error(
                path, value, "expected true, false or a table, e.g. { initial = 0.5, max = 30 }"
            )
        self.check_keys(value, path, BACKOFF_KEYS)
        try:
            return Backoff(**value)
        except SpecError as e:
            field = e.field.removeprefix("backoff.")
            raise self.error(f"{path}.{field}", e.value, e.expected) from None

    def restart_limit(self, value: Any, path: str) -> RestartLimit | None:
        """`restart_limit = { intensity = 5, period = 30 }` (either may be left out for
        its default), or `false` (none)."""
        if value is False:
            return None
        if not isinstance(value, dict):
            raise self.error(
                path,
                value,
                "expected a table: at most `intensity` restarts in `period` seconds, "
                "e.g. { intensity = 5, period = 30 }",
            )
        self.check_keys(value, path, RESTART_LIMIT_KEYS)
        try:
            return RestartLimit(**value)
        except SpecError as e:
            field = e.field.removeprefix("restart_limit.")
            raise self.error(f"{path}.{field}", e.value, e.expected) from None

    def placement(self, value: Any, path: str) -> Placement:
        """A table of Placement's fields, e.g. { node = "node-b", policy = "prefer" }."""
        if not isinstance(value, dict):
            raise self.error(path, value, 'expected a table, e.g. placement = { node = "node-b" }')
        self.check_keys(value, path, PLACEMENT_KEYS)
        try:
            return Placement(**value)
        except SpecError as e:
            field = e.field.removeprefix("placement.")
            raise self.error(f"{path}.{field}", e.value, e.expected) from None

    def engine(self, value: Any, path: str) -> EngineConfig:
        """The `[engine]` table: every problem in it at once, each with its fix."""
        if not isinstance(value, dict):
            raise self.error(path, value, 'expected a table: [engine] with kind = "ray"')
        problems: list[ConfigError] = []
        try:
            self.check_keys(value, path, ENGINE_KEYS)
        except ConfigError as e:
            problems.extend(e.errors)
        kind = value.get("kind", "ray")
        if kind not in ENGINE_KINDS:
            expected = ", ".join(f'"{k}"' for k in ENGINE_KINDS)
            problems.append(self.error(f"{path}.kind", kind, f"expected {expected}"))
        address = value.get("address")
        if address is not None and not (isinstance(address, str) and _ADDRESS.match(address)):
            problems.append(self.error(f"{path}.address", address, f"expected {ADDRESS_FORMS}"))
        options: dict[str, Any] = {}
        for key in (*ENGINE_SECONDS_OR_OFF, *ENGINE_SECONDS, *ENGINE_COUNTS):
            if key not in value:
                continue
            try:
                options[key] = self.engine_option(value, path, key)
            except ConfigError as e:
                problems.append(e)
        for key in ENGINE_TABLES:
            if key not in value:
                continue
            if isinstance(value[key], dict):
                options[key] = value[key]
            else:
                problems.append(
                    self.error(
                        f"{path}.{key}", value[key], 'expected a table, e.g. { pip = ["requests"] }'
                    )
                )
        if problems:
            raise ConfigError.several(problems)
        return EngineConfig(kind, address, options)

    def engine_option(self, table: Mapping[str, Any], path: str, key: str) -> float | int | None:
        value = table[key]
        if key in ENGINE_COUNTS:
            if type(value) is not int or value < 1:
                raise self.error(f"{path}.{key}", value, "expected an integer >= 1")
            return value
        if key in ENGINE_SECONDS_OR_OFF and value is False:
            return None
        if type(value) not in (int, float) or not 0 < value < float("inf"):
            off = " or false (off)" if key in ENGINE_SECONDS_OR_OFF else ""
            raise self.error(f"{path}.{key}", value, f"expected a number of seconds > 0{off}")
        return float(value)

    def ident(self, table: Mapping[str, Any], path: str) -> str:
        value = table.get("id", MISSING)
        if not isinstance(value, str) or not value or "/" in value:
            raise self.error(
                f"{path}.id",
                value,
                'every child needs a unique id without "/", e.g. id = "web"',
            )
        return value

    def enum(self, table: Mapping[str, Any], path: str, key: str, enum: Any) -> Any:
        try:
            return enum(table[key])
        except ValueError:
            raise self.error(f"{path}.{key}", table[key], _choices(enum)) from None

    def integer(self, table: Mapping[str, Any], path: str, key: str) -> int:
        value = table[key]
        if type(value) is not int or value < 0:
            raise self.error(f"{path}.{key}", value, "expected an integer >= 0")
        return value

    def seconds(
        self, table: Mapping[str, Any], path: str, key: str, *, zero: bool = False
    ) -> float:
        value = table[key]
        low_ok = type(value) in (int, float) and (value >= 0 if zero else value > 0)
        if not low_ok or not value < float("inf"):
            bound = ">= 0" if zero else "> 0"
            raise self.error(f"{path}.{key}", value, f"expected a number of seconds {bound}")
        return float(value)

    def boolean(self, table: Mapping[str, Any], path: str, key: str) -> bool:
        value = table[key]
        if not isinstance(value, bool):
            raise self.error(f"{path}.{key}", value, "expected true or false")
        return value

    def path(self, table: Mapping[str, Any], path: str, key: str) -> str:
        value = table[key]
        if not isinstance(value, str) or not value:
            raise self.error(f"{path}.{key}", value, "expected a path (relative to the file)")
        if self.base is None or PurePath(value).is_absolute():
            return value
        return str(self.base / value)

    def size(self, value: Any, path: str) -> int:
        if type(value) is int:
            return value
        match = _SIZE.match(value) if isinstance(value, str) else None
        if match is None:
            raise self.error(
                path, value, 'expected bytes, or a size such as "512M" or "1G" (powers of 1024)'
            )
        size = float(match[1]) * _UNITS[match[2].upper()]
        if size == float("inf"):  # "999...9": int() of an infinite float raises OverflowError
            raise self.error(path, value, "expected a size this machine can count in bytes")
        return int(size)

    def spec_error(self, e: SpecError, path: str) -> ConfigError:
        """A field the spec itself refused: same message, with the table path."""
        return self.error(f"{path}.{e.field}", e.value, e.expected)
