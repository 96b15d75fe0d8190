"""What the control socket's requests do: a table from each op to the operation it
asks of the tree (its streams are `_follow.py`'s, the event it leaves is
`_operator_event.py`'s)."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors._operate._find import OP_TIMEOUT, TIMEOUTS

from .._operate._ready import wait_ready
from .._operate._records import EventRecord
from .._operate._restart import restart, restart_all
from ._closeup import CloseUp, worker_only
from ._follow import MAX_PENDING, Fanout, peer_gone
from ._operator_event import operator_event
from ._reset import reset
from ._server import Send

if TYPE_CHECKING:
    from supervision import Event

    from .. import EventLog
    from .._operate._find import Target
    from .._operate._snapshot import TreeInspector
    from .._operate._update import Updater

# The requests that act on the tree: each is recorded as an operator event.
OPERATOR_OPS = frozenset(
    {"start", "stop", "restart", "pause", "resume", "signal", "reload", "reload_child"}
    | {"add", "shutdown", "reset", "reopen_logs"}
)
log = logging.getLogger("nannytree")


class Controller:
    """Turns control requests into calls on the tree's nannies."""

    def __init__(
        self,
        inspector: TreeInspector,
        log: EventLog,
        info: dict[str, Any],
        request_stop: Callable[[str], None],
        closing: threading.Event,
    ) -> None:
        self.inspector = inspector
        self.log = log
        self.info = info
        self.request_stop = request_stop
        self.closing = closing
        self.fanout = Fanout(log)
        self.closeup = CloseUp(inspector, log, self._call)
        self.reload_source: Callable[[], Any] | None = None
        self.reopen_logs: Callable[[], str] | None = None  # set once the tree runs
        self._updater: Updater | None = None

    def close(self) -> None:
        self.fanout.close()

    def handle(self, request: dict[str, Any], send: Send) -> None:
        op = request.get("op")
        if op == "events":
            try:
                self._events(request, send)
            except Exception as e:  # a client always gets an answer, even to a bug
                log.exception("control request %r failed", op)
                send({"ok": False, "error": f"{type(e).__name__}: {e}", "kind": "Internal"})
            return
        reply = self._answer(str(op), request)
        if isinstance(op, str) and op in OPERATOR_OPS:
            self._note_action(str(op), request, reply)
        send(reply)

    def _answer(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        import pykka

        from supervision import ChildNotFound, NannyError

        try:
            return {"ok": True, **self._dispatch(op, request)}
        except ChildNotFound as e:
            key = request.get("id", e.child)
            return {
                "ok": False,
                "error": f"no child {key!r} in tree {self.inspector.spec.id!r}; "
                "`nannytree status` lists them",
                "kind": "ChildNotFound",
            }
        except TIMEOUTS:
            return {
                "ok": False,
                "error": "a supervisor is busy (starting or stopping children, or "
                "waiting on a remote node); try again",
                "kind": "Busy",
            }
        except pykka.ActorDeadError:
            return {"ok": False, "error": "the tree is stopping", "kind": "Stopping"}
        except (NannyError, LookupError, ValueError) as e:
            return {"ok": False, "error": str(e), "kind": type(e).__name__}
        except Exception as e:  # a client always gets an answer, even to a bug
            log.exception("control request %r failed", op)
            return {"ok": False, "error": f"{type(e).__name__}: {e}", "kind": "Internal"}

    def _note_action(self, op: str, request: dict[str, Any], reply: dict[str, Any]) -> None:
        """An operator's request as an event of the tree: what was asked, on what, by
        whom, and what came of it (docs/monitoring.md)."""
        try:
            self.log.append(operator_event(self.inspector.spec.id, op, request, reply))
        except Exception:  # the answer matters more than its record
            log.exception("could not record the control request %r", op)

    def _dispatch(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        if op == "hello":
            return dict(self.info)
        if op == "status":
            return {**self.info, "tree": self.inspector.snapshot().to_dict()}
        if op == "wait":  # `nannytree wait --ready`: blocks this connection's thread only
            conn: socket.socket = request["_peer"]["conn"]
            return wait_ready(self.inspector, request, self.closing, lambda: peer_gone(conn))
        if op == "detail":
            key = request.get("id")
            if not isinstance(key, str):
                raise ValueError("the request needs an id")
            return {"detail": self.closeup.detail(key)}
        if op == "restart" and request.get("id") == "all":
            return {"message": self._restart_all()}
        if op == "reload":
            return {"message": self._reload(request)}
        if op == "reload_child":
            key = request.get("id")
            if not isinstance(key, str):
                raise ValueError("the request needs an id")
            target = self.inspector.find(key)
            request["_target"] = target.path  # for the operator event
            return {"message": self._reload_child(target)}
        if op == "add":
            return {"message": self._add(request)}
        if op == "logs":
            key = request.get("id")
            if not isinstance(key, str):
                raise ValueError("the request needs an id")
            return self.closeup.logs(self.inspector.find(key), request)
        if op == "reset":
            key = request.get("id")
            if not isinstance(key, str):
                raise ValueError("the request needs an id")
            return {"message": reset(self.inspector, key, self._call)}
        if op == "reopen_logs":  # `nannytree logs --reopen` (docs/logs.md)
            if self.reopen_logs is None:
                raise ValueError("the tree is still starting; try again")
            return {"message": self.reopen_logs()}
        if op == "shutdown":
            self.request_stop(f"`nannytree shutdown` from pid {request['_peer'].get('pid')}")
            return {"message": f"stopping tree {self.inspector.spec.id!r}"}
        actions = {
            "start": self._start,
            "stop": self._stop,
            "restart": self._restart,
            "pause": self._pause,
            "resume": self._resume,
            "signal": self._signal,
        }
        if op not in actions:
            raise ValueError(f"unknown op {op!r}; expected one of {', '.join(actions)}")
        key = request.get("id")
        if not isinstance(key, str):
            raise ValueError("the request needs an id")
        target = self.inspector.find(key)
        request["_target"] = target.path  # for the operator event
        return {"message": actions[op](target, request)}

    def _call(self, target: Target, method: str, *args: Any, timeout: float | None = None) -> Any:
        return target.call(method, *args, timeout=timeout)

    def _start(self, t: Target, request: dict[str, Any]) -> str:
        if t.info.state in ("running", "paused"):
            raise ValueError(
                f"{t.path} is already running (pid {t.info.pid}); use `nannytree restart`"
            )
        info = self._call(t, "restart_child", t.child_id)
        return f"started {t.path}" + (f", pid {info.pid}" if info.pid else "")

    def _stop(self, t: Target, request: dict[str, Any]) -> str:
        if request.get("with_dependents") is True:
            return self._stop_with_dependents(t)
        if t.info.state == "stopped":
            return f"{t.path} was not running"
        if t.info.state == "failed":  # kept: `reset` or `start` is the operator's answer
            cause = "its restart_limit was exceeded"
            if t.info.incarnation == 0:  # never started: optional (required = false)
                cause = "its first start failed"
            return f"{t.path} was not running (failed: {cause})"
        self._call(t, "terminate_child", t.child_id)
        return f"stopped {t.path}" + (f" (was pid {t.info.pid})" if t.info.pid else "")

    def _stop_with_dependents(self, t: Target) -> str:
        """The child and what depends on it in its group (rest_for_one or one_for_all:
        the siblings started after it, as the core decides), last started first."""
        if t.remote is not None:
            raise ValueError(
                f"{t.path} runs in the remote subtree {t.remote}, whose supervisor does not "
                f"forward --with-dependents; stop its children one by one, or {t.remote}"
            )
        before = {c.id: c.state for c in self._call(t, "which_children")}
        self._call(t, "terminate_child", t.child_id, True)
        after = {c.id: c.state for c in self._call(t, "which_children")}
        parent = t.path.rpartition("/")[0]
        others = [
            f"{parent}/{cid}"
            for cid, state in before.items()
            if cid != t.child_id and state != "stopped" and after.get(cid) == "stopped"
        ]
        if before.get(t.child_id) == "stopped" and not others:
            return f"{t.path} was not running, nor anything that depends on it"
        more = f" and its dependents: {', '.join(others)}" if others else ""
        return f"stopped {t.path}{more}"

    def _reload_child(self, t: Target) -> str:
        worker_only(t, "reload")
        self._call(t, "reload_child", t.child_id)
        return f"reloaded {t.path} (pid {t.info.pid})"

    def _restart(self, t: Target, request: dict[str, Any]) -> str:
        info = restart(t)
        if t.info.pid and info.pid:
            return f"restarted {t.path}: pid {t.info.pid} -> {info.pid}"
        return f"restarted {t.path}" + (f", pid {info.pid}" if info.pid else "")

    def _restart_all(self) -> str:
        """As `supervisorctl restart all` (actors/_operate/_restart.py)."""
        ref = self.inspector.ref
        if ref is None:
            raise TimeoutError("the tree is starting")
        children = restart_all(ref)
        return f"restarted {len(children)} children of {self.inspector.spec.id}: " + ", ".join(
            children
        )

    def _reload(self, request: dict[str, Any]) -> str:
        """As `supervisorctl update`: the tree as the edited file says, diffed against
        the live tree (docs/update.md: actors/_operate/_update.py carries out what
        supervision.plan_update decides). Children the file did not change keep
        running, untouched."""
        from pathlib import Path

        from supervision import UPDATE_SETTLE, ConfigError, check_settle

        from .._operate._preflight import problems_of
        from .._operate._update import Updater

        settle = check_settle(request.get("settle", UPDATE_SETTLE))
        if self.reload_source is None:
            raise ValueError("this tree was not run from a file; nothing to reload")
        if self._updater is None:
            here = Path.cwd()
            self._updater = Updater(
                lambda: self.inspector.ref, self.log, lambda c: problems_of(c, here)
            )
        old = self.inspector.spec
        try:
            new = self.reload_source()
        except ConfigError as e:
            raise self._updater.refuse(
                old.id, f"the file is not valid, nothing changed: {e}"
            ) from None
        if new.id != old.id:
            raise self._updater.refuse(
                old.id, f"the file's tree is {new.id!r}, not {old.id!r}; nothing changed"
            )
        try:
            outcome, live = self._updater.update(old, new, settle)
        except Exception:
            self._keep_live(old)
            raise
        self.inspector.replace_spec(live)
        return outcome.message

    def _keep_live(self, old: Any) -> None:
        """After a failed update: the inspector shows the tree as it now runs."""
        from .._operate._update import read_live

        ref = self.inspector.ref
        if ref is not None:
            with contextlib.suppress(Exception):
                self.inspector.replace_spec(read_live(ref, old, timeout=5.0).spec)

    def _add(self, request: dict[str, Any]) -> str:
        """A new child of a simple_one_for_one supervisor, with extra arguments."""
        key = request.get("id")
        extra = request.get("args", [])
        if not isinstance(key, str) or not isinstance(extra, list):
            raise ValueError("the request needs an id and a list of args")
        root_id = self.inspector.spec.id
        if key.strip("/") == root_id:
            nanny, path = self.inspector.ref, root_id
        else:
            t = self.inspector.find(key)
            if t.info.type != "supervisor":
                raise ValueError(f"{t.path} is a worker; add children to a supervisor")
            nanny = self._call(t, "child_nanny", t.child_id)
            path = t.path
        if nanny is None:
            raise TimeoutError("the tree is starting")
        info = nanny.proxy().start_child(extra).get(timeout=OP_TIMEOUT)
        return f"added {path}/{info.id}" + (f", pid {info.pid}" if info.pid else "")

    def _pause(self, t: Target, request: dict[str, Any]) -> str:
        worker_only(t, "pause")
        self._call(t, "pause_child", t.child_id)
        return f"paused {t.path} (pid {t.info.pid}, SIGSTOP to its process group)"

    def _resume(self, t: Target, request: dict[str, Any]) -> str:
        worker_only(t, "resume")
        if t.info.state != "paused":
            raise ValueError(f"{t.path} is not paused (it is {t.info.state}); nothing to resume")
        self._call(t, "resume_child", t.child_id)
        return f"resumed {t.path} (pid {t.info.pid})"

    def _signal(self, t: Target, request: dict[str, Any]) -> str:
        worker_only(t, "signal")
        sig = request.get("signal")
        if type(sig) is not int:
            raise ValueError("the request needs a signal number")
        self._call(t, "signal_child", t.child_id, sig)
        return f"sent {signal.Signals(sig).name} to {t.path} (pid {t.info.pid})"

    def _record(self, event: Event) -> EventRecord:
        if self.inspector is None:  # a socket served without a tree (tests)
            return EventRecord.from_event(event)
        return self.inspector.record(event)

    def _events(self, request: dict[str, Any], send: Send) -> None:
        last = request.get("last", 20)
        last = last if type(last) is int and last >= 0 else 20
        conn: socket.socket = request["_peer"]["conn"]
        follower = self.fanout.follow() if request.get("follow") else None
        try:
            backlog = self.log.snapshot()
            seen = {id(e) for e in backlog[-1000:]}
            for event in backlog[-last:] if last else []:
                if not send({"event": self._record(event).to_dict()}):
                    return
            if follower is None:
                send({"end": "done"})
                return
            while not self.closing.is_set():
                events = follower.take(timeout=0.25)
                if events is None:
                    send({"end": f"too slow: fell {MAX_PENDING} bytes behind", "ok": False})
                    return
                for event in events:
                    if id(event) in seen:
                        continue
                    if not send({"event": self._record(event).to_dict()}):
                        return
                if not events and peer_gone(conn):
                    return
            for event in follower.take(timeout=0) or []:
                send({"event": self._record(event).to_dict()})
            send({"end": "the tree stopped"})
        finally:
            if follower is not None:
                self.fanout.forget(follower)
