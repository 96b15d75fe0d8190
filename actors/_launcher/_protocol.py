"""The launcher's protocol: every message, as a named record, documented here.

Three streams, each of `actors._launcher._wire` frames (plain data, never pickle).
A record (`actors._launcher._record`) travels as a tuple: its tag, then its
fields in order. `decode` checks the tag, the number of fields and each field's
type, so a reader gets either a well-formed record or a `WireError`.

Host -> launcher (the host is trusted; frames up to HOST_FRAME bytes):

- `Define(template, settings)`: remember how to start a child (`Template`:
  command or pickled target, env, cwd, output, tee'd streams). Sent once per
  worker and whenever its env, cwd or sys.path change, so a spawn request stays
  small.
- `Forget(template)`: drop a template nobody uses any more (and close the
  listening sockets no other template names).
- `Spawn(req, template, standby, chain)`: start a child from a template (or say
  "go" to the warm standby `standby`); answered by `Spawned` or `SpawnFailed`.
  `chain` (0: none) names a run of starts sent ahead in the supervisor's order
  (docs/scale.md, "A run of starts"): once a spawn of a chain fails, or the
  chain is cancelled, each later spawn of it fails with errno ECANCELED and
  nothing is started.
- `CancelChain(chain)`: the supervisor does not want the rest of that run.
- `Prepare(standby, template)`: fork a warm standby; answered by `Prepared`.
- `Discard(standby)`: kill a standby that will not be used.
- `Arm(pid, budget, any_exit, min_uptime, normal_codes, standby)`: the decision
  core said ahead of time that this child's next exit (any, or an abnormal one,
  after `min_uptime` s) means "restart it alone, at once": the launcher respawns
  it as soon as it reaps it (from its worker's own `standby`, else from its
  template), if its supervisor's budget allows, and
  says so in `Exited.respawned` (then `Respawned`). The new child is not armed: the host
  accounts for the exit first, then arms the new one.
- `Disarm(pid)`: the host is about to stop or pause this child: leave its exit
  to the host.
- `Grant(group, granted)`: the group (a supervisor) may have done `granted`
  autonomous restarts in all, counted from its first; the host raises it as its
  intensity allows.
- `Follow(pid, main_pid)`: the child said MAINPID= (sd_notify): when `pid`
  exits, `main_pid` (a live process of its tree, by then re-parented to the
  launcher) is its main process; the launcher says `Forked` instead of `Exited`.

Launcher -> host (plain data too; frames up to REPORT_FRAME bytes):

- `Hello(pid, error)`: the launcher is up (`error` None) or could not start.
- `Spawned(req, pid)`, `SpawnFailed(req, errno, message)`.
- `Prepared(standby, pid)`: the standby is forked (`pid` 0: it could not be).
- `StandbyDied(standby)`: a standby ended before it was used.
- `Ready(pid)`: a Python child called `actors.child.ready()`.
- `Output(pid, stream, data)`: what a child wrote to a captured or tee'd stream.
- `Heartbeat(pid)`: a Python child's heartbeat; at most one per HEARTBEAT_EVERY s.
- `ChannelClosed(pid, why)`: a child wrote something that is not the protocol
  on its control pipe; the launcher stopped listening to it.
- `Exited(pid, status, uptime, error, respawned)`: a child was reaped. `status`
  is -N for "killed by signal N", else its exit code; `uptime` the seconds from
  its spawn to its reaping, by the launcher's clock; `error` what a Python
  target raised, if it said so; `respawned` RESPAWNING (-1) when a child is
  being started in its place by an `Arm` (its pid follows in `Respawned`), else
  0; `detached` the processes a command's first
  process left running when it exited 0 without a `pid_file` (it daemonized
  itself; the launcher kills them, the host says what to set); `group_wait` the
  seconds the report was held until no process of the child's group (nor of
  `detached`) was left, `lingering` how many such groups or processes were still
  there when that wait ran out after 1 s (docs/launcher.md, "A restart waits for
  the old group").
- `Respawned(pid, new_pid)`: the child started in place of `pid` (announced by
  its `Exited`), sent before any report about it; `new_pid` 0: it could not be
  started (the host restarts the child the ordinary way). The exit is reported
  first so that the host hears of it without waiting for the spawn.
- `Forked(pid, main_pid, pgid)`: the child's first process exited 0 and
  `main_pid` (named by its pid file, or by MAINPID=) is its main process from
  now on: its exit is the child's exit, its group `pgid` is what a stop signals.

Child -> launcher, on the child's control pipe (UNTRUSTED: the child may run
anything; frames up to CHILD_FRAME bytes, every string bounded). A Python child
writes them, so they live in the lean `actors._launcher._control`:

- `ChildReady()`: `actors.child.ready()` was called.
- `ChildFailed(type, message, traceback)`: the target raised.
- `ChildHeartbeat()`: `actors.child.heartbeat()` was called (a watchdog's beat).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ._control import MAX_MESSAGE, MAX_TRACEBACK, MAX_TYPE, ChildFailed, ChildHeartbeat, ChildReady
from ._record import Record
from ._wire import WireError

HOST_FRAME = 1 << 30  # a cloudpickled target can be large; the host is trusted
REPORT_FRAME = 1 << 20  # the launcher's reports: output chunks and bounded texts
OUTPUT_CHUNK = 64 * 1024  # bytes of captured output per report
HEARTBEAT_EVERY = 0.02  # seconds: a child that beats faster is reported this often

_NONE = type(None)

_REGISTRY: dict[str, type[Record]] = {}


def _record(tag: str, *types: Any) -> Any:
    def wrap(cls: type[Record]) -> type[Record]:
        cls.TAG = tag
        cls.TYPES = types
        cls.FIELDS = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
        _REGISTRY[tag] = cls
        return cls

    return wrap


def decode(value: Any, allowed: frozenset[str] | None = None) -> Record:
    """The record a received value stands for; WireError if it is not one we accept."""
    if type(value) is not tuple or not value or type(value[0]) is not str:
        raise WireError("expected a record: (tag, fields...)")
    tag = value[0]
    cls = _REGISTRY.get(tag)
    if cls is None or (allowed is not None and tag not in allowed):
        raise WireError(f"unexpected record {tag[:40]!r}")
    return _build(cls, value[1:])


def _build(cls: type[Record], values: tuple[Any, ...]) -> Record:
    types = cls.TYPES
    if len(values) != len(types):
        raise WireError(f"{cls.TAG}: expected {len(types)} fields, got {len(values)}")
    return cls(*(_field(cls.TAG, v, t) for v, t in zip(values, types, strict=True)))


def _field(tag: str, value: Any, expected: Any) -> Any:
    allowed = expected if isinstance(expected, tuple) else (expected,)
    for kind in allowed:
        if isinstance(kind, type) and issubclass(kind, Record):
            if type(value) is tuple:
                return _build(kind, value)
        elif type(value) is kind:  # exact: a bool is not an int here
            return value
    raise WireError(f"{tag}: a field of type {type(value).__name__} is not allowed")


# -- host -> launcher -----------------------------------------------------------------


@_record(
    "template",
    (list, _NONE),
    (bytes, _NONE),
    dict,
    str,
    list,
    list,
    bool,
    (str, _NONE),
    (str, _NONE),
    (str, _NONE),
    float,
    float,
    (str, _NONE),
    list,
    int,
    int,
    bool,
    list,
    int,
    int,
    list,
    list,
    bool,
)
@dataclass(frozen=True)
class Template(Record):
    """How to start one child; every path absolute, resolved by the host."""

    command: list[str] | None
    payload: bytes | None
    env: dict[str, str]
    cwd: str
    sys_path: list[str]
    argv: list[str]
    fresh: bool
    stdout: str | None  # None: the launcher's; "capture"; or a file to append to
    stderr: str | None
    # A command that forks itself (systemd's Type=forking): once its first process
    # exits 0, the live process of its tree this file names is its main process,
    # looked for until `pid_timeout` s after the spawn.
    pid_file: str | None = None
    pid_timeout: float = 0.0
    # sd_notify: how long a first process that exited 0 leaving a process behind is
    # given for its MAINPID= to arrive (sent by the host, which reads the socket).
    follow_grace: float = 0.0
    # A command that must find its own pid in this environment variable (systemd's
    # WATCHDOG_PID): forked and exec'd, not posix_spawn'd, to know its pid first.
    pid_env: str | None = None
    # Streams (1 stdout, 2 stderr) that still go to their destination (the launcher's
    # own, or the file) but through a pipe the launcher reads: it writes each byte on
    # and reports it as `Output`, as for "capture" (docs/launcher.md, "Tee'd output").
    tee: list[int] = field(default_factory=list)
    # A child's file kept by the launcher (docs/logs.md): rotated past this many bytes
    # (0: never) into this many older files, each line stamped with its UTC time.
    log_max_bytes: int = 0
    log_backups: int = 0
    log_timestamps: bool = False
    # Listening sockets, [name, listen, backlog] each, bound once by the launcher and
    # passed on every start from fd 3, systemd's way (`_listeners`; docs/sockets.md).
    sockets: list[list[Any]] = field(default_factory=list)
    # The user the child runs as (-1: the launcher's): uid, gid, supplementary groups.
    uid: int = -1
    gid: int = -1
    groups: list[int] = field(default_factory=list)
    # Set in the child before its exec or target (`_confine`): [name, soft, hard] each
    # (-1: infinity), as setrlimit takes them, and PR_SET_NO_NEW_PRIVS.
    limits: list[list[Any]] = field(default_factory=list)
    no_new_privs: bool = False


@_record("define", int, Template)
@dataclass(frozen=True)
class Define(Record):
    template: int
    settings: Template


@_record("forget", int)
@dataclass(frozen=True)
class Forget(Record):
    template: int


@_record("spawn", int, int, (int, _NONE), int)
@dataclass(frozen=True)
class Spawn(Record):
    req: int
    template: int
    standby: int | None
    chain: int = 0


@_record("cancel_chain", int)
@dataclass(frozen=True)
class CancelChain(Record):
    chain: int


@_record("prepare", int, int)
@dataclass(frozen=True)
class Prepare(Record):
    standby: int
    template: int


@_record("discard", int)
@dataclass(frozen=True)
class Discard(Record):
    standby: int


@_record("arm", int, int, bool, float, list, int)
@dataclass(frozen=True)
class Arm(Record):
    pid: int
    budget: int  # its supervisor's restart budget (a Grant's), not a process group
    any_exit: bool  # False: only an abnormal exit
    min_uptime: float
    normal_codes: list[int]
    standby: int  # its worker's own warm standby, for the restart (0: none)


@_record("disarm", int)
@dataclass(frozen=True)
class Disarm(Record):
    pid: int


@_record("grant", int, int)
@dataclass(frozen=True)
class Grant(Record):
    budget: int  # one per supervisor
    granted: int


@_record("follow", int, int)
@dataclass(frozen=True)
class Follow(Record):
    pid: int
    main_pid: int


@_record("reopen")
@dataclass(frozen=True)
class Reopen(Record):
    """Open every child's file anew by its path: an external rotation moved it."""


