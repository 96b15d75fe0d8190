"""The first thing a Python child runs, and how it runs its target.

Two entries:

* ``run_forked`` -- called in a child just forked from the launcher. It holds
  the launcher's whole state (signal handlers, wakeup fd, sockets, atexit
  callbacks, log handlers) and must shed it before running user code.
* ``python -m actors._launcher._bootstrap <launcher-pid> <settings-fd>`` -- a fresh
  interpreter started by the launcher; the control fd comes in
  ``NANNYTREE_CONTROL_FD``.

Both end with the same exit protocol, always through ``os._exit``: a forked
child must never return into launcher code.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import pickle
import signal
import sys

from . import _in_child, _wire
from ._control import (
    CONTROL_FD_ENV,
    CRASH_SIGNAL,
    MAX_MESSAGE,
    MAX_TRACEBACK,
    MAX_TYPE,
    ChildFailed,
)
from ._title import set_title

TYPE_CHECKING = False  # keep typing (and its imports) out of a fresh child; mypy knows it
if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import FrameType, TracebackType
    from typing import Any, NoReturn

    from ._confine import Confinement
    from ._listeners import ChildSetup

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36

_libc: ctypes.CDLL | None = None
# True while the target (or its unpickling) runs: only then does SIGTERM raise.
_raise_on_term = False
# Where the target is, for an injected exception (actors._launcher._faults): it is
# raised only while the target runs, and asked for before, raised as it begins.
_BEFORE, _RUNNING, _RETURNED = 0, 1, 2
_target_state = _BEFORE
_crash_requested = False


def prctl(option: int, arg: int) -> None:
    """prctl(2) through libc; raises OSError on failure."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if int(_libc.prctl(option, arg, 0, 0, 0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


_EMPTY_SET = None  # a zeroed sigset_t, for unblock_all_signals


def unblock_all_signals() -> None:
    """Set this thread's signal mask to empty (pthread_sigmask without the conversion
    of the old mask into a set of enum members, which costs more than the call)."""
    global _libc, _EMPTY_SET
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _EMPTY_SET is None:
        _EMPTY_SET = ctypes.create_string_buffer(128)
    _libc.pthread_sigmask(2, _EMPTY_SET, None)  # SIG_SETMASK


class _Terminated(SystemExit):
    """The SystemExit raised in a child by the supervisor's SIGTERM."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    first = not _in_child._stop_requested
    _in_child._stop_requested = True
    # Only the first one raises: a second SIGTERM must not cut `finally` short.
    if first and _raise_on_term:
        raise _Terminated(128 + signum)


def _on_crash_signal(signum: int, frame: FrameType | None) -> None:
    global _crash_requested
    if _target_state == _BEFORE:
        _crash_requested = True  # unpickling, importing or a standby: _call_target raises it
        return
    if not _may_raise_in(frame):
        return  # the host sends the signal again until it is answered
    from . import _faults

    if _target_state == _RETURNED:
        _faults.refuse_crash(os.getpid())
        return
    exc = _faults.take_crash(os.getpid())
    if exc is not None:
        raise exc


def _may_raise_in(frame: FrameType | None) -> bool:
    """False where an exception would break the interpreter's state or be swallowed:
    inside an import (importlib's locks and sys.modules, which is where it once
    ended as a KeyError) or a __del__ (printed as "ignored")."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith("<frozen importlib") or code.co_name == "__del__":
            return False
        frame = frame.f_back
    return True


def _tie_to_launcher(launcher_pid: int) -> None:
    # The launcher also calls setpgid for us (no race with a killpg from the host).
    os.setpgid(0, 0)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # The launcher may have died before PDEATHSIG was armed.
    if os.getppid() != launcher_pid:
        os._exit(1)


