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

spec = SupervisorSpec(id="b", intensity=10**6, period=1.0, children=[
    ChildSpec(id="python", target=mark, args=(fifo,)),
    ChildSpec(id="python as user", target=mark, args=(fifo,), user=user),
    ChildSpec(id="python fresh", target=mark, args=(fifo,), fresh_interpreter=True),
    ChildSpec(id="python as user, warm", target=mark, args=(fifo,), user=user, warm_start=True),
    ChildSpec(id="command", command=["sleep", "100000"]),
    ChildSpec(id="command as user", command=["sleep", "100000"], user=user),
])
out = {c.id: [] for c in spec.children}
ref = NannyActor.start(spec)
try:
    line(), line(), line(), line()
    log = ref.proxy().event_log().get()
    for _ in range(n):
        for cid in ("python", "python as user", "python fresh", "python as user, warm"):
            time.sleep(0.02)
            pid = ref.proxy().which_child(cid).get().pid
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            out[cid].append(line() - t0)
        for cid in ("command", "command as user"):
            time.sleep(0.02)
            info = ref.proxy().which_child(cid).get()
            t0 = time.monotonic()
            os.kill(info.pid, signal.SIGKILL)
            e = log.wait_for(lambda e, i=info.incarnation, c=cid:
                             e.context is EventKind.CHILD_STARTED and e.offender == c
                             and e.incarnation == i + 1, 10)
            out[cid].append(e.time - t0)
finally:
    ref.stop()
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
