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
    nannytree top                      the live view of a tree run elsewhere (read-only)
    nannytree wait [ID...] --ready     until the tree (or those children) is ready
    nannytree shutdown                 stop the running tree, as Ctrl-C does
    nannytree tune events.jsonl --tree tree.toml --objective 'min restarts'
                                       settings tuned on the tree's own history

Exit status: 0 done; 1 failed (invalid file, refused request, a tree that gave
up); 2 bad usage (also: several trees run and none was named); 3 not running
(no tree found, or `status` shows a child that is not running, as systemctl);
4 timed out (`wait`: not ready within --timeout).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._args import non_negative, positive, signal_arg
from ._client import error
from ._cmd_check import cmd_check
from ._cmd_control import cmd_add, cmd_on_child, cmd_shutdown
from ._cmd_events import cmd_events
from ._cmd_logs import cmd_logs
from ._cmd_run import cmd_demo, cmd_run
from ._cmd_status import cmd_ls, cmd_status
from ._cmd_tune import add_tune_parser
from ._cmd_update import add_settle_flag, cmd_reload
from ._control import BadUsage, ControlError, NoTree
from ._exit import EPILOG, FAILED, NOT_RUNNING, OK, TIMED_OUT, USAGE
from ._run_flags import hosting_flags

# Client commands (status, logs, events, ...) import only what they print with:
# rich, pykka, psutil and the nanny come in with the commands that need them,
# so a client answers fast (measured in tests/benchmarks/bench_cli.py).


def cmd_top(args: argparse.Namespace) -> int:
    from ._cmd_top import cmd_top as top

    return top(args)


def cmd_wait(args: argparse.Namespace) -> int:
    from ._cmd_wait import cmd_wait as wait

    return wait(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nannytree",
        description="Run Erlang/OTP-style supervision trees of OS processes from TOML files.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    hosting = hosting_flags()

    p = sub.add_parser("run", parents=[hosting], help="run a tree file in the foreground")
    p.add_argument("file", type=Path, help="the TOML tree file")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("demo", parents=[hosting], help="run the built-in demo tree")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("check", help="validate a tree file and show the tree it would start")
    p.add_argument("file", type=Path)
    p.add_argument(
        "--child-output",
        metavar="auto|inherit|journal|PATH",
        help="as `run` will be given it: `journal` checks that journald answers here, "
        "a PATH that its folder exists",
    )
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
    p.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {NOT_RUNNING} for any child that does not run, a finished one-shot "
        "step or a child stopped on purpose too",
    )
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
        p.set_defaults(func=cmd_on_child(op))
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
    p.set_defaults(func=cmd_on_child("signal"))
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
    for name, text in (
        (
            "top",
            "the live view of a running tree, from another shell (read-only; "
            "Ctrl-C detaches, the tree runs on)",
        ),
        ("attach", "the same as `nannytree top`"),
    ):
        p = sub.add_parser(name, parents=[client], help=text)
        shown = p.add_mutually_exclusive_group()
        shown.add_argument(
            "--live", action="store_true", default=None, help="the live view, even off a terminal"
        )
        shown.add_argument(
            "--plain",
            dest="live",
            action="store_false",
            help="the status once, then one line per event (the default off a terminal)",
        )
        p.add_argument("-n", "--last", type=int, default=20, help="past events to show first")
        p.add_argument(
            "--refresh", type=positive, default=1.0, metavar="S", help="seconds between redraws"
        )
        p.set_defaults(func=cmd_top)
    p = sub.add_parser(
        "reload",
        parents=[client],
        help="reload children in place (their spec's reload: a check, then a signal); "
        "with no ID, apply the edited tree file",
    )
    p.add_argument("ids", nargs="*", metavar="ID", help="children to reload (none: the file)")
    add_settle_flag(p)
    p.set_defaults(func=cmd_reload)
    p = sub.add_parser(
        "update", parents=[client], help="apply the edited tree file (supervisorctl update)"
    )
    add_settle_flag(p)
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
        "or a one-shot step done, or stopped on purpose (`stop`); every supervisor running",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a child stopped on purpose is not ready (waits for it to be started)",
    )
    p.add_argument(
        "--timeout", type=non_negative, metavar="S", help="give up after S seconds (default: never)"
    )
    p.set_defaults(func=cmd_wait)
    p = sub.add_parser("shutdown", parents=[client], help="stop the running tree")
    p.set_defaults(func=cmd_shutdown)
    add_tune_parser(sub)
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
        error(e)
        return NOT_RUNNING
    except BadUsage as e:
        error(e)
        return USAGE
    except ControlError as e:
        error(e)
        return FAILED