def _reset_signals() -> None:
    """Dispositions of a fresh CPython; the mask is still blocked by the launcher."""
    signal.set_wakeup_fd(-1)
    fresh: dict[int, Any] = {
        signal.SIGINT: signal.default_int_handler,
        signal.SIGPIPE: signal.SIG_IGN,
        signal.SIGXFSZ: signal.SIG_IGN,
    }
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        wanted = fresh.get(sig, signal.SIG_DFL)
        if signal.getsignal(sig) is not wanted:
            with contextlib.suppress(OSError, ValueError):
                signal.signal(sig, wanted)


def _close_fds_except(*keep: int) -> None:
    top = max(int(name) for name in os.listdir("/proc/self/fd"))
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, top + 1)


def _drop_inherited_logging() -> None:
    logging = sys.modules.get("logging")
    if logging is None:
        return
    loggers = [logging.root]
    for logger in logging.Logger.manager.loggerDict.values():
        if isinstance(logger, logging.Logger):
            loggers.append(logger)
    for logger in loggers:
        # Not close(): their fds were closed with the rest, the numbers may be reused.
        logger.handlers[:] = [h for h in logger.handlers if isinstance(h, logging.NullHandler)]
    handler_list = getattr(logging, "_handlerList", None)
    if isinstance(handler_list, list):
        handler_list.clear()
    atexit.register(logging.shutdown)


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _apply_settings(settings: Mapping[str, Any], control_fd: int) -> None:
    os.set_blocking(control_fd, False)  # a heartbeat must never block the child
    _in_child._control_fd = control_fd
    os.environ.clear()
    os.environ.update(settings["env"])
    if settings["sys_path"]:
        sys.path[:] = settings["sys_path"]
    sys.argv[:] = list(settings["argv"]) or [""]
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(CRASH_SIGNAL, _on_crash_signal)
    os.register_at_fork(after_in_child=_forget_control_fd)


def _forget_control_fd() -> None:
    # A grandchild forked by user code is not this child: it must not report for it.
    fd = _in_child._control_fd
    _in_child._control_fd = None
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _report_error(control_fd: int, exc: BaseException) -> None:
    tb: TracebackType | None = exc.__traceback__
    if tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # hide our own frame, as Python hides its runner
        exc.__traceback__ = tb
    try:
        message = str(exc)
    except Exception:
        message = f"<unprintable {type(exc).__name__}>"
    try:  # here, not at the top: a child that never fails never pays for it
        import traceback
    except ImportError:  # a user's target that cannot read the stdlib: no traceback then
        text = f"{_type_name(exc)}: {message}\n"
    else:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    record = ChildFailed(
        _utf8(_type_name(exc)[:MAX_TYPE]),
        _utf8(_clip(message, MAX_MESSAGE)),
        _utf8(text[-MAX_TRACEBACK:]),
    )
    frame = _wire.encode(record.pack())
    with contextlib.suppress(OSError):
        os.set_blocking(control_fd, True)  # the error report is worth waiting for
        _wire.write_all(control_fd, frame)
    with contextlib.suppress(Exception):
        sys.excepthook(type(exc), exc, tb)


