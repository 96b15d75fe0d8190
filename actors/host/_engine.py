"""The engine of `nannytree run`: the tree file's `[engine]` table and the run's
flags as one EngineConfig, the RayEngine it makes (Ray's log lines kept in a
file, out of the run's event lines), and the names of the engine's nodes for
`status` and the events."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from supervision import EngineConfig

    from ..ray import RayEngine

NAME_WAIT = 0.3  # seconds a lookup waits for the engine's node list, then shows the id
NODES_WAIT = 30.0  # seconds `check` waits for a cluster's node list


def merged(
    file: EngineConfig | None, address: str | None, flags: Mapping[str, Any]
) -> EngineConfig | None:
    """The run's engine: the file's `[engine]`, with the flags over it. None: no engine
    (neither a table nor `--engine`); ValueError for settings without an engine."""
    if address == "":
        raise ValueError('an engine address is "auto", "local", "ray://HOST:PORT" or "HOST:PORT"')
    if file is None and address is None:
        if flags:
            names = ", ".join("--" + k.replace("_", "-") for k in flags)
            raise ValueError(
                f"{names} set an engine's detection, and this run has none; "
                "pass --engine ADDRESS or add an [engine] table to the tree file"
            )
        return None
    from supervision import EngineConfig as Config

    given = Config("ray", address, dict(flags))
    config: EngineConfig = given.over(file)
    return config


def engine_text(config: EngineConfig) -> str:
    """A file's engine in one line, for `check`: what it sets; the rest are defaults."""
    where = f"at {config.address}" if config.address else "(Ray's default address)"
    given = [
        f"{name} {'off' if value is None else value}"
        for name, value in config.options.items()
        if name != "runtime_env"
    ]
    if "runtime_env" in config.options:
        given.append("a runtime_env")
    rest = "; ".join(given) if given else "every setting its default"
    return f"{config.kind} {where}; {rest}"


def make_ray_engine(ray_engine: Callable[..., Any], config: EngineConfig, log_file: Path) -> Any:
    """A `ray_engine` (actors.ray.RayEngine) with these settings, each passed as the
    parameter of its name, and Ray's own log lines (its driver's, its workers'
    forwarded output) sent to `log_file`, out of the run's event lines.

    Address "local" is the engine's None: a Ray started for this run, the one Ray
    whose health check the run may set. ValueError (the engine's) for settings it
    refuses, e.g. a health check for a cluster that is already running."""
    import inspect  # a sixth of a client command's time: only for `run`

    accepts = set(inspect.signature(ray_engine).parameters)
    unknown = sorted(set(config.options) - accepts)
    if unknown:  # an engine older than the file
        raise ValueError(f"this RayEngine takes no {', '.join(unknown)}; upgrade nannytree")
    address = None if config.address == "local" else config.address
    return ray_engine(address, log_file=str(log_file), **config.options)


