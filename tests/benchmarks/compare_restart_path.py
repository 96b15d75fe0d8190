"""The restart path, before and after a change, measured in the same run.

    python -m tests.benchmarks.compare_restart_path [OLD] [--reference COMMIT] [--rounds 4] [--n 30]

Runs the same figures (Python restart: SIGKILL -> the replacement runs user
code; command restart: SIGKILL -> the nanny's child_started; detection: SIGKILL
-> the nanny's child_exited; and the floor for a command restart, a one-thread
Popen supervisor in the same process: SIGKILL -> its new pid) against
OLD and this checkout,
alternating rounds so that both see the same machine load, and prints median
and p95 of each. Each round runs in a subprocess with that checkout first on
sys.path.

OLD is a checkout (a folder) or a commit; without it, the fixed reference
(REFERENCE, `--reference` to name another) is checked out into a temporary git
worktree for the run. A change is measured against the reference as well as
against its parent, so that a slow drift over many changes shows (issue 36: 25-47 %
over the commits after fe819a6, none of whose own before/after caught it). The
machine-independent figure is the ratio of the command restart to the Popen floor
measured in the same run; REFERENCE_FIGURES are the reference's own on this
project's kind of machine (docs/explanation/performance.md, "The fixed reference").
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from tests.benchmarks.ab import alternate, checked_out, print_table

# The fixed reference: the restart path before the issues after the house's first step
# (health, operator, across hosts), and its figures (median / p95, ms) measured on
# this project's kind of machine (2 shared cores, Python 3.11), alternating with
# def5b2c in one run. Update both together, and docs/explanation/performance.md.
REFERENCE = "fe819a6"
REFERENCE_FIGURES = {
    "command": (1.68, 2.92),
    "popen": (0.65, 2.72),
    "ratio": 2.6,  # command / popen, medians
}

ROUND = r"""
import json, os, signal, socket, sys, tempfile, time
from actors import NannyActor
from supervision import ChildSpec, EventKind, SupervisorSpec
from tests.benchmarks.marker import mark_and_sleep

n = int(sys.argv[1])
path = tempfile.mktemp(prefix="nt-bench-")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
sock.settimeout(30)
out = {"python": [], "detect": [], "command": []}
spec = SupervisorSpec(id="b", intensity=10**6, period=1.0, children=[
    ChildSpec(id="m", target=mark_and_sleep, args=(path,)),
    ChildSpec(id="c", command=["sleep", "100000"]),
])
ref = NannyActor.start(spec)
try:
    sock.recv(64)
    log = ref.proxy().event_log().get()
    for _ in range(n):
        time.sleep(0.02)
        pid = ref.proxy().which_child("m").get().pid
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        out["python"].append(float(sock.recv(64)) - t0)
        e = log.wait_for(lambda e: e.context is EventKind.CHILD_EXITED and e.pid == pid, 10)
        out["detect"].append(e.time - t0)
        time.sleep(0.01)
        info = ref.proxy().which_child("c").get()
        t0 = time.monotonic()
        os.kill(info.pid, signal.SIGKILL)
        e = log.wait_for(lambda e, i=info.incarnation: e.context is EventKind.CHILD_STARTED
                         and e.offender == "c" and e.incarnation == i + 1, 10)
        out["command"].append(e.time - t0)
finally:
    ref.stop()
    sock.close()
    os.unlink(path)

# The floor for a command restart: a one-thread Popen supervisor in this process,
# observed the same way (SIGKILL -> the new pid known to the supervising thread).
import queue, subprocess, threading
pids = queue.Queue()
def supervise(rounds):
    p = subprocess.Popen(["sleep", "100000"])
    pids.put((time.monotonic(), p.pid))
    for _ in range(rounds):
        p.wait()
        p = subprocess.Popen(["sleep", "100000"])
        pids.put((time.monotonic(), p.pid))
    return p
last = []
t = threading.Thread(target=lambda: last.append(supervise(n)))
t.start()
_, pid = pids.get()
out["popen"] = []
for _ in range(n):
    time.sleep(0.01)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    t1, pid = pids.get(timeout=10)
    out["popen"].append(t1 - t0)
t.join()
last[0].kill()
last[0].wait()

# The floor of this design: a launcher process of its own that reaps the child and
# starts its successor, reporting both in one line to a reader thread that hands it
# to a second thread (the nanny's place), observed the same way: SIGKILL -> the new
# pid known to that second thread. What a restart costs beyond it is nannytree's.
LAUNCHER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(['sleep', '100000'])\n"
    "print(p.pid, flush=True)\n"
    "for line in iter(sys.stdin.readline, ''):\n"
    "    if line.strip() == 'stop':\n"
    "        p.kill(); p.wait(); break\n"
    "    p.wait()\n"
    "    p = subprocess.Popen(['sleep', '100000'])\n"
    "    print(p.pid, flush=True)\n"
)
launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
inbox, known = queue.Queue(), queue.Queue()
def reader():
    for line in launcher.stdout:
        inbox.put(int(line))
def nanny():
    while (pid := inbox.get()) is not None:
        known.put((time.monotonic(), pid))
threads = [threading.Thread(target=reader), threading.Thread(target=nanny)]
for th in threads:
    th.start()
_, pid = known.get(timeout=10)
out["launcher_floor"] = []
for _ in range(n):
    time.sleep(0.01)
    launcher.stdin.write("next\n")  # the launcher waits for its child's exit
    launcher.stdin.flush()
    time.sleep(0.002)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    t1, pid = known.get(timeout=10)
    out["launcher_floor"].append(t1 - t0)
launcher.stdin.write("stop\n")
launcher.stdin.flush()
launcher.wait()
inbox.put(None)
for th in threads:
    th.join()
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "old", nargs="?", help="a checkout or commit before the change (default: --reference)"
    )
    parser.add_argument("--reference", default=REFERENCE, help="the fixed reference commit")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--n", type=int, default=30)
    args = parser.parse_args()
    with checked_out(args.old or args.reference) as old:
        print(f"before: {args.old or args.reference}  after: this checkout")
        results = alternate(ROUND, Path(old), args.rounds, args.n)
    print_table(results, ("python", "command", "detect", "popen", "launcher_floor"))
    for label in ("before", "after"):
        command = statistics.median(results[label]["command"])
        ratio = command / statistics.median(results[label]["popen"])
        floor = command / statistics.median(results[label]["launcher_floor"])
        print(
            f"command restart / Popen supervisor, {label}: {ratio:.2f}x; "
            f"/ a launcher process and two threads: {floor:.2f}x"
        )
    command, popen, ratio = (REFERENCE_FIGURES[k] for k in ("command", "popen", "ratio"))
    print(
        f"the reference {REFERENCE} as documented: command {command[0]:.2f} / {command[1]:.2f} ms,"
        f" Popen {popen[0]:.2f} / {popen[1]:.2f} ms, {ratio:.1f}x (issue 36's target: 1.5x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
