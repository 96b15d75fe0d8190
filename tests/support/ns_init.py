"""PID 1 of a namespaced test node (tests/support/ray_cluster.py): runs its command,
reaps every orphan of the namespace (a double-forked launcher ends up here, as under
a host's init), passes SIGTERM/SIGINT on, and exits with the command. Its exit ends
every process left in the namespace: the kernel kills them."""

from __future__ import annotations

import os
import signal
import sys


def main(argv: list[str]) -> int:
    child = os.posix_spawnp(argv[0], argv, dict(os.environ))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: os.kill(child, s))
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 0
        if pid == child:
            return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
