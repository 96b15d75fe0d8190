"""Fault injection: make a running Python child raise a given exception.

The host pickles the exception into `crash-<pid>` in a private directory (0700,
this user's) and sends the child CRASH_SIGNAL until the child answers. The child
(the bootstrap's handler, or the bootstrap itself just before the target) raises
it only once its target runs, never while it unpickles or imports, and answers by
renaming the file, the one step that both takes the exception and tells the host:

* `crash-<pid>.raised`: it raises the exception now, in its target;
* `crash-<pid>.late`: its target has returned, there is nothing to raise in;
* `crash-<pid>.unloadable`: it cannot unpickle the exception (the reason is on
  its stderr).

A rename is atomic, so the child taking the file and the host withdrawing it at
its timeout (an unlink) cannot both succeed: whichever loses knows it, and an
exception is never raised after crash() gave up, nor taken and then lost. The
child only renames what the host wrote, and the host only looks at names: the
host unpickles nothing a child wrote.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import time

from ._control import CRASH_SIGNAL
from ._runtime_dir import runtime_dir

RAISED, LATE, UNLOADABLE = ".raised", ".late", ".unloadable"
_ANSWERS = (RAISED, LATE, UNLOADABLE)
_RESEND = 0.05  # s: a child that could not raise yet (mid-import) is asked again


def inject_crash(pid: int, exception: BaseException, timeout: float = 5.0) -> None:
    """Make the Python child `pid` raise `exception` in its target.

    Returns once the child has raised it in its target (a child still starting
    raises it as soon as its target begins). ProcessLookupError, naming the pid, if
    the child is gone or its target has already returned; TimeoutError if it has
    not raised it within `timeout` s (the exception is then withdrawn: it will
    not be raised later). A process that does not catch CRASH_SIGNAL (yet) is
    never sent it: the signal's default action would kill it.
    """
    import cloudpickle  # here: the child loads this module too, and needs no cloudpickle

    data = cloudpickle.dumps(exception)
    path = str(runtime_dir() / f"crash-{pid}")
    _clear_answers(path)  # stale, from a process that had this pid
    partial = f"{path}.{os.getpid()}.tmp"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.rename(partial, path)  # the child never reads half a file
    answer: str | None
    try:
        try:
            answer = _await_answer(pid, path, timeout)
        except BaseException:
            try:
                os.unlink(path)  # withdrawn: the child can no longer take it
            except FileNotFoundError:
                answer = _answer(path)  # the child took it meanwhile: its answer stands
                if answer is None:
                    raise
            else:
                raise
    finally:
        _clear_answers(path)
    if answer == LATE:
        raise ProcessLookupError(
            f"pid {pid}: its target has already returned; the exception was not raised"
        )
    if answer == UNLOADABLE:
        raise ProcessLookupError(
            f"pid {pid} cannot unpickle the injected exception (its stderr says why); "
            "it was not raised"
        )


def _await_answer(pid: int, path: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    next_signal = 0.0
    while (answer := _answer(path)) is None:
        now = time.monotonic()
        state = _state(pid)
        if state is None:
            if (answer := _answer(path)) is not None:
                return answer  # it answered, then exited
            raise ProcessLookupError(f"pid {pid} has exited: the exception was not raised")
        stopped, catches = state
        if now > deadline:
            why = (
                " (it does not catch the crash signal: not a Python child?)"
                if not catches
                else " (it is stopped: resume it first)"
                if stopped
                else ""
            )
            raise TimeoutError(
                f"pid {pid} did not raise the injected exception within {timeout}s{why}"
            )
        # Not before it catches the signal: the default action would kill it.
        if catches and now >= next_signal:
            with contextlib.suppress(ProcessLookupError):  # gone: seen on the next turn
                os.kill(pid, CRASH_SIGNAL)
            next_signal = now + _RESEND
        time.sleep(0.002)
    return answer


def _clear_answers(path: str) -> None:
    for answer in _ANSWERS:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path + answer)


def _answer(path: str) -> str | None:
    for answer in _ANSWERS:
        if os.path.exists(path + answer):
            return answer
    return None


def _state(pid: int) -> tuple[bool, bool] | None:
    """None if gone (or a zombie), else (stopped, catches CRASH_SIGNAL), from /proc."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    letter, caught = b"", 0
    for line in status.splitlines():
        if line.startswith(b"State:"):
            letter = line.split()[1]
        elif line.startswith(b"SigCgt:"):
            caught = int(line.split()[1], 16)
    if letter in (b"Z", b"X"):
        return None
    return letter in (b"T", b"t"), bool(caught >> (CRASH_SIGNAL - 1) & 1)


# -- in the child ------------------------------------------------------------------------


def _crash_file(pid: int) -> str | None:
    """The file of an exception injected into `pid`, None if there is no directory
    (the child never makes it: the host has, or has injected nothing)."""
    directory = runtime_dir(create=False)
    return None if directory is None else os.path.join(directory, f"crash-{pid}")


def take_crash(pid: int) -> BaseException | None:
    """In the child whose target runs: the exception injected for it, taken (the host
    learns it is raised), or None if there is none or the host withdrew it."""
    # The host sends the signal again until it is answered: one handled in the middle
    # of this would take the exception first and raise it in here, where it reads as
    # unloadable and is lost. Held until the answer is given (then it finds none).
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {CRASH_SIGNAL})
    try:
        return _take(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _take(pid: int) -> BaseException | None:
    try:
        path = _crash_file(pid)
        if path is None:
            return None
        with open(path, "rb") as f:
            data = f.read()
    except OSError:  # none, or the directory is not private (then the host has none either)
        return None
    try:
        # Plain pickle: it imports cloudpickle only for what was pickled by value.
        exc = pickle.loads(data)
        if not isinstance(exc, BaseException):
            raise TypeError(f"not an exception: {type(exc).__name__}")
    except Exception as error:
        with contextlib.suppress(OSError):
            os.write(2, f"nannytree: cannot raise the injected exception: {error!r}\n".encode())
        _answer_with(path, UNLOADABLE)
        return None
    return exc if _answer_with(path, RAISED) else None


def refuse_crash(pid: int) -> None:
    """In the child whose target has returned: tell the host, if it asks."""
    with contextlib.suppress(OSError):
        path = _crash_file(pid)
        if path is not None:
            _answer_with(path, LATE)


def _answer_with(path: str, answer: str) -> bool:
    try:
        os.rename(path, path + answer)
    except OSError:
        return False  # withdrawn by the host, or never there
    return True
