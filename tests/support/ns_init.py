"""PID 1 of a namespaced test node (tests/support/ray_cluster.py), as a host's init:
runs its command, passes SIGTERM/SIGINT on to it, and reaps every orphan of the
namespace (a double-forked launcher ends up here). It outlives its command, as a
host's init outlives Ray, until no process of the namespace is left; the node is
ended at once by killing it (the kernel then kills every process of the namespace)."""

from __future__ import annotations

import os
import signal
import sys


def main(argv: list[str]) -> int:
    child = os.posix_spawnp(argv[0], argv, dict(os.environ))
    code: int | None = None

    def forward(sig: int, _frame: object) -> None:
        if code is None:  # not reaped: the pid is still its
            os.kill(child, sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:  # nothing left in the namespace
            return code or 0
        if pid == child:
            code = os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
