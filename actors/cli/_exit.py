"""The exit status of every `nannytree` command, in one place (docs/reference/cli.md
lists them from here)."""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2
NOT_RUNNING = 3
TIMED_OUT = 4
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C

MEANINGS: dict[int, str] = {
    OK: "Done: the command did what it was asked; `run` and `demo`: the tree was "
    "stopped (Ctrl-C, SIGTERM, `--duration`, `shutdown`) or shut itself down "
    "(auto_shutdown); `wait`: ready.",
    FAILED: "Failed: an invalid tree file (`check`, `run`), a request the tree refused, "
    "a tree that gave up (its root reached its restart intensity) or could not start, "
    "a child not found; `tune`: a journal without the history asked for, an unknown "
    "metric or child; `wait`: it will never be ready (the tree ended, a supervisor "
    "gave up for good).",
    USAGE: "Bad usage: unknown command or flag, a bad value (argparse's own), `logs` "
    "without an ID; `run`: engine settings the engine refuses, or detection flags "
    "without an engine; also several trees run and none was named (`--tree` or "
    "`--socket`).",
    NOT_RUNNING: "Not running: no tree found (`ls` found none; `wait`: none started "
    "within `--timeout`), or `status` shows a child that is not running, as "
    "`systemctl status` does (a finished one-shot step and a child stopped on purpose "
    "are fine, but with `--strict`).",
    TIMED_OUT: "Timed out: `wait --timeout` ran out with something not ready (named on "
    "stderr, with why).",
    INTERRUPTED: "Interrupted: Ctrl-C stopped `wait`.",
}
"""What each exit status means, whichever command returns it."""

EPILOG = (
    f"Exit status: {OK} done, {FAILED} failed, {USAGE} bad usage, {NOT_RUNNING} not "
    "running (no tree found, or `status` shows a child that is not running), "
    f"{TIMED_OUT} timed out (`wait`)."
)