def _utf8(text: str) -> str:
    """Text the wire can encode: a lone surrogate (from bytes decoded with
    surrogateescape, say) is written as its escape rather than losing the report."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _clip(text: str, bound: int) -> str:
    if len(text) <= bound:
        return text
    keep = bound - 64  # room for the note
    return text[:keep] + f"... [{len(text) - keep} characters cut]"


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _run_target(settings: Mapping[str, Any], control_fd: int, go_fd: int | None = None) -> NoReturn:
    """Unpickle and call the target, then exit the way Python would.

    A warm standby (`go_fd`) unpickles first, then waits for the launcher's word.
    """
    global _raise_on_term
    code, die_by = 0, None
    loaded = None
    if go_fd is not None:
        set_title("standby")
        loaded = _load_standby(settings, control_fd, go_fd)
    set_title("child")  # not the launcher's title, which it was forked with
    try:
        _raise_on_term = True
        try:
            code, die_by = _call_target(settings, control_fd, loaded)
        finally:
            _raise_on_term = False
    except _Terminated:
        # The SIGTERM landed outside the target's own frames.
        die_by = signal.SIGTERM
    _finish(code, die_by)


def _load_standby(settings: Mapping[str, Any], control_fd: int, go_fd: int) -> Any:
    """Unpickle (so imports are done), then block until the launcher says go."""
    try:
        loaded = pickle.loads(settings["payload"])
    except BaseException:
        loaded = None  # unpickled again after "go", where the error is reported
    if not os.read(go_fd, 1):
        os._exit(0)  # discarded (or the launcher is gone): never ran, nothing to say
    os.close(go_fd)
    return loaded


def _call_target(
    settings: Mapping[str, Any], control_fd: int, loaded: Any = None
) -> tuple[int, int | None]:
    """(exit code, signal to die by)."""
    global _target_state
    try:
        if _in_child._stop_requested:
            # SIGTERM came while starting up, before it could raise: honour it now.
            raise _Terminated(128 + signal.SIGTERM)
        # Plain pickle: it imports cloudpickle only for what was pickled by value.
        target, args, kwargs = loaded or pickle.loads(settings["payload"])
        _target_state = _RUNNING
        try:
            if _crash_requested:  # asked for before the target began: raised as it does
                from . import _faults

                crash = _faults.take_crash(os.getpid())
                if crash is not None:
                    raise crash
            target(*args, **kwargs)
        finally:
            # One store, before any call: no crash is raised past the target's end.
            _target_state = _RETURNED
    except _Terminated:
        return 0, signal.SIGTERM
    except SystemExit as exc:
        return _exit_code(exc.code), None
    except KeyboardInterrupt as exc:
        import traceback

        # Python prints the traceback, then dies by SIGINT.
        traceback.print_exception(exc)
        return 0, signal.SIGINT
    except BaseException as exc:
        _report_error(control_fd, _with_access_hint(exc))
        return 1, None
    return 0, None


def _with_access_hint(exc: BaseException) -> BaseException:
    """An import that failed because the child's `user` cannot read the interpreter
    nannytree runs in says so (the target runs as that user, in this interpreter)."""
    if not isinstance(exc, ImportError):
        return exc
    stdlib = os.path.dirname(os.__file__)
    blocked = [d for d in (sys.prefix, stdlib) if not os.access(d, os.R_OK | os.X_OK)]
    if not blocked:
        return exc
    hint = ImportError(
        f"{exc}: uid {os.getuid()} (the child's user) cannot read {blocked[0]}, where "
        "nannytree's Python is; a Python target runs as its user in that interpreter: "
        "install Python (or the venv) where that user can read it, or run a command"
    )
    hint.__cause__ = exc
    hint.__traceback__ = exc.__traceback__
    return hint


def _finish(code: int, die_by: int | None) -> NoReturn:
    global _target_state
    _target_state = _RETURNED  # also when it never began: a crash asked for now is refused
    try:
        # After the target, SIGTERM kills at once, as in a plain interpreter.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        threading = sys.modules.get("threading")  # only if the target used threads
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:
            shutdown()  # join non-daemon threads, as interpreter exit does
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()
        if die_by is not None:
            signal.signal(die_by, signal.SIG_DFL)
            os.kill(os.getpid(), die_by)
        os._exit(code)


def run_forked(
    launcher_pid: int,
    control_fd: int,
    settings: Mapping[str, Any],
    stdout_fd: int | None,
    stderr_fd: int | None,
    go_fd: int | None = None,
    setup: ChildSetup | None = None,
    confine: Confinement | None = None,
    said_fd: int = -1,
) -> NoReturn:
    """Entry of a child forked by the launcher, signals still blocked. With `confine`,
    a refused limit is said on `said_fd` ("L<index>:<errno>"), which closes once set."""
    try:
        from . import _listeners  # the launcher's own import: free in a fork

        if confine is not None:  # while a hard limit may still be raised
            refused = confine.limit()
            if refused is not None:
                os.write(said_fd, b"L%d:%d" % refused)
                os._exit(127)
        if setup is not None:  # first: a change of credentials clears PDEATHSIG
            _listeners.become(setup.uid, setup.gid, setup.groups)
        if confine is not None:
            confine.seal()
            os.close(said_fd)
        _tie_to_launcher(launcher_pid)
        _reset_signals()
        if stdout_fd is not None:
            os.dup2(stdout_fd, 1)
        if stderr_fd is not None:
            os.dup2(stderr_fd, 2)
        sockets: list[int] = []
        if setup is not None and setup.fds:
            keep = [control_fd, *([] if go_fd is None else [go_fd])]
            control_fd, *rest = _listeners.place(setup.fds, keep)
            go_fd = rest[0] if rest else None
            sockets = list(range(_listeners.FIRST_FD, _listeners.FIRST_FD + len(setup.fds)))
            env = {**settings["env"], **setup.env(os.getpid())}
            settings = {**settings, "env": env}
        _close_fds_except(control_fd, *([] if go_fd is None else [go_fd]), *sockets)
        atexit._clear()
        _drop_inherited_logging()
        _apply_settings(settings, control_fd)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        _run_target(settings, control_fd, go_fd)
    except BaseException as exc:
        _print_and_exit(exc)


def _print_and_exit(exc: BaseException) -> NoReturn:
    try:
        try:
            import traceback
        except ImportError:  # a user that cannot read the stdlib
            os.write(2, f"{_type_name(exc)}: {exc}\n".encode(errors="replace"))
        else:
            traceback.print_exception(exc)
            sys.stderr.flush()
    finally:
        os._exit(1)


def main(argv: list[str]) -> NoReturn:
    """Entry of a fresh interpreter: ``<launcher-pid> <settings-fd> [uid gid groups
    preload go-fd]``: the user it becomes before anything else (groups comma-separated),
    "cloudpickle" in `preload` when its target needs it (imported first, while the
    interpreter can still read its own files: a venv under /root, which the user may
    not, as a fork of the launcher would have it), and the fd on which a warm standby
    waits for "go" (-1: none)."""
    try:
        control_fd = int(os.environ.pop(CONTROL_FD_ENV))
        launcher_pid, settings_fd = int(argv[0]), int(argv[1])
        go_fd = int(argv[6]) if len(argv) > 6 and int(argv[6]) >= 0 else None
        if len(argv) > 2:  # first: a change of credentials clears PDEATHSIG
            from ._listeners import become

            if argv[5] == "cloudpickle":
                import cloudpickle  # noqa: F401

            groups = [int(g) for g in argv[4].split(",") if g]
            become(int(argv[2]), int(argv[3]), groups)
            # As an exec'd program of that user: its core dumps, its own /proc entries.
            prctl(PR_SET_DUMPABLE, 1)
        _tie_to_launcher(launcher_pid)
        settings = _wire.loads(_read_all(settings_fd))
        os.close(settings_fd)
        # Sockets placed from fd 3 by the launcher (a target with sockets), and their
        # variables, which the settings' env does not have.
        listen = {k: v for k, v in os.environ.items() if k.startswith("LISTEN_")}
        sockets: list[int] = []
        if listen.get("LISTEN_PID") == str(os.getpid()):
            sockets = list(range(3, 3 + int(listen.get("LISTEN_FDS", "0"))))
            settings = {**settings, "env": {**settings["env"], **listen}}
        _close_fds_except(control_fd, *sockets, *([] if go_fd is None else [go_fd]))
        os.set_inheritable(control_fd, False)
        if go_fd is not None:
            os.set_inheritable(go_fd, False)
        _apply_settings(settings, control_fd)
        _run_target(settings, control_fd, go_fd)
    except BaseException as exc:
        _print_and_exit(exc)


if __name__ == "__main__":
    main(sys.argv[1:])
