"""A frozen (SIGSTOPped) child's stop, before and after SIGCONT follows the stop signal.

    python -m tests.benchmarks.stopped_child OLD [--rounds 2] [--n 5]

OLD is a checkout or a commit. Each sample: a child with a SIGTERM handler and
`shutdown = 5`, frozen by a SIGSTOP from outside, then `terminate_child` -> its
answer (the stop done); and, for comparison, the same stop of the child running.
Each figure as median / p95; "graceful" is how many frozen stops ended by the
child's handler (exit 0) rather than by SIGKILL at the end of its shutdown.
"""

from __future__ import annotations

import argparse
import sys

from tests.benchmarks.ab import alternate, checked_out, print_table

ROUND = r"""
import json, os, signal, sys, tempfile, time
from pathlib import Path
from actors import Tree
from supervision import ChildSpec, EventKind, SupervisorSpec

n = int(sys.argv[1])
marks = Path(tempfile.mkdtemp(prefix="nt-frozen-"))
CHILD = '''
import os, signal, sys, time
def term(*_):
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
while True:
    time.sleep(0.05)
'''
spec = ChildSpec(id="c", command=[sys.executable, "-c", CHILD, str(marks)], shutdown=5.0)
tree = Tree.start(SupervisorSpec("root", intensity=100, children=[spec]))
out = {"frozen": [], "running": [], "graceful": []}

def ready():
    pid = tree.nanny.which_child("c").get().pid
    deadline = time.monotonic() + 20
    while not (marks / str(pid)).exists():
        assert time.monotonic() < deadline
        time.sleep(0.005)
    return pid

try:
    for i in range(2 * n):
        frozen = i % 2 == 0
        pid = ready()
        if frozen:
            os.kill(pid, signal.SIGSTOP)
            while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
                time.sleep(0.001)
        t0 = time.perf_counter()
        tree.nanny.terminate_child("c").get()
        took = time.perf_counter() - t0
        out["frozen" if frozen else "running"].append(took)
        if frozen:
            stop = [e for e in tree.events() if e.context is EventKind.CHILD_TERMINATED][-1]
            out["graceful"].append(1.0 if stop.reason.signal is None else 0.0)
        tree.nanny.restart_child("c").get()
finally:
    tree.stop(timeout=30)
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="a checkout or a commit of the code before the change")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n", type=int, default=5)
    args = parser.parse_args()
    with checked_out(args.old) as old:
        results = alternate(ROUND, old, args.rounds, args.n)
    print_table(results, ("frozen", "running"))
    for label in ("before", "after"):
        graceful = results[label]["graceful"]
        print(f"{label}: {int(sum(graceful))} of {len(graceful)} frozen stops graceful")
    return 0


if __name__ == "__main__":
    sys.exit(main())
