"""Testing with nannytree: scripted children, fault injection, event probes, and
FakeEngine, an in-process engine for remote subtrees.

The pytest plugin (`nanny_tree` fixture) is built from these; they work
without pytest too:

    with TreeHarness(spec) as tree:
        tree.kill("worker")
        tree.wait_for(EventKind.CHILD_STARTED, "worker", incarnation=2)
        tree.wait_ready("web")            # running, and its liveness probe not failing

Every wait ends at once (WaitFailed) when it cannot succeed any more, naming the
last exit and its stderr tail; `strict=True` fails on exits the test did not cause.

The package sits beside the command, over the front ends: it may import them and
everything below (the operations layer for lookup, readiness and restarts), and
nothing imports it but tests and the plugin's first name, `actors.pytest_plugin`.
"""

from __future__ import annotations

import importlib
import signal
import socket
import sys
import time

TYPE_CHECKING = False  # the plugin imports this package in every pytest session

if TYPE_CHECKING:
    from .._launcher._faults import inject_crash as inject_crash
    from .._process._fake import FakeChild as FakeChild
    from .._process._fake import FakeSpawner as FakeSpawner
    from ._deadlines import Deadline as Deadline
    from ._deadlines import eventually as eventually
    from ._deadlines import within as within
    from ._events import UnexpectedExit as UnexpectedExit
    from ._events import WaitFailed as WaitFailed
    from ._fake_engine import FakeEngine as FakeEngine
    from ._fake_engine import FakeHandle as FakeHandle
    from ._harness import TreeHarness as TreeHarness
    from ._harness import wait_gone as wait_gone
    from ._proxy import FaultProxy as FaultProxy
    from ._proxy import fault_proxy as fault_proxy
    from ._resources import SmallDisk as SmallDisk
    from ._resources import small_disk as small_disk
    from ._scripted import scripted as scripted
    from ._waits import EventProbe as EventProbe

# Imported on first use: the pytest plugin (and a child unpickling testing.Crash)
# imports this package, and must not pay for the harness, pykka and the tree.
_HOMES = {
    "inject_crash": ".._launcher._faults",
    "FakeChild": ".._process._fake",
    "FakeSpawner": ".._process._fake",
    "Deadline": "._deadlines",
    "eventually": "._deadlines",
    "within": "._deadlines",
    "UnexpectedExit": "._events",
    "WaitFailed": "._events",
    "FakeEngine": "._fake_engine",
    "FakeHandle": "._fake_engine",
    "TreeHarness": "._harness",
    "wait_gone": "._harness",
    "FaultProxy": "._proxy",
    "fault_proxy": "._proxy",
    "SmallDisk": "._resources",
    "small_disk": "._resources",
    "scripted": "._scripted",
    "EventProbe": "._waits",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'actors.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


class Crash(BaseException):
    """An exception for `crash()` that a child's `except Exception` does not swallow
    (as KeyboardInterrupt and SystemExit are not): the child's target ends with it."""


# -- scripted children (OTP's supervisor_1, for processes) ---------------------


def run_forever() -> None:
    """Run until stopped."""
    while True:
        time.sleep(3600)


def exit_with(code: int, after: float = 0.0) -> None:
    """Exit with `code`, after `after` seconds."""
    time.sleep(after)
    sys.exit(code)


def crash_after(seconds: float, code: int = 1) -> None:
    """Run `seconds`, then exit abnormally with `code`."""
    exit_with(code, seconds)


def raise_after(seconds: float, exception: BaseException) -> None:
    """Run `seconds`, then raise `exception`."""
    time.sleep(seconds)
    raise exception


def ignore_sigterm() -> None:
    """Ignore SIGTERM: only SIGKILL (after the spec's shutdown) stops it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from .. import child

    child.ready()
    run_forever()


def hang_on_start() -> None:
    """Never become ready (use with ready="notify"): its start times out."""
    run_forever()


def ready_after(seconds: float) -> None:
    """Become ready after `seconds` (use with ready="notify"), then run."""
    from .. import child

    time.sleep(seconds)
    child.ready()
    run_forever()


# -- ports ------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing is bound to now (the kernel's pick).

    It races: the port is free when this returns, not when the child binds it, and
    another process (a parallel test worker) may take it in between. The child
    then fails to listen, and a TCP or HTTP readiness probe says whose the port is
    instead of passing on someone else's service.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
