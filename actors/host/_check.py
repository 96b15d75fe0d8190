"""`nannytree check`: what a tree file would get wrong at run time, all at once,
without running the target modules' import-time code."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import shlex
import shutil
import sys
import sysconfig
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from actors._launcher._daemons import pid_file_problem
from actors._launcher._listeners import socket_folder_problem
from actors._launcher._safe_open import output_problem, rights_for
from actors._shell._run_as import program_changer
from supervision import ExecProbe, ReadyFile, Reload, UnresolvedTarget, asks_to_daemonize

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
        found += _child_problems(child, here)
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
            found += _child_problems(child, here)
    return found


def _loose_child(table: dict[str, Any], here: Path) -> Any:
    """A worker's table as the fields `_child_problems` reads; None if it is not a
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


def _child_problems(child: Any, here: Path) -> list[str]:
    found = []
    cwd = child.cwd
    if cwd is not None and not os.path.isdir(cwd):
        found.append(f"child {child.id!r}: cwd {cwd!r} does not exist; create it or fix cwd")
    for what, argv, as_root in [("program", child.command, None), *_programs(child)]:
        if argv is None:
            continue
        # A root run is in / with nannytree's own PATH (docs/sockets.md, "Users").
        where, env = ("/", None) if as_root else (cwd, child.env)
        program = argv[0]
        if not _runnable(program, where, env):
            label = what if what in ("program", "start_check") else f"{what} program"
            found.append(
                f"child {child.id!r}: {label} {program!r} is not an executable file"
                + ("" if "/" in program else " on PATH")
                + "; install it or give its full path"
            )
        elif as_root:
            found += _root_program_problems(child.id, what, program, as_root)
    files = {"pid_file": child.pid_file, "stdout": child.stdout, "stderr": child.stderr}
    if isinstance(child.ready, ReadyFile):
        files["ready file"] = child.ready.path
    for name, path in files.items():
        if path is None or path == "capture":
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            found.append(
                f"child {child.id!r}: {name} {str(path)!r}: folder {folder!r} does not exist; "
                "create it or fix the path"
            )
        elif name in ("stdout", "stderr"):
            problem = output_problem(str(path), _rights(child))
            if problem:
                found.append(f"child {child.id!r}: {name} {str(path)!r}: {problem}")
        elif name == "pid_file" and (rights := _rights(child)) is not None:
            problem = pid_file_problem(str(path), rights.uid)
            if problem:
                found.append(f"child {child.id!r}: pid_file {str(path)!r} {problem}")
    ref = getattr(child.target, "ref", None)
    if isinstance(ref, str):
        problem = _target_problem(ref, here)
        if problem:
            found.append(f"child {child.id!r}: target {ref!r}: {problem}")
    found += _socket_problems(child)
    found += _account_problems(child)
    found += _limit_problems(child)
    return found


def _rights(child: Any) -> Any:
    """The ids the child's files are used with where others can write (as run's)."""
    import pwd

    user = getattr(child, "user", None)
    if user is None:
        return None
    try:
        entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
    except KeyError:
        return None  # an unknown user: _account_problems says so
    return rights_for(entry.pw_uid, entry.pw_gid, os.getgrouplist(entry.pw_name, entry.pw_gid))


def _socket_problems(child: Any) -> list[str]:
    """A unix `listen` socket whose folder the launcher would refuse (another user
    could redirect its path: actors/_launcher/_listeners.py) or that does not exist."""
    import pwd

    found = []
    uid = -1
    user = getattr(child, "user", None)
    with contextlib.suppress(KeyError):
        uid = user if isinstance(user, int) else pwd.getpwnam(user).pw_uid if user else -1
    for sock in getattr(child, "sockets", None) or ():
        listen = getattr(sock, "listen", "")
        if not isinstance(listen, str) or not listen.startswith("/"):
            continue
        name = sock.name if sock.name is not None else child.id
        folder = os.path.dirname(listen) or "/"
        problem = socket_folder_problem(folder, uid, f"child {child.id!r}: socket {name!r}")
        if problem is not None:
            found.append(problem)
    return found


def _programs(child: Any) -> Iterator[tuple[str, list[str], str | None]]:
    """The programs run for a child besides its own: (what, argv, the key that runs
    it as root, or None: it runs as the child)."""
    check = getattr(child, "start_check", None)
    if check:
        root = "start_check_as_root" if getattr(child, "start_check_as_root", False) else None
        yield "start_check", list(check), root
    if isinstance(child.ready, ExecProbe):
        yield "ready probe", list(child.ready.argv), _probe_root(child.ready, "ready")
    probe = getattr(child.liveness, "probe", None)
    if isinstance(probe, ExecProbe):
        yield "liveness probe", list(probe.argv), _probe_root(probe, "liveness")
    reload = child.reload
    check = reload.check if isinstance(reload, Reload) else None
    if isinstance(reload, tuple):
        check = reload[0]
    if check:
        root = "reload.check_as_root" if getattr(reload, "check_as_root", False) else None
        yield "reload check", list(check), root


def _probe_root(probe: ExecProbe, key: str) -> str | None:
    return f"{key}.as_root" if probe.as_root else None


def root_run_notes(spec: Any) -> list[str]:
    """A note for each program the file runs as root for a child with a user: the
    opt-in is deliberate, and `check` says it aloud."""
    notes = []
    for child in _workers(spec):
        who = child.user if child.user is not None else f"group {child.group}"
        for what, argv, as_root in _programs(child):
            if as_root:
                notes.append(
                    f"note: child {child.id!r}: its {what} {argv} runs as root ({as_root} = "
                    f"true), not as {who!r}: with nannytree's environment, in /"
                )
    return notes


