"""The nannytree command: run a tree from a TOML file, watch it live, control it.

    nannytree demo --duration 20       a small tree that crashes now and then
    nannytree run tree.toml            run a tree in the foreground (Ctrl-C stops it)
    nannytree check tree.toml          validate a file and show the tree it would start
    nannytree status                   the running tree, from another shell
    nannytree restart|stop|start|pause|resume ID
    nannytree reset ID                 forget a supervisor's (or a child's own) restarts
    nannytree logs ID [--stdout]
    nannytree signal ID SIG
    nannytree events --follow
    nannytree wait [ID...] --ready     until the tree (or those children) is ready
    nannytree shutdown                 stop the running tree, as Ctrl-C does

Exit status: 0 done; 1 failed (invalid file, refused request, a tree that gave
up); 2 bad usage (also: several trees run and none was named); 3 not running
(no tree found, or `status` shows a child that is not running, as systemctl);
4 timed out (`wait`: not ready within --timeout).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._operate._records import EventRecord, Node
from .._operate._text import printable
from ._control import (
    UPDATE_SETTLE,
    UPDATE_SETTLE_MAX,
    BadUsage,
    ControlError,
    NoAnswer,
    NoTree,
    call,
    find_socket,
    running_sockets,
    stream,
)
from ._engine import add_engine_flags
from ._exit import EPILOG, FAILED, NOT_RUNNING, OK, TIMED_OUT, USAGE
from ._monitors import add_monitor_flags, monitor_options

if TYPE_CHECKING:
    from ._run import RunOptions

# Client commands (status, logs, events, ...) import only what they print with:
# rich, pykka, psutil and the nanny come in with the commands that need them,
# so a client answers fast (measured in tests/benchmarks/bench_cli.py).


def _error(message: object) -> None:
    """One line on stderr; the message may quote a child's text or a file's ids."""
    print(f"nannytree: {printable(message, lines=True)}", file=sys.stderr)


def signal_arg(text: str) -> int:
    """ "HUP", "sighup", "SIGHUP" or "1" -> 1, for argparse.

    supervision.parse_signal's rules with the stdlib alone: importing the core costs a
    client command half its time (a test holds the two parsers equal)."""
    import signal

    number: int | None = None
    if text.isdecimal():  # what int() takes: full-width digits too (as the core), not superscripts
        number = int(text) if int(text) in signal.valid_signals() else None
    elif text.isascii():
        name = text.strip().upper()
        name = name if name.startswith("SIG") else "SIG" + name
        member = signal.Signals.__members__.get(name)
        number = int(member) if member is not None and not name.startswith("SIG_") else None
    if number is None:
        raise argparse.ArgumentTypeError(f"unknown signal {text!r}; e.g. HUP, TERM, USR1 or 10")
    return number


def non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, not {text!r}")
    return value


def settle_seconds(text: str) -> float:
    value = non_negative(text)
    if value > UPDATE_SETTLE_MAX:
        raise argparse.ArgumentTypeError(
            f"expected seconds from 0 to {UPDATE_SETTLE_MAX:g}, not {text!r}"
        )
    return value


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, not {text!r}")
    return value


# -- commands that host a tree --------------------------------------------------------------


def _run_options(args: argparse.Namespace) -> RunOptions:
    from ._engine import ENGINE_FLAGS, UNSET
    from ._run import RunOptions

    options = {
        name: getattr(args, name) for name, _, _ in ENGINE_FLAGS if getattr(args, name) is not UNSET
    }
    return RunOptions(
        socket=args.socket,
        live=args.live,
        duration=args.duration,
        child_output=args.child_output,
        engine=args.engine,
        engine_options=options,
        **_log_options(args),
        **monitor_options(args),
    )


def _log_options(args: argparse.Namespace) -> dict[str, Any]:
    """--log-dir, --log-max-bytes, --log-backups, --log-timestamps (docs/logs.md)."""
    given = {
        "log_dir": args.log_dir,
        "log_max_bytes": args.log_max_bytes,
        "log_backups": args.log_backups,
        "log_timestamps": args.log_timestamps or None,
    }
    return {k: v for k, v in given.items() if v is not None}


def _size(text: str) -> int:
    from ._logdir import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) > 1000:
        raise argparse.ArgumentTypeError(f"expected a count from 0 to 1000, not {text!r}")
    return int(text)


def cmd_run(args: argparse.Namespace) -> int:
    from actors import load_tree_file, read_tree_file
    from supervision import ConfigError, load_engine

    from ._run import run_tree

    try:
        spec = load_tree_file(args.file)
        engine = load_engine(read_tree_file(args.file), str(args.file), vars=os.environ)
    except ConfigError as e:
        _error(e)
        return FAILED
    except OSError as e:  # the file went between the two reads
        _error(f"{args.file}: cannot read it ({e.strerror or e})")
        return FAILED
    opts = _run_options(args)
    opts.source = Path(args.file)
    opts.engine_file = engine
    return run_tree(spec, opts)


def demo_text() -> str:
    from importlib import resources

    return resources.files("actors.cli").joinpath("demo.toml").read_text()


def cmd_demo(args: argparse.Namespace) -> int:
    from actors import load_tree_text

    from ._run import run_tree

    spec = load_tree_text(demo_text(), "demo.toml")
    return run_tree(spec, _run_options(args))


def cmd_check(args: argparse.Namespace) -> int:
    from actors import read_tree_file
    from supervision import ConfigError, TooLarge, load_engine, load_tree

    from ._check import (
        daemon_warnings,
        far_side_warnings,
        loose_problems,
        problems,
        root_run_notes,
    )
    from ._engine import engine_text
    from ._plain import Painter, spec_lines, write

    path = Path(args.file)
    try:
        # Targets stay unresolved: checking a file never runs its modules' code.
        spec = load_tree(read_tree_file(path), str(path), vars=dict(os.environ))
    except OSError as e:
        _error(f"{path}: cannot read it ({e.strerror or e})")
        return FAILED
    except TooLarge as e:  # read no further: its other problems would cost as much
        _error(e)
        return FAILED
    except ConfigError as e:
        # Every problem of the file in one pass: each child's, and what would fail at
        # run time (a program not on PATH) of the children as written.
        for error in e.errors:
            _error(error)
        found = loose_problems(path)
        for problem in found:
            _error(f"{path}: {problem}")
        for warning in daemon_warnings(path):
            _error(f"{path}: {warning}")
        if len(e.errors) + len(found) > 1:
            count = _plural(len(e.errors) + len(found), "problem")
            _error(f"{path}: {count}; the tree would not run as written")
        return FAILED
    found = problems(path, spec)
    for problem in found:
        _error(f"{path}: {problem}")
    for warning in [*daemon_warnings(path), *root_run_notes(spec)]:
        _error(f"{path}: {warning}")
    if found:
        _error(f"{path}: {_plural(len(found), 'problem')}; the tree would not run as written")
        return FAILED
    for warning in far_side_warnings(spec, path.resolve().parent, _engine_check):
        _error(f"{path}: {warning}")
    nodes = list(_walk_spec(spec))
    workers = sum(1 for n in nodes if n == "worker")
    supervisors = len(nodes) - workers
    print(
        printable(
            f"{args.file}: ok: tree {spec.id!r}, {_plural(workers, 'worker')} "
            f"under {_plural(supervisors, 'supervisor')}"
        )
    )
    write(sys.stdout, spec_lines(Painter(sys.stdout), spec))
    engine = load_engine(read_tree_file(path), str(path), vars=dict(os.environ))
    if engine is not None:
        print(printable(f"engine: {engine_text(engine)}"))
    return OK


def _engine_check() -> Callable[[Any], Any] | None:
    """The engine's test of what a node may not import (loads the engine: only asked
    for a tree whose placed subtrees name Python targets)."""
    from ._run import engine_check

    return engine_check()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _walk_spec(spec: Any) -> Any:
    yield spec.type
    for child in getattr(spec, "children", ()):
        yield from _walk_spec(child)


# -- commands that talk to a running tree -------------------------------------------------


def _socket(args: argparse.Namespace) -> Path:
    if args.socket is not None:
        return Path(args.socket)
    return find_socket(args.tree)


def _request(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any] | None:
    answer = call(_socket(args), request)
    if not answer.get("ok"):
        _error(answer.get("error"))
        return None
    return answer


def _find(root: Node, key: str) -> list[Node]:
    return [
        n
        for _, n in root.walk()
        if n.id == key or n.path == key or n.path.endswith(f"/{key.strip('/')}")
    ]


def cmd_status(args: argparse.Namespace) -> int:
    from ._plain import Painter, detail_lines, status_lines, write

    answer = _request(args, {"op": "status"})
    if answer is None:
        return FAILED
    root = Node.from_dict(answer["tree"])
    if args.id is not None:
        found = _find(root, args.id)
        if not found:
            _error(f"no child {args.id!r} in tree {root.id!r}; `nannytree status` lists them")
            return FAILED
        root = Node(**{**root.to_dict(), "children": found})
    else:
        found = []
    detail = None
    if args.id is not None and len(found) == 1 and found[0].type == "worker":
        more = _request(args, {"op": "detail", "id": found[0].path})
        detail = more["detail"] if more is not None else None
    if args.json:
        print(json.dumps({**answer, "tree": root.to_dict(), "detail": detail}, indent=2))
    else:
        paint = Painter(sys.stdout)
        lines = status_lines(paint, answer, root)
        if detail is not None:
            lines += ["", *detail_lines(paint, detail)]
        write(sys.stdout, lines)
    down = [n for _, n in root.walk() if n.state not in ("running",)]
    return NOT_RUNNING if down else OK


def cmd_ls(args: argparse.Namespace) -> int:
    """The running trees: id, pid and socket, one per line."""
    listed = 0
    for sock in running_sockets():
        try:
            hello = call(sock, {"op": "hello"}, timeout=5.0)
        except ControlError:
            continue
        fields = (hello.get("tree", sock.stem), f"pid {hello.get('pid')}", sock)
        print("\t".join(printable(f) for f in fields))
        listed += 1
    if not listed:
        # On stderr: a script reading the list still gets an empty one.
        print(
            "nannytree: no tree is running (start one with `nannytree run FILE`)", file=sys.stderr
        )
        return NOT_RUNNING
    return OK


def _action(op: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        request: dict[str, Any] = {"op": op, "id": args.id}
        if op == "signal":
            request["signal"] = args.sig
        if op == "stop" and args.with_dependents:
            request["with_dependents"] = True
        answer = _request(args, request)
        if answer is None:
            return FAILED
        print(printable(answer["message"], lines=True))
        return OK

    return run


def _last_lines(text: str, n: int | None) -> str:
    if n is None or not text:
        return text
    return "\n".join(text.split("\n")[-n:]) if n > 0 else ""


def cmd_logs(args: argparse.Namespace) -> int:
    sock = _socket(args)
    if args.reopen:
        answer = _request(args, {"op": "reopen_logs"})
        if answer is None:
            return FAILED
        print(printable(answer["message"], lines=True))
        return OK
    if args.id is None:
        _error("give a child's ID (or --reopen)")
        return USAGE
    if args.follow:
        # Imported before the tail is read, not between it and the follow's open.
        from . import _logfile  # noqa: F401
    request = {
        "op": "logs",
        "id": args.id,
        "stream": "stdout" if args.stdout else "stderr",
        "previous": args.previous,
    }
    answer = _request(args, request)
    if answer is None:
        return FAILED
    text = _last_lines(answer["message"], args.lines)
    if text:
        print(printable(text, lines=True), flush=True)
    if answer.get("gone"):
        _error(
            f"{answer['path']} is gone (moved away or deleted); `nannytree logs --reopen` "
            "has the tree start a new one"
        )
        if not args.follow:
            return FAILED
    if not args.follow:
        return OK
    try:
        if answer.get("path"):
            return _follow_file(sock, str(answer["path"]))
        return _follow_capture(sock, request, answer["message"])
    except KeyboardInterrupt:
        return OK


def _tree_alive(sock: Path) -> bool:
    try:
        return bool(call(sock, {"op": "hello"}, timeout=5.0).get("ok"))
    except ControlError:
        return False


def _follow_file(sock: Path, path: str, poll: float = 0.2) -> int:
    """As `tail -F`: print what is appended; start over when the file is replaced."""
    from ._logfile import open_log

    fd: int | None = None
    position = 0
    first = True  # the tail is printed already: start at the end, once
    checked = time.monotonic()
    try:
        while True:
            if fd is None:
                with contextlib.suppress(FileNotFoundError):
                    fd = open_log(path)
                    position = os.fstat(fd).st_size if first else 0
                first = False
            if fd is not None:
                size = os.fstat(fd).st_size
                if size < position:  # truncated
                    position = 0
                while chunk := os.pread(fd, 65536, position):
                    position += len(chunk)
                    sys.stdout.write(printable(chunk.decode(errors="replace"), lines=True))
                sys.stdout.flush()
                try:
                    replaced = os.stat(path).st_ino != os.fstat(fd).st_ino
                except FileNotFoundError:
                    replaced = True
                if replaced:
                    os.close(fd)
                    fd, position = None, 0
            if time.monotonic() - checked > 1.0:
                if not _tree_alive(sock):
                    return OK
                checked = time.monotonic()
            time.sleep(poll)
    finally:
        if fd is not None:
            os.close(fd)


def _new_part(old: str, new: str) -> str:
    """What a capture buffer (the last 64 KiB) gained since `old`."""
    if new.startswith(old):
        return new[len(old) :]
    for cut in range(1, len(old)):  # the buffer dropped its oldest bytes
        if new.startswith(old[cut:]):
            return new[len(old) - cut :]
    return new


def _follow_capture(sock: Path, request: dict[str, Any], seen: str, poll: float = 0.3) -> int:
    while True:
        time.sleep(poll)
        try:
            answer = call(sock, request, timeout=10.0)
        except NoTree:
            return OK
        except NoAnswer:  # busy (a remote restart): the next poll may answer
            continue
        if not answer.get("ok"):
            return OK if answer.get("kind") == "Stopping" else FAILED
        text = answer["message"]
        fresh = _new_part(seen, text)
        if fresh:
            sys.stdout.write(printable(fresh.lstrip("\n"), lines=True) + "\n")
            sys.stdout.flush()
        seen = text


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def cmd_add(args: argparse.Namespace) -> int:
    extra = [_json_or_text(a) for a in args.args] if args.json else list(args.args)
    answer = _request(args, {"op": "add", "id": args.id, "args": extra})
    if answer is None:
        return FAILED
    print(printable(answer["message"]))
    return OK


def _settle_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--settle",
        type=settle_seconds,
        metavar="SECONDS",
        help="a replaced or added child without readiness counts as started once it has "
        f"stayed up this long (default {UPDATE_SETTLE:g}; 0: once it runs); one that exits "
        "sooner is left stopped with its new spec, charging no restart intensity",
    )


def cmd_reload(args: argparse.Namespace) -> int:
    """`reload` alone (or `update`): apply the edited tree file; `reload ID...`: reload
    those children in place, as their spec's `reload` says (systemctl reload)."""
    ids = getattr(args, "ids", None) or []
    if not ids:
        request: dict[str, Any] = {"op": "reload"}
        if args.settle is not None:
            request["settle"] = args.settle
        answer = _request(args, request)
        if answer is None:
            return FAILED
        print(printable(answer["message"], lines=True))
        return OK
    failed = False
    for key in ids:
        answer = _request(args, {"op": "reload_child", "id": key})
        if answer is None:
            failed = True
            continue
        print(printable(answer["message"], lines=True))
    return FAILED if failed else OK


