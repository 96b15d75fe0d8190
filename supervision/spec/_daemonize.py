"""Commands that ask to fork into the background: nginx's `-g 'daemon on;'`, redis's
`--daemonize yes`, memcached's `-d`. Pure: it reads the argv only.

Without a `pid_file` such a command cannot be supervised: its first process exits
0 at once, which the runtime reports as `daemonized`, kills what it left, and
restarts it, again and again (docs/how-to/daemons.md). So a command that
says so in its arguments is refused when the spec is built; what its arguments do
not say (nginx's default `daemon on`, a config file's `daemonize yes`) is for
`nannytree check` to warn about.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NGINX_DAEMON = re.compile(r"(?:^|;)\s*daemon\s+(on|off)\s*;", re.IGNORECASE)
_YES = ("yes", "true", "on", "1")


def asks_to_daemonize(argv: Sequence[str]) -> tuple[str, str] | None:
    """What in `argv` asks the program to fork into the background, and how to keep it
    in the foreground instead; None if nothing does."""
    if not argv:
        return None
    program = argv[0].rsplit("/", 1)[-1]
    args = list(argv[1:])
    if program == "nginx":
        for i, arg in enumerate(args[:-1]):
            if arg == "-g":
                found = _NGINX_DAEMON.findall(args[i + 1])
                if found and found[-1].lower() == "on":
                    return "-g 'daemon on;'", "nginx -g 'daemon off;'"
        return None
    for i, arg in enumerate(args):
        name, _, value = arg.partition("=")
        if name in ("--daemonize", "--daemon"):
            if not value and i + 1 < len(args) and not args[i + 1].startswith("-"):
                value = args[i + 1]
            if (not value and name == "--daemon") or value.lower() in _YES:
                shown = arg if not value or "=" in arg else f"{arg} {value}"
                return shown, "--daemonize no" if name == "--daemonize" else f"drop {name}"
    if program == "memcached" and ("-d" in args or "--daemon" in args):
        return "-d", "drop -d"
    return None
