"""What the host says about a worker before it starts it, each problem one line
naming the child and the field: the facts that `nannytree check` reports, the run
host's update refuses on, and `Tree.update` too (through `supervision.preflight`).
It reads the host as the child would meet it: its programs as the child's user
finds them, the folders of its files, a program run as root being root's alone.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from supervision import ExecProbe, ReadyFile, Reload

from .._launcher._daemons import pid_file_problem
from .._launcher._journal import identifier_of
from .._launcher._listeners import socket_folder_problem
from .._launcher._safe_open import output_problem, rights_for
from .._shell._run_as import program_changer


def problems_of(child: Any, here: Path | None = None) -> list[str]:
    """The problems of one worker, one line each, naming the child and the field:
    its cwd, its programs and those run for it (probes, checks: as the child, or
    root's alone when run as root), the files it writes, its target (looked up
    beside `here`, the tree file's folder; default: the working directory), its
    sockets, its user and group, its limits."""
    here = Path.cwd() if here is None else here
    found = []
    cwd = child.cwd
    if cwd is not None and not os.path.isdir(cwd):
        found.append(f"child {child.id!r}: cwd {cwd!r} does not exist; create it or fix cwd")
    for what, argv, as_root in [("program", child.command, None), *programs(child)]:
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
        if path is None or path == "capture" or identifier_of(path) is not None:
            continue  # the journal: `run` and `check --child-output journal` ask for it
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


def programs(child: Any) -> Iterator[tuple[str, list[str], str | None]]:
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
