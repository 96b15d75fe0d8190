"""What finding a listening port's sockets costs a TCP/HTTP readiness check, with the
host full of TIME_WAIT sockets (as a busy CI host is): the kernel's sock_diag dump of
LISTEN sockets against reading /proc/net/tcp, alternating, in one session.

    python -m tests.benchmarks.readiness_sockets [--time-wait 20000] [--rounds 50]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time

from actors._launcher import _procfs, _sock_diag
from tests.support.time_wait import count_time_wait, make_time_wait


def _p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-wait", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    make_time_wait(args.time_wait)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    ways = {
        "sock_diag": _sock_diag.listening_inodes,
        "/proc/net/tcp": _procfs.listening_inodes_from_proc,
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, way in ways.items():
            began = time.perf_counter()
            assert way(port), name
            times[name].append((time.perf_counter() - began) * 1000)
    print(f"{count_time_wait()} sockets in TIME_WAIT, {args.rounds} checks each, alternating")
    for name, values in times.items():
        print(
            f"  {name:14} median {statistics.median(values):8.3f} ms   p95 {_p95(values):8.3f} ms"
        )
    ratio = statistics.median(times["/proc/net/tcp"]) / statistics.median(times["sock_diag"])
    print(f"  /proc/net/tcp over sock_diag: {ratio:.0f}x")
    listener.close()


if __name__ == "__main__":
    main()
