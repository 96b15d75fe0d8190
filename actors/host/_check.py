"""`nannytree check`: what a tree file would get wrong at run time, all at once,
without running the target modules' import-time code."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import sys
import sysconfig
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from supervision import UnresolvedTarget, asks_to_daemonize

from .._operate._preflight import problems_of, programs

SHELL_CHARS = set("|&;<>()$`*?[]{}~")
# `${NAME}`, `${NAME:-default}` and `$${`: nannytree's own, each within its word
# (supervision/config/_vars.py), not a shell's.
_VARIABLES = re.compile(r"\$\$\{|\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}")


def problems(path: Path, spec: Any) -> list[str]:
    """Every problem found in the file and its loaded (unresolved) spec, one line each."""
    found: list[str] = []
    here = path.resolve().parent
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    for where, table in _tables(raw.get("supervisor", {}), "supervisor"):
        cid = table.get("id", where)
        command = table.get("command")
        if command is not None and ("args" in table or "kwargs" in table):
            found.append(
                f"child {cid!r}: args/kwargs are for a Python target; a command takes its "
                'arguments in its list: command = ["prog", "arg", ...]'
            )
        if isinstance(command, str) and SHELL_CHARS & set(_VARIABLES.sub("", _unquoted(command))):
            found.append(
                f"child {cid!r}: command {command!r} runs without a shell, so its shell "
                "characters are passed as plain arguments; write "
                f'command = ["sh", "-c", {command!r}] if you mean a shell'
            )
    for child in _workers(spec):
        found += problems_of(child, here)
    return found


def loose_problems(path: Path) -> list[str]:
    """The run-time problems of a file that did not load (a program not on PATH, a
    missing cwd or pid_file folder, an unknown user), read from its tables as written:
    reported in the same pass as its load errors. Children whose command or cwd is
    itself malformed are skipped (the load errors name them)."""
    here = path.resolve().parent
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found: list[str] = []
    for _, table in _tables(raw.get("supervisor", {}), "supervisor"):
        child = _loose_child(table, here)
        if child is not None:
            found += problems_of(child, here)
    return found


def _loose_child(table: dict[str, Any], here: Path) -> Any:
    """A worker's table as the fields `problems_of` reads; None if it is not a
    worker or those fields are malformed."""
    if "children" in table or "strategy" in table or not isinstance(table.get("id"), str):
        return None
    command, cwd, env = table.get("command"), table.get("cwd"), table.get("env")
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError:
            return None
    if command is not None and not (
        isinstance(command, list) and command and all(isinstance(a, str) for a in command)
    ):
        return None
    if cwd is not None and not isinstance(cwd, str):
        return None
    target, check = table.get("target"), table.get("start_check")
    if not (isinstance(check, list) and check and all(isinstance(a, str) for a in check)):
        check = None  # malformed: a load error says so
    user, group = table.get("user"), table.get("group")
    files = {
        key: value if value == "capture" else str(here / value)
        for key in ("pid_file", "stdout", "stderr")
        if isinstance(value := table.get(key), str) and value
    }
    return SimpleNamespace(
        id=table["id"],
        command=command,
        start_check=check,
        start_check_as_root=table.get("start_check_as_root") is True,
        cwd=str(here / cwd) if cwd else None,
        env=env if isinstance(env, dict) else None,
        target=UnresolvedTarget(target) if isinstance(target, str) and ":" in target else None,
        user=user if isinstance(user, str) else None,
        group=group if isinstance(group, str) else None,
        pid_file=files.get("pid_file"),
        stdout=files.get("stdout"),
        stderr=files.get("stderr"),
        ready=None,
        liveness=None,
        reload=None,
    )


def daemon_warnings(path: Path) -> list[str]:
    """A warning for each command that will fork into the background by its config,
    not its arguments (those are load errors), and has no pid_file: nginx without
    `daemon off;`, redis with `daemonize yes` in its config file."""
    here = path.resolve().parent
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found = []
    for _, table in _tables(raw.get("supervisor", {}), "supervisor"):
        child = _loose_child(table, here)
        if child is None or child.command is None or "pid_file" in table:
            continue
        cwd = Path(child.cwd) if child.cwd else here
        why = _daemonizes_by_config(list(child.command), cwd)
        if why is not None:
            what, fix = why
            found.append(
                f"warning: child {child.id!r}: {what}: it forks into the background, and "
                "without pid_file its first process exits at once (reported as daemonized, "
                f"restarted again and again); run it in the foreground ({fix}) or set pid_file"
            )
    return found


_NGINX_NOT_A_SERVER = {"-t", "-T", "-v", "-V", "-h", "-?", "-s"}
_CONFIG_READ = 1 << 20  # bytes of a daemon's config file read for its daemon setting


def _daemonizes_by_config(argv: list[str], cwd: Path) -> tuple[str, str] | None:
    program, args = os.path.basename(argv[0]), argv[1:]
    if asks_to_daemonize(argv) is not None:
        return None  # its arguments say so: a load error already
    if program == "nginx" and not _NGINX_NOT_A_SERVER & set(args):
        if any(re.search(r"daemon\s+off\s*;", a) for a in _after(args, "-g")):
            return None
        conf = _after(args, "-c")[-1:] or ["/etc/nginx/nginx.conf"]
        prefix = (_after(args, "-p")[-1:] or [str(cwd)])[0]
        text = _read_config(Path(prefix) / conf[0])
        if text is not None and re.search(r"(?m)^\s*daemon\s+off\s*;", text):
            return None
        return "nginx runs as a daemon unless told `daemon off;`", "nginx -g 'daemon off;'"
    if program == "redis-server" and args and not args[0].startswith("-"):
        if any(a == "--daemonize" for a in args):
            return None  # its arguments say, over the file (and the load checked them)
        text = _read_config(cwd / args[0])
        if text is not None and re.search(r"(?mi)^\s*daemonize\s+yes\b", text):
            return f"its config {args[0]} says `daemonize yes`", "--daemonize no"
    return None


def _after(args: list[str], flag: str) -> list[str]:
    """The values given to `flag` (`-g VALUE`), in order."""
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def _read_config(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(_CONFIG_READ).decode(errors="replace")
    except OSError:
        return None


def _unquoted(command: str) -> str:
    """The parts of a command string outside quotes (where a shell would act)."""
    return re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"", "", command)


def _tables(table: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for i, child in enumerate(table.get("children", []) or []):
        if isinstance(child, dict):
            yield f"{where}.children[{i}]", child
            yield from _tables(child, f"{where}.children[{i}]")


def _workers(spec: Any) -> Iterator[Any]:
    for child in getattr(spec, "children", ()):
        if hasattr(child, "children"):
            yield from _workers(child)
        else:
            yield child


# A root that gives up after this many restarts (or fewer) is "small" against one
# flapping child: the trial's 10 in 60 s was spent by 11 kills of one nginx in a minute.
SMALL_INTENSITY = 10
_ALONE = ("one_for_one", "simple_one_for_one")  # where a tree file's default applies


def containment_warnings(spec: Any) -> list[str]:
    """One line when workers of the file opted out of their default restart_limit
    (docs/otp-semantics.md section 15), so that their crashes are charged to their
    supervisor and, past its intensity, up to a root whose intensity is small: one
    flapping child then stops the whole tree. Says the fix."""
    if spec.intensity > SMALL_INTENSITY:
        return []
    charged = [c.id for c in _charging(spec)]
    if not charged:
        return []
    names = ", ".join(repr(c) for c in charged[:3]) + (
        f" and {len(charged) - 3} more" if len(charged) > 3 else ""
    )
    which = "child" if len(charged) == 1 else "children"
    return [
        f"warning: {which} {names} opted out of restart_limit (false): a crash loop of "
        f"one is charged up to the root (intensity={spec.intensity} period={spec.period:g}) "
        "and stops the whole tree; drop `restart_limit = false` (then 5 restarts in 30 s "
        "leave it failed, its siblings running) or raise the root's intensity"
    ]


def _charging(spec: Any) -> Iterator[Any]:
    """The workers restarted alone that have no restart_limit, other than temporary ones."""
    alone = getattr(spec.strategy, "value", spec.strategy) in _ALONE
    for child in getattr(spec, "children", ()):
        if hasattr(child, "children"):
            yield from _charging(child)
        elif alone and child.restart_limit is None and child.restart.value != "temporary":
            yield child


def root_run_notes(spec: Any) -> list[str]:
    """A note for each program the file runs as root for a child with a user: the
    opt-in is deliberate, and `check` says it aloud."""
    notes = []
    for child in _workers(spec):
        who = child.user if child.user is not None else f"group {child.group}"
        for what, argv, as_root in programs(child):
            if as_root:
                notes.append(
                    f"note: child {child.id!r}: its {what} {argv} runs as root ({as_root} = "
                    f"true), not as {who!r}: with nannytree's environment, in /"
                )
    return notes


# -- what a placed subtree's node may not import ------------------------------------------


def far_side_warnings(
    spec: Any, here: Path, engine_check: Callable[[], Callable[[Any], Any] | None]
) -> list[str]:
    """A warning for each Python target in a placed subtree that its node may not
    import. `engine_check()` gives the engine's own test, if it has one
    (`actors.ray.unshippable_targets`: it knows what the engine ships by value), and
    is called only for a tree with such targets (it imports the engine); without it,
    every target whose module is not an installed package: its file is beside the
    tree file or under the current directory, which only this host has."""
    placed = [(path, child) for path, sub in _placed(spec, spec.id) for child in _workers(sub)]
    targets = [(path, child) for path, child in placed if child.target is not None]
    if not targets:
        return []
    check = engine_check()
    if check is not None:
        try:
            found = check(spec)
        except Exception:  # it wants resolved targets (`check` reads none): the local rule
            found = None
        if found is not None:
            return [f"warning: {_text(item)}" for item in found]
    warnings = []
    roots = [here.resolve(), Path.cwd().resolve()]
    for subtree, child in targets:
        module, ref = _target_module(child.target)
        origin = _module_file(module)
        if origin is None or not any(origin.is_relative_to(r) for r in roots):
            continue
        if _installed(origin):
            continue
        warnings.append(
            f"warning: child {child.id!r} of the placed subtree {subtree!r}: target {ref!r} "
            f"comes from {origin}, a file of this host, not an installed package: its node "
            "may not import it; install its package on every node (or ship it with the "
            "engine: Ray's runtime_env py_modules or working_dir)"
        )
    return warnings


# -- node names no node has ---------------------------------------------------------------


def node_warnings(spec: Any, nodes: list[Any]) -> list[str]:
    """A warning for each node a placed subtree names (`node`, `fallback`) that no node
    of `nodes` (the engine's, as `supervision.NodeInfo`) has as its id or name: the
    names there are, and the likeliest one meant."""
    from supervision import unknown_nodes

    return [
        f"warning: placed subtree {path!r}: {note}"
        for path, sub in _placed(spec, spec.id)
        for note in unknown_nodes(sub.placement, nodes)
    ]


def names_nodes(spec: Any) -> bool:
    """Whether a placed subtree of `spec` names a node (then `check` asks the engine)."""
    return any(
        sub.placement.node is not None or sub.placement.fallback
        for _, sub in _placed(spec, spec.id)
    )


def _placed(spec: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Each placed subtree (a supervisor with a placement), by its path; not those
    inside one (they run where it runs)."""
    for child in getattr(spec, "children", ()):
        if not hasattr(child, "children"):
            continue
        where = f"{path}/{child.id}"
        if getattr(child, "placement", None) is not None:
            yield where, child
        else:
            yield from _placed(child, where)


def _target_module(target: Any) -> tuple[str, str]:
    """(its module, how the file names it) of a target, resolved or not."""
    ref = getattr(target, "ref", None)
    if isinstance(ref, str):
        return ref.partition(":")[0], ref
    module = str(getattr(target, "__module__", "") or "")
    return module, f"{module}:{getattr(target, '__qualname__', target)}"


def _module_file(module: str) -> Path | None:
    """Where `module` is read from on this host (None: built in, or not found)."""
    loaded = sys.modules.get(module)
    origin = getattr(loaded, "__file__", None) if loaded is not None else None
    if origin is None:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        origin = found.origin if found is not None else None
    if not origin or origin in ("built-in", "frozen"):
        return None
    return Path(origin).resolve()


def _installed(origin: Path) -> bool:
    """Whether a module's file sits in an installed place (site-packages, the stdlib)."""
    paths = sysconfig.get_paths()
    places = {paths[k] for k in ("purelib", "platlib", "stdlib", "platstdlib") if k in paths}
    return any(origin.is_relative_to(Path(p).resolve()) for p in places)


def _text(item: Any) -> str:
    if isinstance(item, tuple | list):
        return ": ".join(str(part) for part in item)
    return str(item)
