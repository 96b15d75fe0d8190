"""A stand-in for a real worker: takes a job from its queue every second and says so.

    python3 worker.py orders

SIGTERM (what nannytree sends to stop it) ends it at once, as Python's default does.
"""

import os
import sys
import time


def main(queue: str) -> None:
    print(f"{queue}: started, pid {os.getpid()}", flush=True)
    job = 0
    while True:
        time.sleep(1)
        job += 1
        print(f"{queue}: done job {job}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("QUEUE", "jobs"))