HOST_RECORDS = frozenset(
    {
        "define",
        "forget",
        "spawn",
        "cancel_chain",
        "prepare",
        "discard",
        "arm",
        "disarm",
        "grant",
        "follow",
        "reopen",
    }
)

# -- launcher -> host ------------------------------------------------------------------


@_record("hello", int, (str, _NONE))
@dataclass(frozen=True)
class Hello(Record):
    pid: int
    error: str | None


@_record("spawned", int, int)
@dataclass(frozen=True)
class Spawned(Record):
    req: int
    pid: int


@_record("spawn_failed", int, (int, _NONE), str)
@dataclass(frozen=True)
class SpawnFailed(Record):
    req: int
    errno: int | None
    message: str


@_record("prepared", int, int)
@dataclass(frozen=True)
class Prepared(Record):
    standby: int
    pid: int  # 0: no standby could be forked


@_record("standby_died", int)
@dataclass(frozen=True)
class StandbyDied(Record):
    standby: int


@_record("ready", int)
@dataclass(frozen=True)
class Ready(Record):
    pid: int


@_record("output", int, int, bytes)
@dataclass(frozen=True)
class Output(Record):
    pid: int
    stream: int  # 1 stdout, 2 stderr
    data: bytes


@_record("heartbeat", int)
@dataclass(frozen=True)
class Heartbeat(Record):
    pid: int


