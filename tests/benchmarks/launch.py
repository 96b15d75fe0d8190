"""What a restart costs by the way a child is launched, before and after a change, in
the same run (docs/launcher.md, "A target with a user").

    python -m tests.benchmarks.launch OLD_CHECKOUT [--rounds 4] [--n 30] [--user nobody]

As root. Figures, each SIGKILL -> the replacement runs: a Python target forked from
the launcher ("python") and one with `user` ("python as user": a fork before issue
35, a fresh interpreter after), the same with `warm_start` ("python as user, warm":
a forked standby before, a fresh one after) and one with `fresh_interpreter`
("python fresh", for reference), timed to their first line of code; a command
("command") and one with `user` ("command as user"), timed to the nanny's
child_started. Rounds alternate between OLD_CHECKOUT and this checkout, so both
see the same machine load; each figure prints as median / p95.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tests.benchmarks.ab import alternate, print_table

ROUND = r"""
import json, os, signal, sys, tempfile, time
from actors import NannyActor
from supervision import ChildSpec, EventKind, SupervisorSpec

n, user = int(sys.argv[1]), os.environ["BENCH_USER"]
folder = tempfile.mkdtemp(prefix="nt-bench-")
os.chmod(folder, 0o755)
fifo = os.path.join(folder, "marks")
os.mkfifo(fifo, 0o666)
os.chmod(fifo, 0o666)
marks = open(os.open(fifo, os.O_RDWR), "rb", buffering=0)  # never EOF

def mark(path):
    # By value, os and time only: the user may not read this interpreter's files.
    import os, time
    fd = os.open(path, os.O_WRONLY)
    os.write(fd, b"%r\n" % time.monotonic())
    os.close(fd)
    while True:
        time.sleep(3600)

def line():
    got = b""
    while not got.endswith(b"\n"):
        got += marks.read(1)
    return float(got)

# Each child restarted n times; one tree per group, so that the background work of
# one group (a fresh standby refilled) does not fall on another's figures.
def measure(children, pause=0.02):
    spec = SupervisorSpec(id="b", intensity=10**6, period=1.0, children=children)
    ref = NannyActor.start(spec)
    try:
        for c in children:
            if c.target is not None:
                line()
        log = ref.proxy().event_log().get()
        for _ in range(n):
            for c in children:
                time.sleep(pause)
                info = ref.proxy().which_child(c.id).get()
                t0 = time.monotonic()
                os.kill(info.pid, signal.SIGKILL)
                if c.target is not None:
                    out[c.id].append(line() - t0)
                    continue
                e = log.wait_for(lambda e, i=info.incarnation, c=c.id:
                                 e.context is EventKind.CHILD_STARTED and e.offender == c
                                 and e.incarnation == i + 1, 10)
                out[c.id].append(e.time - t0)
    finally:
        ref.stop()

groups = [
    [  # the paths a user target does not take: unchanged
        ChildSpec(id="python", target=mark, args=(fifo,)),
        ChildSpec(id="command", command=["sleep", "100000"]),
        ChildSpec(id="command as user", command=["sleep", "100000"], user=user),
    ],
    [ChildSpec(id="python as user", target=mark, args=(fifo,), user=user)],
    # Its standby refilled before each kill (a fresh one takes a fresh start's time).
    ([ChildSpec(id="python as user, warm", target=mark, args=(fifo,), user=user,
                warm_start=True)], 0.5),
    [ChildSpec(id="python fresh", target=mark, args=(fifo,), fresh_interpreter=True)],
]
out = {c.id: [] for g in groups for c in (g[0] if isinstance(g, tuple) else g)}
try:
    for g in groups:
        measure(*g) if isinstance(g, tuple) else measure(g)
finally:
    marks.close()
    os.unlink(fifo)
    os.rmdir(folder)
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="a checkout of the code before the change")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--user", default="nobody", help="the children's user")
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("run as root: the children take on --user")
    os.environ["BENCH_USER"] = args.user
    results = alternate(ROUND, args.old, args.rounds, args.n)
    figures = (
        *("python", "python as user", "python as user, warm", "python fresh"),
        *("command", "command as user"),
    )
    print_table(results, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
