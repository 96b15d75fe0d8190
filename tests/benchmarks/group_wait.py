"""A restart that waits for its predecessor's process group, before and after the change.

    python -m tests.benchmarks.group_wait OLD_CHECKOUT [--rounds 4] [--n 20]

Figures (docs/launcher.md, "A restart waits for the old group"), each against
OLD_CHECKOUT and this checkout, alternating rounds so that both see the same load,
each round in a subprocess with that checkout first on sys.path:

- nginx: `kill -9` of the master -> a new master serves a request (its workers
  held the port; nginx retries a bind that fails after 500 ms);
- python / command: SIGKILL of a plain child (nothing else in its group) -> its
  successor runs user code / the nanny's child_started: what the wait costs when
  there is nothing to wait for;
- the wait itself (this checkout only: the exit's `group_wait`): for nginx (its
  workers exiting) and for the plain children.

Median and p95 of each; for nginx also how many restarts took over 0.4 s.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.benchmarks.ab import alternate, print_table

ROUND = r"""
import json, os, shutil, signal, socket, sys, tempfile, time
from actors import Tree
from supervision import ChildSpec, EventKind, SupervisorSpec
from tests.benchmarks.marker import mark_and_sleep

n = int(sys.argv[1])
CONF = '''
{user}
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
worker_processes 2;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{ listen 127.0.0.1:{port}; root {dir}/www; }}
}}
'''

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def serves(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as c:
            c.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return c.recv(16).startswith(b"HTTP/1.1 200")
    except OSError:
        return False

def handle(tree, pid):
    return next(c for c in tree.context.spawner.children() if c.pid == pid)

def wait(of):
    deadline = time.monotonic() + 5
    while of.exit is None and time.monotonic() < deadline:
        time.sleep(0.001)
    return getattr(of.exit, "group_wait", None)

out = {"nginx": [], "python": [], "command": [], "wait_nginx": [], "wait_python": [],
       "wait_command": []}
folder = tempfile.mkdtemp(prefix="nt-bench-")
port = free_port()
os.mkdir(f"{folder}/www")
open(f"{folder}/www/index.html", "w").write("up\n")
user = "user root;" if os.geteuid() == 0 else ""
open(f"{folder}/nginx.conf", "w").write(CONF.format(dir=folder, port=port, user=user))
mark = f"{folder}/mark"
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(mark)
sock.settimeout(30)
spec = SupervisorSpec(id="b", intensity=10**6, period=1.0, children=[
    ChildSpec(id="nginx", command=["nginx", "-c", f"{folder}/nginx.conf", "-p", folder]),
    ChildSpec(id="m", target=mark_and_sleep, args=(mark,)),
    ChildSpec(id="c", command=["sleep", "100000"]),
])
tree = Tree.start(spec)
try:
    sock.recv(64)
    log = tree.log
    while not serves(port):
        time.sleep(0.01)
    for _ in range(n):
        time.sleep(0.02)
        info = tree.nanny.which_child("nginx").get()
        h = handle(tree, info.pid)
        t0 = time.monotonic()
        os.kill(info.pid, signal.SIGKILL)
        log.wait_for(lambda e, i=info.incarnation: e.context is EventKind.CHILD_STARTED
                     and e.offender == "nginx" and e.incarnation == i + 1, 10)
        while not serves(port):
            if time.monotonic() - t0 > 10:
                raise TimeoutError("nginx does not serve again")
            time.sleep(0.0005)
        out["nginx"].append(time.monotonic() - t0)
        out["wait_nginx"].append(wait(h))

        time.sleep(0.02)
        pid = tree.nanny.which_child("m").get().pid
        h = handle(tree, pid)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        out["python"].append(float(sock.recv(64)) - t0)
        out["wait_python"].append(wait(h))

        time.sleep(0.02)
        info = tree.nanny.which_child("c").get()
        h = handle(tree, info.pid)
        t0 = time.monotonic()
        os.kill(info.pid, signal.SIGKILL)
        e = log.wait_for(lambda e, i=info.incarnation: e.context is EventKind.CHILD_STARTED
                         and e.offender == "c" and e.incarnation == i + 1, 10)
        out["command"].append(e.time - t0)
        out["wait_command"].append(wait(h))
    out["nginx_retries"] = [open(f"{folder}/error.log").read().count("Address already in use")]
finally:
    tree.stop()
    sock.close()
    shutil.rmtree(folder, ignore_errors=True)
print(json.dumps(out))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="a checkout of the code before the change")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args()
    results = alternate(ROUND, args.old, args.rounds, args.n)
    print_table(
        results, ("nginx", "python", "command", "wait_nginx", "wait_python", "wait_command")
    )
    for label in ("before", "after"):
        slow = sum(t > 0.4 for t in results[label]["nginx"])
        retries = sum(results[label]["nginx_retries"])
        total = len(results[label]["nginx"])
        print(f"nginx, {label}: {slow} of {total} restarts over 0.4 s; {retries} bind retries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