@_record("channel_closed", int, str)
@dataclass(frozen=True)
class ChannelClosed(Record):
    pid: int
    why: str


@_record("failure", str, str, str)
@dataclass(frozen=True)
class Failure(Record):
    """What a Python target raised: its type, message and traceback, bounded."""

    type: str
    message: str
    traceback: str


@_record("exited", int, int, float, (Failure, _NONE), int, list, float, int)
@dataclass(frozen=True)
class Exited(Record):
    pid: int
    status: int  # >= 0 exit code, -N killed by signal N
    uptime: float
    error: Failure | None
    respawned: int = 0  # RESPAWNING: one is being started in its place (Respawned)
    # A command's first process exited 0 but left these processes of its tree
    # running: it daemonized itself, without a pid_file (they are killed).
    detached: list[int] = field(default_factory=list)
    # Seconds the report was held until the child's process group was empty, and how
    # many groups or processes of it were still there when that wait ran out (0: none).
    group_wait: float = 0.0
    lingering: int = 0


RESPAWNING = -1


@_record("respawned", int, int)
@dataclass(frozen=True)
class Respawned(Record):
    pid: int
    new_pid: int  # 0: it could not be started


@_record("forked", int, int, int)
@dataclass(frozen=True)
class Forked(Record):
    pid: int
    main_pid: int
    pgid: int


REPORT_RECORDS = frozenset(
    {
        "hello",
        "spawned",
        "spawn_failed",
        "prepared",
        "standby_died",
        "ready",
        "output",
        "channel_closed",
        "exited",
        "respawned",
        "forked",
        "heartbeat",
    }
)

# -- child -> launcher (untrusted): the records are written in `_control` -------------

_CHILD = (ChildReady, ChildFailed, ChildHeartbeat)
_REGISTRY.update((cls.TAG, cls) for cls in _CHILD)
CHILD_RECORDS = frozenset(cls.TAG for cls in _CHILD)


def child_failure(record: ChildFailed) -> Failure:
    """A child's error report, checked: WireError if a text is over its bound."""
    for text, bound, name in (
        (record.type, MAX_TYPE, "type"),
        (record.message, MAX_MESSAGE, "message"),
        (record.traceback, MAX_TRACEBACK, "traceback"),
    ):
        if len(text) > bound:
            raise WireError(f"an error {name} of {len(text)} characters, over {bound}")
    return Failure(record.type, record.message, record.traceback)