def _root_program_problems(cid: str, what: str, program: str, key: str) -> list[str]:
    """A program run as root must be root's alone: a file or folder its child's user
    (or anyone but root) can change is code that user gets run as root (`run` refuses
    to run it, too)."""
    path = program if "/" in program else shutil.which(program)
    who = None if path is None else program_changer(path)
    if who is None:
        return []
    return [
        f"child {cid!r}: {what} {program!r} runs as root ({key} = true), but {who} can "
        "change it: code another user writes, run as root; make the file and its "
        f"folders root's and not writable by others (chown root:root, chmod go-w), or "
        f"drop {key}"
    ]


def _account_problems(child: Any) -> list[str]:
    """`user` and `group`: known on this host, and only as root (docs/sockets.md)."""
    import grp
    import pwd

    found = []
    for name, lookup in (("user", pwd.getpwnam), ("group", grp.getgrnam)):
        value = getattr(child, name, None)
        if isinstance(value, str):
            try:
                lookup(value)
            except KeyError:
                found.append(
                    f"child {child.id!r}: field {name!r} is {value!r}: no such {name} on this "
                    f"host; create it ({name}add --system) or fix the name"
                )
    wanted = (getattr(child, "user", None), getattr(child, "group", None)) != (None, None)
    if wanted and os.geteuid() != 0:
        found.append(
            f"child {child.id!r}: user/group need nannytree to run as root (it runs as "
            f"uid {os.geteuid()}); drop them or run as root"
        )
    elif not found and getattr(child, "user", None) is not None and getattr(child, "target", None):
        found += _interpreter_problems(child)
    return found


def _limit_problems(child: Any) -> list[str]:
    """`limits` the kernel would refuse at the start: a hard limit above ours that only
    root may raise, and nofile past fs.nr_open (which stops even root)."""
    import resource

    limits = getattr(child, "limits", None) or {}
    found = []
    for name, (_, hard) in limits.items():
        own = resource.getrlimit(getattr(resource, f"RLIMIT_{name.upper()}"))[1]
        wanted = resource.RLIM_INFINITY if hard is None else hard
        above = own != resource.RLIM_INFINITY and (wanted == resource.RLIM_INFINITY or wanted > own)
        if above and os.geteuid() != 0:
            found.append(
                f"child {child.id!r}: limits.{name}: hard limit {_rlimit(wanted)} is above "
                f"nannytree's own ({_rlimit(own)}), which only root may raise; lower "
                f"limits.{name} to at most {_rlimit(own)}, or run nannytree as root"
            )
        if name == "nofile" and hard is not None:
            nr_open = _nr_open()
            if nr_open is not None and hard > nr_open:
                found.append(
                    f"child {child.id!r}: limits.nofile: {hard} is above fs.nr_open "
                    f"({nr_open}), which Linux refuses even to root; lower limits.nofile "
                    "or raise fs.nr_open (sysctl)"
                )
    return found


def _rlimit(value: int) -> str:
    import resource

    return "infinity" if value == resource.RLIM_INFINITY else str(value)


def _nr_open() -> int | None:
    try:
        with open("/proc/sys/fs/nr_open") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _interpreter_problems(child: Any) -> list[str]:
    """A Python target runs as its user in nannytree's interpreter, and imports as that
    user: the user must be able to read the interpreter's files (a venv under /root,
    say, it cannot)."""
    import pwd
    import subprocess

    folders = list(dict.fromkeys((sys.prefix, os.path.dirname(os.__file__))))
    test = ["test"]
    for folder in folders:
        test += [*(["-a"] if len(test) > 1 else []), "-r", folder, "-a", "-x", folder]
    try:  # with the ids the child gets: its user's groups too (as initgroups)
        user = child.user
        entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
        groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
        group = child.group if child.group is not None else entry.pw_gid
        done = subprocess.run(test, user=user, group=group, extra_groups=groups, check=False)
    except (OSError, ValueError, KeyError):
        return []  # the user or group is reported above, or cannot be taken on here
    if done.returncode == 0:
        return []
    return [
        f"child {child.id!r}: field 'user' is {child.user!r}, who cannot read "
        f"{' or '.join(folders)}, where nannytree's Python is; a Python target runs as its "
        "user in that interpreter: install Python (or the venv) where that user can read "
        "it, or give a command"
    ]


def _runnable(program: str, cwd: str | None, env: dict[str, str] | None) -> bool:
    """Whether `program` would be found and run as the child's env and cwd say."""
    if "/" in program:
        full = os.path.join(cwd or os.getcwd(), program)
        return os.path.isfile(full) and os.access(full, os.X_OK)
    path_env = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
    return shutil.which(program, path=path_env) is not None


def _target_problem(ref: str, here: Path) -> str | None:
    """Whether "module:name" names something, found by reading the source, not running it."""
    module, _, attr = ref.partition(":")
    if str(here) not in sys.path:
        sys.path.insert(0, str(here))
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return f"no module {module!r} (searched beside the file and on sys.path)"
    origin = found.origin
    if not origin or not origin.endswith(".py"):
        return None  # a compiled or namespace module: cannot read it, trust it
    try:
        tree = ast.parse(Path(origin).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError) as e:
        return f"cannot read {origin}: {e}"
    first = attr.split(".")[0]
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if first not in names:
        return f"{module} defines no {first!r}"
    return None


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