def cmd_wait(args: argparse.Namespace) -> int:
    from ._wait import cmd_wait as wait

    return wait(args)


def cmd_shutdown(args: argparse.Namespace) -> int:
    answer = _request(args, {"op": "shutdown"})
    if answer is None:
        return FAILED
    print(printable(answer["message"], lines=True))
    return OK


def cmd_events(args: argparse.Namespace) -> int:
    request = {"op": "events", "follow": args.follow, "last": args.last}
    try:
        for message in stream(_socket(args), request):
            if "event" in message:
                if args.json:
                    print(json.dumps(message["event"]), flush=True)
                else:
                    print(EventRecord.from_dict(message["event"]), flush=True)  # escaped
            elif "end" in message:
                if message.get("ok") is False:
                    _error(message["end"])
                    return FAILED
                return OK
            elif not message.get("ok", True):
                _error(message.get("error"))
                return FAILED
    except KeyboardInterrupt:
        return OK
    return OK


# -- the parser ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nannytree",
        description="Run Erlang/OTP-style supervision trees of OS processes from TOML files.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    hosting = argparse.ArgumentParser(add_help=False)
    hosting.add_argument(
        "--socket",
        type=Path,
        help="control socket (default: <runtime dir>/<tree id>.sock)",
    )
    view = hosting.add_mutually_exclusive_group()
    view.add_argument(
        "--live",
        dest="live",
        action="store_true",
        default=None,
        help="live view (default on a terminal)",
    )
    view.add_argument(
        "--plain", dest="live", action="store_false", help="one line per event (default otherwise)"
    )
    hosting.add_argument("--duration", type=positive, help="stop the tree after this many seconds")
    hosting.add_argument(
        "--child-output",
        default="auto",
        metavar="auto|inherit|PATH",
        help="where children without their own stdout/stderr write (auto: a log file "
        "each under --log-dir)",
    )
    hosting.add_argument(
        "--log-dir",
        type=Path,
        metavar="DIR",
        help="the children's log files, DIR/<tree>/<supervisor>/<child>.log (default: "
        "$NANNYTREE_LOG_DIR, else /var/log/nannytree for root, "
        "else $XDG_STATE_HOME/nannytree)",
    )
    hosting.add_argument(
        "--log-max-bytes",
        type=_size,
        metavar="SIZE",
        help="rotate a child's log file before it passes SIZE (default 10M; 0: never), "
        "unless its table sets log_max_bytes",
    )
    hosting.add_argument(
        "--log-backups",
        type=_count,
        metavar="N",
        help="older log files kept, file.1 ... file.N (default 5)",
    )
    hosting.add_argument(
        "--log-timestamps",
        action="store_true",
        help="start each line of a log file with its UTC time",
    )

    hosting.add_argument(
        "--engine",
        metavar="auto|local|ray://HOST:PORT",
        help="run the subtrees that have a placement on this Ray cluster (nannytree[ray]); "
        "over the tree file's [engine] address",
    )
    add_engine_flags(hosting)
    add_monitor_flags(hosting)

    p = sub.add_parser("run", parents=[hosting], help="run a tree file in the foreground")
    p.add_argument("file", type=Path, help="the TOML tree file")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("demo", parents=[hosting], help="run the built-in demo tree")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("check", help="validate a tree file and show the tree it would start")
    p.add_argument("file", type=Path)
    p.set_defaults(func=cmd_check)

    client = argparse.ArgumentParser(add_help=False)
    where = client.add_mutually_exclusive_group()
    where.add_argument("--socket", type=Path, help="the run's control socket")
    where.add_argument("--tree", help="the tree's id (its socket in the runtime dir)")

    p = sub.add_parser("ls", help="list the running trees")
    p.set_defaults(func=cmd_ls)
    p = sub.add_parser("status", parents=[client], help="show the running tree")
    p.add_argument("id", nargs="?", help="only this child (id or path)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)
    for op, text in (
        ("start", "start a stopped child"),
        ("stop", "stop a child (its spec is kept); its dependents keep running"),
        ("restart", "stop a child (or a whole subtree, or `all`) if running, then start it"),
        ("pause", "SIGSTOP a child's process group"),
        ("resume", "SIGCONT a paused child"),
        (
            "reset",
            "forget the restarts counted so far: a supervisor's intensity window, or a "
            "child's restart_limit (a failed child is then stopped)",
        ),
    ):
        p = sub.add_parser(op, parents=[client], help=text)
        p.add_argument(
            "id",
            help="a supervisor (the tree's id for the root) or a child with a "
            "restart_limit, by id or path"
            if op == "reset"
            else "child id, or its path such as pool/worker",
        )
        if op == "stop":
            p.add_argument(
                "--with-dependents",
                action="store_true",
                help="also stop the siblings started after it in a rest_for_one or "
                "one_for_all group, last first, as systemd's Requires=",
            )
        p.set_defaults(func=_action(op))
    p = sub.add_parser(
        "add", parents=[client], help="start a new child of a simple_one_for_one supervisor"
    )
    p.add_argument("id", help="the supervisor (id or path)")
    p.add_argument("args", nargs="*", help="extra arguments for its template (strings)")
    p.add_argument(
        "--json", action="store_true", help="read each argument as JSON (numbers, lists...)"
    )
    p.set_defaults(func=cmd_add)
    p = sub.add_parser("signal", parents=[client], help="send a signal to a child's process group")
    p.add_argument("id")
    p.add_argument("sig", type=signal_arg, help="HUP, TERM, USR1, ... or a number")
    p.set_defaults(func=_action("signal"))
    p = sub.add_parser(
        "logs", parents=[client], help='what a child wrote lately (stdout/stderr = "capture")'
    )
    p.add_argument("id", nargs="?")
    p.add_argument("--stdout", action="store_true", help="its stdout instead of its stderr")
    p.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing what it writes")
    p.add_argument(
        "--reopen",
        action="store_true",
        help="have the tree reopen every log file by its path (after logrotate moved "
        "them; as SIGHUP to `nannytree run`)",
    )
    p.add_argument(
        "-p", "--previous", action="store_true", help="what the run before this one wrote"
    )
    p.set_defaults(func=cmd_logs)
    p = sub.add_parser("events", parents=[client], help="the tree's lifecycle events")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    p.add_argument("-n", "--last", type=int, default=20, help="past events to print first")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=cmd_events)
    p = sub.add_parser(
        "reload",
        parents=[client],
        help="reload children in place (their spec's reload: a check, then a signal); "
        "with no ID, apply the edited tree file",
    )
    p.add_argument("ids", nargs="*", metavar="ID", help="children to reload (none: the file)")
    _settle_flag(p)
    p.set_defaults(func=cmd_reload)
    p = sub.add_parser(
        "update", parents=[client], help="apply the edited tree file (supervisorctl update)"
    )
    _settle_flag(p)
    p.set_defaults(func=cmd_reload)
    p = sub.add_parser(
        "wait",
        parents=[client],
        help="block until the tree (or these children) is ready; waits for the tree to start",
        description=f"Exit {OK} once ready; {FAILED} if it never will be (the tree ended, a "
        "supervisor gave up for good), at once, with the reason; "
        f"{NOT_RUNNING} if no tree started within the timeout; {TIMED_OUT} if something "
        "was not ready when it ran out, naming what and why.",
    )
    p.add_argument("ids", nargs="*", metavar="ID", help="children to wait for (none: all)")
    p.add_argument(
        "--ready",
        action="store_true",
        required=True,
        help="every worker running (its ready passed) with no liveness probe failing, "
        "or a one-shot step done; every supervisor running",
    )
    p.add_argument(
        "--timeout", type=non_negative, metavar="S", help="give up after S seconds (default: never)"
    )
    p.set_defaults(func=cmd_wait)
    p = sub.add_parser("shutdown", parents=[client], help="stop the running tree")
    p.set_defaults(func=cmd_shutdown)
    return parser


class _Version(argparse.Action):
    """--version, looked up only when asked (importlib.metadata is slow to import)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"nannytree {_version()}")
        parser.exit()


def _version() -> str:
    from .._version import __version__

    return __version__


def _quiet_logging() -> None:
    """The nannies log abnormal exits as warnings; the CLI shows them as events already."""
    import logging

    logger = logging.getLogger("nannytree")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("nannytree: %(levelname)s: %(message)s"))
        handler.setLevel(logging.ERROR)
        logger.addHandler(handler)
        logger.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.func in (cmd_run, cmd_demo):
        _quiet_logging()
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader went away (`logs -f | head`): nothing more to say, nowhere to say it.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit's flush must not fail again
        return FAILED
    except NoTree as e:
        _error(e)
        return NOT_RUNNING
    except BadUsage as e:
        _error(e)
        return USAGE
    except ControlError as e:
        _error(e)
        return FAILED