class NodeNames:
    """The names of an engine's nodes, by id, for display: a node's name, with the
    start of its id where two nodes share a name (Ray names a node by its IP
    address unless `ray start --node-name` says otherwise).

    The engine is asked on a thread of its own, at most one call at a time: a
    lookup waits NAME_WAIT at most (an engine whose control plane is cut off must
    not stall `status`), then shows the id. A name once seen is kept: a dead node
    is no longer listed, and its events still name it.
    """

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._names: dict[str, str] = {}  # id -> the engine's name ("" for none)
        self._shown: dict[str, str] = {}  # id -> what to show
        self._cond = threading.Condition()
        self._asked = 0
        self._answered = 0
        self._busy = False

    def known(self) -> dict[str, str]:
        """Every node seen so far: id -> the text to show."""
        with self._cond:
            return dict(self._shown)

    def name(self, node: str | None) -> str | None:
        """The text to show for `node`: its name where known, else its id."""
        if node is None:
            return None
        shown = self.known().get(node)
        if shown is None:
            self.refresh(wait=NAME_WAIT)
            with self._cond:  # asked once: its id until the engine names it
                self._names.setdefault(node, "")
                shown = self._shown.setdefault(node, node)
        return shown

    def refresh(self, wait: float = 0.0) -> None:
        """Ask the engine for its nodes again; wait up to `wait` s for the answer."""
        with self._cond:
            self._asked += 1
            wanted = self._asked
            if not self._busy:
                self._busy = True
                threading.Thread(target=self._ask, name="nannytree-node-names", daemon=True).start()
            if wait > 0:
                self._cond.wait_for(lambda: self._answered >= wanted, wait)

    def _ask(self) -> None:
        while True:
            with self._cond:
                target = self._asked
                seen = dict(self._names)
            with contextlib.suppress(Exception):
                for node in self._engine.nodes():
                    seen[str(node.id)] = str(getattr(node, "name", "") or "")
            shown = _shown(seen)
            namer = getattr(self._engine, "node_name", None)  # the engine's own rule
            if namer is not None:
                with contextlib.suppress(Exception):
                    shown = {node: str(namer(node)) for node in seen}
            with self._cond:
                self._names.update(seen)
                self._shown.update(shown)
                self._answered = target
                self._cond.notify_all()
                if self._asked == target:
                    self._busy = False
                    return

    def rename(self, text: str) -> str:
        """`text` with each known node id replaced by what `known` shows for it (ids
        long enough not to be a word of the text: Ray's are 56 hex digits)."""
        known = {k: v for k, v in self.known().items() if len(k) >= 16 and k != v}
        if not text or not known:
            return text
        pattern = re.compile("|".join(re.escape(k) for k in sorted(known, key=len, reverse=True)))
        return pattern.sub(lambda m: known[m.group(0)], text)


def _shown(names: Mapping[str, str]) -> dict[str, str]:
    """id -> its name, with the start of its id where names repeat (or none is given)."""
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    shown = {}
    for node, name in names.items():
        if name and counts[name] == 1:
            shown[node] = name
        elif name:
            shown[node] = f"{name}#{node[:8]}"
        else:
            shown[node] = node
    return shown


def engine_nodes(config: EngineConfig, timeout: float = NODES_WAIT) -> Any:
    """The nodes of the cluster `config` names (supervision.NodeInfo), for `check`; a
    sentence saying why not instead (no address to ask: a Ray started for the run has
    only this host; no answer in `timeout` s; an error, an auth failure said as one).
    Ray's own lines go to the engine's default log file."""
    if config.address is None:
        return "the [engine] table names no address to ask"
    if config.address == "local":
        return "the engine starts its own Ray (address local): only this host is a node"
    try:
        make = ray_engine()
    except ValueError as e:
        return str(e)
    answer: list[Any] = []

    def ask() -> None:
        try:
            engine = make(config.address, lease_timeout=None)
            answer.append(engine.nodes())
        except BaseException as e:  # Ray raises ConnectionError, RuntimeError, ...
            answer.append(e)

    asker = threading.Thread(target=ask, name="nannytree-check-nodes", daemon=True)
    asker.start()
    asker.join(timeout)
    if not answer:
        return f"the cluster at {config.address} did not answer within {timeout:g}s"
    if isinstance(answer[0], BaseException):
        error = answer[0]
        return f"{error}" if "Ray" in type(error).__name__ else f"{type(error).__name__}: {error}"
    with contextlib.suppress(Exception):
        import ray

        ray.shutdown()
    return answer[0]


def ray_engine() -> type[RayEngine]:
    """actors.ray.RayEngine; ValueError naming the fix without the ray extra."""
    try:
        from ..ray import RayEngine
    except ImportError as e:
        raise ValueError(
            f'an engine needs Ray: pip install "nannytree[ray]" ({type(e).__name__}: {e})'
        ) from e
    return RayEngine


def engine_check() -> Callable[[Any], Any] | None:
    """The engine's own test of what a placed subtree's node may not import
    (`actors.ray.unshippable_targets`), where Ray and it exist."""
    try:
        from .. import ray as ray_front
    except ImportError:
        return None
    found: Callable[[Any], Any] | None = getattr(ray_front, "unshippable_targets", None)
    return found
