"""RayEngine: remote subtrees on a Ray cluster. All of nannytree's Ray code is here.

Install with `pip install "nannytree[ray]"`. Each remote subtree incarnation is
one Ray actor, NannyHost, that runs a complete local tree (actors._remote._host.RemoteHost):
`max_restarts=0` and `max_task_retries=0` (every restart is the parent's decision,
charged to its intensity), `num_cpus=0`, non-detached (it fate-shares with its
owner: the parent tree's process), pinned to the chosen node by
NodeAffinitySchedulingStrategy(soft=False), with concurrency groups so the
parked wait_exit never blocks a control call. Its launcher double-forks into its
own session (actors._process._detach): Ray SIGKILLs an actor's direct children.

The spec travels pickled by value for modules that are not installed
(actors._remote._ship), so targets beside the driver's script load on any node.
The far side fences itself (docs/multihost.md section 5) on its lease, its
raylet's death, or Ray declaring its node dead (asked of the GCS every watchdog
period); once every child stopped it acknowledges the fence in Ray's KV store
(`RayEngine.fence_confirmed`). A new incarnation clears what an older one of
the same subtree left on its node before it starts (actors._remote._marks).

Death reports map as docs/multihost.md section 3 says: ActorUnavailableError ->
"unreachable"; ActorDiedError -> NODE_DOWN when the node is no longer alive (else
by its message), REMOTE_CRASH otherwise. Security: a Ray cluster runs pickled code from
any client; keep it on a trusted network.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import ray
from ray.exceptions import (
    ActorDiedError,
    ActorUnavailableError,
    GetTimeoutError,
    RayActorError,
    RayTaskError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from supervision import ExitKind, ExitReason, NannyError, NodeInfo, SupervisorSpec

from ._process import _detach
from ._remote import _marks, _ship
from ._remote._host import RemoteHost
from ._remote._port import (
    Outcome,
    RemoteApiError,
    RemoteDead,
    RemoteStartError,
    RemoteUnreachable,
)
from ._remote._ship import unshippable_targets
from ._tree import Tree

__all__ = ["NannyHost", "RayAuthError", "RayEngine", "RayHandle", "unshippable_targets"]

log = logging.getLogger("nannytree")

DEFAULT_LEASE = 30.0
CONTROL_CALLS = (
    "api",
    "shutdown",
    "renew_lease",
    "ping",
    "liveness",
    "wait_events",
)
# Seconds a new incarnation waits for an older one of its subtree to leave its node.
CLEAR_TIMEOUT = 10.0
NODE_CHECK_TIMEOUT = 0.5  # one question to the GCS about our own node
ACK_TIMEOUT = 1.0  # to say a fence is complete, in Ray's KV store
KV_NAMESPACE = "nannytree"
# RayEngine's health-check settings -> Ray's _system_config keys (milliseconds).
HEALTH_CHECK_KEYS = {
    "health_check_initial_delay": "health_check_initial_delay_ms",
    "health_check_period": "health_check_period_ms",
    "health_check_timeout": "health_check_timeout_ms",
    "health_check_failure_threshold": "health_check_failure_threshold",
}


class RayAuthError(ConnectionError):
    """The Ray cluster refused this process's connection for its authentication token
    (Ray's InvalidAuthToken): none was given, or not the cluster's."""

    def __init__(self, address: str | None, log_file: str | None) -> None:
        given = os.environ.get("RAY_AUTH_MODE") == "token"
        what = (
            "refused the authentication token given"
            if given
            else "requires an authentication token"
        )
        where = f"; Ray's own lines are in {log_file}" if log_file else ""
        super().__init__(
            f"the Ray cluster at {address or 'the default address'} {what} "
            "(Ray: InvalidAuthToken): "
            "set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or a file named "
            f"by RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token) before starting{where}"
        )


def default_log_file() -> str:
    """Where a RayEngine sends Ray's output unless told: a file per process in the
    temporary folder (`nannytree run` names its own, beside its control socket)."""
    folder = os.path.join(tempfile.gettempdir(), f"nannytree-ray-{os.getuid()}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"driver-{os.getpid()}.log")


@contextlib.contextmanager
def _stderr_to(path: str | None) -> Any:
    """File descriptor 2 into `path` (appended) meanwhile: what Ray's C++ client writes
    while it connects (a refused token is one warning a second for 20 s) is Ray's
    log, not the terminal's. Nothing when `path` is None."""
    if path is None:
        yield
        return
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    saved = os.dup(2)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.dup2(fd, 2)
        finally:
            os.close(fd)
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _refused_for_auth(error: BaseException, log_file: str | None, since: int) -> bool:
    """Whether a failed connection was Ray refusing the token: its message, or the lines
    its client wrote into `log_file` from offset `since`."""
    marks = ("InvalidAuthToken", "Unauthenticated", "AuthenticationError")
    if any(m in f"{type(error).__name__} {error}" for m in marks):
        return True
    if log_file is None:
        return False
    try:
        with open(log_file, "rb") as f:
            f.seek(since)
            tail = f.read(1 << 20)
    except OSError:
        return False
    return any(m.encode() in tail for m in marks)


def _fence_key(token: str) -> bytes:
    return f"fenced:{token}".encode()


def _node_alive(node_id: str, timeout: float) -> bool | None:
    """Whether the GCS holds `node_id` alive; None when it cannot be asked."""
    try:
        from ray._raylet import NodeID

        gcs: Any = getattr(ray._private.worker.global_worker, "gcs_client", None)
        return bool(gcs.check_alive([NodeID.from_hex(node_id)], timeout=timeout)[0])
    except Exception:
        return None


@ray.remote(  # type: ignore[call-overload]
    max_restarts=0,
    max_task_retries=0,
    num_cpus=0,
    # control: API calls, the lease, the liveness check and the event long poll.
    concurrency_groups={"monitor": 1, "control": 6},
)
class NannyHost:
    """One remote subtree incarnation: a RemoteHost in its own Ray worker process."""

    def __init__(
        self,
        payload: bytes,
        incarnation: int,
        lease_timeout: float | None,
        detach: bool,
        subtree: str,
        token: str,
    ) -> None:
        _detach.enable(detach)
        self.payload = payload
        self.incarnation = incarnation
        self.lease_timeout = lease_timeout
        self.mark = _marks.Mark(subtree, token, os.getpid())
        # The launcher, its guardian and every child inherit it (actors/_remote/_marks.py).
        os.environ[_marks.MARK] = self.mark.value()
        self.host: RemoteHost | None = None

    @ray.method(concurrency_group="control")
    def start(self) -> int:
        # Loaded here, not in __init__: a target that does not load is a start failure
        # with its own message.
        spec = _marks.marked_spec(_ship.loads(self.payload), self.mark)
        left = _marks.clear_older(self.mark, CLEAR_TIMEOUT)
        if left:
            raise RuntimeError(
                f"an older incarnation of {spec.id!r} still runs on this node "
                f"(pids {left}) after {CLEAR_TIMEOUT}s"
            )
        node = ray.get_runtime_context().get_node_id()
        self.host = RemoteHost(
            spec,
            self.incarnation,
            start_tree=Tree.start,
            lease_timeout=self.lease_timeout,
            watch_parent=True,
            on_fenced=self._fenced,
            exit_fast=True,
            node_dead=lambda: _node_alive(node, NODE_CHECK_TIMEOUT) is False,
        )
        try:
            return self.host.start()
        except NannyError as e:  # nannytree's errors do not unpickle as themselves
            raise RemoteApiError.wrap(e) from None

    @ray.method(concurrency_group="monitor")
    def wait_exit(self) -> ExitReason | None:
        assert self.host is not None
        return self.host.wait_exit()

    @ray.method(concurrency_group="control")
    def call(self, method: str, *args: Any) -> Any:
        if method not in CONTROL_CALLS:
            raise ValueError(f"NannyHost has no control call {method!r}")
        assert self.host is not None
        return getattr(self.host, method)(*args)

    def _fenced(self) -> None:
        # Every child stopped in time: say so, so the parent need not wait out the
        # lease. Then the incarnation is over: its process's (or its node's) death is
        # what the parent hears, never a give-up; the launcher kills what is left.
        if self.host is not None and self.host.fence_complete:
            from ray.experimental.internal_kv import _internal_kv_put

            key, why = _fence_key(self.mark.token), self.host.fenced.encode()
            said = threading.Thread(
                target=lambda: _internal_kv_put(key, why, namespace=KV_NAMESPACE), daemon=True
            )
            said.start()
            said.join(ACK_TIMEOUT)  # a GCS out of reach: the parent waits out the lease
        os._exit(70)

    def __ray_shutdown__(self) -> None:
        # Ray's graceful termination: the same orderly stop.
        if self.host is not None:
            self.host.shutdown()


@dataclass
class RayHandle:
    """One started remote subtree incarnation, as `RayEngine.spawn` returns it: its
    Ray actor, the node it runs on, its incarnation number, its name, and the token
    of its fence."""

    actor: Any
    node: str
    incarnation: int
    name: str
    token: str = ""


class RayEngine:
    """The engine port on Ray. `address`: "auto", "ray://host:10001", "HOST:PORT", or
    None (a Ray started for this process).

    Ray is initialised on first use unless it already is (then `address`,
    `init_kwargs`, the health check and most of `log_file` do not apply).

    Detection and fencing (docs/multihost.md sections 3-5), seconds, None = off:

    - `lease_timeout` (default 30): a remote subtree stops its children when its
      parent has not renewed its lease for three quarters of it, and the parent
      restarts a subtree of a lost node elsewhere only once the lease has run out
      (or the far side confirmed its fence). A shorter lease detects a lost node
      sooner; a lost node's subtree waits up to the whole lease.
    - `unreachable_timeout` (default None: Ray's verdict): declare node_down after
      a subtree was unreachable that long, as Erlang's tick timeout would.
    - `liveness_timeout` (default None): ask each remote supervisor that often to
      answer within that time; one that does not (a deadlock, a starved GIL: what
      Ray cannot see) is killed and ends `remote_unresponsive`.
    - Ray's own node health check, only when this engine starts Ray (`address`
      None): `health_check_period` (Ray's default 3 s), `health_check_timeout`
      (10 s), `health_check_failure_threshold` (5 misses),
      `health_check_initial_delay` (5 s); Ray declares a silent node dead after
      about threshold x (period + timeout): 65 s by default. A cluster's own is
      set where its head starts: `ray start --head --system-config='{...}'`.

    Operating it: `log_file` is where Ray's driver-side log lines, the error
    messages it prints (a node marked dead, a raylet's state dump...), the workers'
    forwarded output and what Ray's client writes while it connects go, instead of
    the terminal: by default a file per process in the temporary folder
    (`default_log_file()`, `engine.log_file`); False keeps them on the terminal.
    A cluster that refuses the connection for its token raises RayAuthError, which
    says how to give one. `runtime_env` (a Ray runtime environment) is
    given to every remote subtree's actor, for what shipping by value cannot
    carry (data files, packages not installed on every node). `detach=False` is
    for tests only: it shows what a launcher that stays a direct child of the Ray
    worker leaks.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        lease_timeout: float | None = DEFAULT_LEASE,
        unreachable_timeout: float | None = None,
        liveness_timeout: float | None = None,
        health_check_period: float | None = None,
        health_check_timeout: float | None = None,
        health_check_failure_threshold: int | None = None,
        health_check_initial_delay: float | None = None,
        log_file: str | os.PathLike[str] | Literal[False] | None = None,
        runtime_env: dict[str, Any] | None = None,
        init_kwargs: dict[str, Any] | None = None,
        detach: bool = True,
    ) -> None:
        for name, value in (
            ("lease_timeout", lease_timeout),
            ("unreachable_timeout", unreachable_timeout),
            ("liveness_timeout", liveness_timeout),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 seconds, or None (off); got {value!r}")
        health = {
            "health_check_initial_delay": health_check_initial_delay,
            "health_check_period": health_check_period,
            "health_check_timeout": health_check_timeout,
            "health_check_failure_threshold": health_check_failure_threshold,
        }
        given = {k: v for k, v in health.items() if v is not None}
        for name, value in given.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0; got {value!r}")
        if given and address is not None:
            raise ValueError(
                f"{', '.join(given)}: Ray's health check is set where the cluster starts "
                "(ray start --head --system-config='{\"health_check_period_ms\": ...}'); "
                "this engine sets it only for a Ray it starts itself (address None)"
            )
        self._address = address
        self._lease_timeout = lease_timeout
        self.unreachable_timeout = unreachable_timeout
        self.liveness_timeout = liveness_timeout
        self.health_check = given
        if log_file is False:
            self.log_file: str | None = None  # the terminal, as Ray prints
        else:
            self.log_file = default_log_file() if log_file is None else os.fspath(log_file)
        self._runtime_env = dict(runtime_env) if runtime_env else None
        self._init_kwargs = dict(init_kwargs or {})
        self._detach = detach
        self._id = uuid.uuid4().hex[:12]  # this engine's subtrees, in every mark
        self._init_lock = threading.Lock()
        self._warned = False
        # Nodes it saw declared dead: Ray's node list can lag behind the death report,
        # and a Ray node id is never reused.
        self._dead: set[str] = set()
        self._names: dict[str, str] = {}  # node id -> Ray's node name, dead nodes too

    @property
    def lease_timeout(self) -> float | None:
        return self._lease_timeout

    def _ensure(self) -> None:
        with self._init_lock:
            if self.log_file is not None:
                _send_ray_output_to(self.log_file)
            if ray.is_initialized():
                if self.health_check and not self._warned:  # someone else's Ray
                    self._warned = True
                    log.warning(
                        "Ray was initialised before this engine: its health check "
                        "settings (%s) do not apply",
                        ", ".join(self.health_check),
                    )
                return
            kwargs = dict(self._init_kwargs)
            if self.health_check:
                config = dict(kwargs.pop("_system_config", None) or {})
                for name, value in self.health_check.items():
                    key = HEALTH_CHECK_KEYS[name]
                    config[key] = int(value) if key.endswith("threshold") else int(value * 1000)
                kwargs["_system_config"] = config
            since = _size(self.log_file)
            try:
                with _stderr_to(self.log_file):
                    ray.init(address=self._address, **kwargs)
            except Exception as e:
                if _refused_for_auth(e, self.log_file, since):
                    raise RayAuthError(self._address, self.log_file) from e
                raise
            self._warned = True  # ours: its health check is the one asked for

    # -- the port -----------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        self._ensure()
        out = []
        for node in ray.nodes():  # type: ignore[no-untyped-call]
            self._names[node["NodeID"]] = str(node.get("NodeName", ""))
            if not node.get("Alive") or node["NodeID"] in self._dead:
                continue
            out.append(
                NodeInfo(
                    id=node["NodeID"],
                    name=str(node.get("NodeName", "")),
                    labels={str(k): str(v) for k, v in (node.get("Labels") or {}).items()},
                    resources={str(k): float(v) for k, v in node.get("Resources", {}).items()},
                )
            )
        return out

    def spawn(
        self,
        spec: SupervisorSpec,
        node: str,
        incarnation: int,
        name: str,
        lease_timeout: float | None,
        timeout: float,
    ) -> RayHandle:
        self._ensure()
        token = uuid.uuid4().hex
        # Every incarnation of one path of this engine's tree shares the subtree key.
        subtree = f"{self._id}:{name.rsplit('#', 1)[0]}"
        options: dict[str, Any] = {
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)
        }
        if self._runtime_env:
            options["runtime_env"] = self._runtime_env
        try:
            payload = _ship.dumps(spec)
        except Exception as e:
            raise RemoteStartError(f"{name}: cannot be pickled for its node: {e}") from e
        actor = NannyHost.options(**options).remote(  # type: ignore[attr-defined]
            payload, incarnation, lease_timeout, self._detach, subtree, token
        )
        try:
            ray.get(actor.start.remote(), timeout=timeout)
        except GetTimeoutError as e:
            ray.kill(actor, no_restart=True)
            raise RemoteStartError(f"{name} did not start on node {node} within {timeout}s") from e
        except RayTaskError as e:
            ray.kill(actor, no_restart=True)
            cause: Any = e.cause if e.cause is not None else e
            if isinstance(cause, RemoteApiError):
                cause = cause.rebuild()
            raise RemoteStartError(f"{name}: {cause}", getattr(cause, "reason", None)) from e
        except RayActorError as e:
            if "node has died" in str(e) or "terminated unexpectedly" in str(e):
                self._dead.add(node)
            raise RemoteStartError(f"{name} died while starting on node {node}: {e}") from e
        return RayHandle(actor, node, incarnation, name, token)

    def wait_exit(self, handle: RayHandle, callback: Callable[[Outcome], None]) -> None:
        future = handle.actor.wait_exit.remote().future()

        def done(f: Any) -> None:
            try:
                outcome = Outcome("exited", f.result())
            except ActorUnavailableError as e:
                outcome = Outcome("unreachable", message=str(e).splitlines()[0])
            except RayActorError as e:
                outcome = Outcome("dead", self._death_reason(handle, e))
            except Exception as e:
                reason = ExitReason(ExitKind.REMOTE_CRASH, message=f"{type(e).__name__}: {e}")
                outcome = Outcome("dead", reason)
            callback(outcome)

        future.add_done_callback(done)

    def call(self, handle: RayHandle, method: str, *args: Any, timeout: float | None) -> Any:
        ref = handle.actor.call.remote(method, *args)
        try:
            return ray.get(ref, timeout=timeout)
        except (GetTimeoutError, ActorUnavailableError) as e:
            raise RemoteUnreachable(f"{handle.name}: {type(e).__name__}") from e
        except RayActorError as e:
            raise RemoteDead(self._death_reason(handle, e)) from e
        except RayTaskError as e:
            if e.cause is not None:
                raise e.cause from None
            raise

    def kill(self, handle: RayHandle) -> None:
        with contextlib.suppress(Exception):
            ray.kill(handle.actor, no_restart=True)

    # -- beyond the port: fencing and names -----------------------------------------------

    def fence_confirmed(self, handle: RayHandle) -> bool:
        """Whether this incarnation's far side said it fenced itself with every child
        stopped: the parent may start a new incarnation without waiting out the lease.

        False says nothing (a frozen or lost node cannot say it). Reading it forgets it.
        """
        if not handle.token:
            return False
        try:
            from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_get

            key = _fence_key(handle.token)
            if _internal_kv_get(key, namespace=KV_NAMESPACE) is None:
                return False
            _internal_kv_del(key, namespace=KV_NAMESPACE)
        except Exception:
            return False
        return True

    def node_name(self, node_id: str) -> str:
        """A node's name for people: Ray's node name (`ray start --node-name`, by
        default its IP address), followed by `#` and the id's first 8 characters when
        another node has the same name; the id itself for a node Ray never listed."""
        if node_id not in self._names:
            with contextlib.suppress(Exception):
                self.nodes()  # Ray lists dead nodes too: their names are kept
        name = self._names.get(node_id, "")
        if not name:
            return node_id
        if sum(1 for other in self._names.values() if other == name) > 1:
            return f"{name}#{node_id[:8]}"
        return name

    # -- classification -----------------------------------------------------------------

    def _death_reason(self, handle: RayHandle, error: RayActorError) -> ExitReason:
        text = str(error)
        try:
            node_alive = any(n.id == handle.node for n in self.nodes())
        except Exception:
            node_alive = True
        lowered = text.lower()
        if not node_alive or (
            isinstance(error, ActorDiedError)
            and "node" in lowered
            and ("terminated unexpectedly" in lowered or "node died" in lowered)
        ):
            self._dead.add(handle.node)
            return ExitReason(ExitKind.NODE_DOWN, message=f"node {handle.node} is dead")
        tail = " ".join(line.strip() for line in text.splitlines()[-2:])
        return ExitReason(ExitKind.REMOTE_CRASH, message=tail[:500])


# -- Ray's output, away from the terminal ---------------------------------------------------


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


_redirected: list[str] = []  # the file Ray's output goes to, once redirected


def _send_ray_output_to(path: str) -> None:
    """Ray's driver-side log lines (the "ray" logger), the error messages its driver
    prints and the workers' forwarded output, into `path` (appended) instead of the
    terminal. Once per process."""
    if _redirected:
        return
    _redirected.append(path)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    ray_log = logging.getLogger("ray")
    for old in list(ray_log.handlers):
        ray_log.removeHandler(old)
    ray_log.addHandler(handler)
    ray_log.propagate = False

    def to_file(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        who = data.get("actor_name") or data.get("task_name") or data.get("pid") or "?"
        level = logging.WARNING if data.get("is_err") else logging.INFO
        for line in data.get("lines", ()):
            ray_log.log(level, "(%s) %s", who, line)

    # Ray prints these with print_to_stdstream, looked up at each call: the error
    # listener thread, and the worker-output handler ray.init registers.
    worker = getattr(ray._private, "worker", None)
    if worker is not None and hasattr(worker, "print_to_stdstream"):
        worker.print_to_stdstream = to_file
