"""The two workers of pool.toml: a web server that takes half a second to warm up,
and a job runner that is ready in 0.2 s and then crashes at random, 0.5 s into its
run on average (an exponential lifetime: a crash rate of 2 a second)."""

import random
import sys
import time

from actors import child


def web() -> None:
    time.sleep(0.5)  # warming its cache
    child.ready()
    while True:
        time.sleep(3600)


def jobs() -> None:
    time.sleep(0.2)
    child.ready()
    # Fresh entropy: Python children fork from one launcher, which would share a seed.
    time.sleep(random.SystemRandom().expovariate(1 / 0.5))
    sys.exit(1)
