"""A worker's template on the launcher: its spawn request, defined there once and
again only when the host's env, cwd, sys.path or argv changed (or the launcher was
replaced). Children built alike share one request (`_request.py`)."""

from __future__ import annotations

import os
import sys
from typing import Any

from supervision import ChildSpec, ExitKind, ExitReason

from .._process._port import ChildHandle, LaunchError, Spawner, SpawnRequest
from .._runtime._pooled import blocking
from ._context import TreeContext
from ._request import StartProblem, build_request, pickled_target, request_shape
from ._sd_notify import NotifyEndpoint


class Template:
    """The launcher our processes come from, and our template on it."""

    def __init__(self, spec: ChildSpec, context: TreeContext) -> None:
        self._spec, self._context = spec, context
        self._payload: bytes | None = None
        # (launcher, key of the host state, template id)
        self._cached: tuple[Spawner, tuple[Any, ...], int] | None = None
        self.current = 0  # the template the current process was started from

    @property
    def prepared(self) -> tuple[Spawner, int] | None:
        """The template as last defined (a run's start was spawned from it)."""
        cached = self._cached
        return None if cached is None else (cached[0], cached[2])

    def spawner(self) -> Spawner:
        """The spawner our process came from (the one our template is defined on)."""
        cached = self._cached
        if cached is not None:
            return cached[0]
        return self._context.current_spawner()

    def respawner(self) -> Spawner | None:
        """Who restarts our process ahead of a decision (for its supervisor's count)."""
        return self._cached[0] if self._cached is not None else None

    def disarm(self, proc: ChildHandle) -> None:
        if self._cached is not None:
            self._cached[0].disarm(proc)

    def define(self, notify: NotifyEndpoint | None) -> tuple[Spawner, int]:
        """The launcher to use and our template on it, defined again only when the
        host's state changed (or the launcher was replaced)."""
        try:
            launcher = self._context.current_spawner()
        except LaunchError as e:
            raise StartProblem(ExitReason(ExitKind.LAUNCHER_DIED, message=str(e))) from None
        key = self._host()
        cached = self._cached
        if cached is not None and cached[0] is launcher and cached[1] == key:
            return launcher, cached[2]
        try:
            with blocking():  # a send: it waits when the launcher does not read
                template = launcher.define(self._request(key, notify))
        except LaunchError as e:
            raise StartProblem(ExitReason.start_failure(str(e))) from None
        finally:
            # After the new one is defined: a listening socket both name stays open.
            if cached is not None:
                cached[0].forget(cached[2])
                self._cached = None
        self._cached = (launcher, key, template)
        return launcher, template

    def holds(self) -> bool:
        """Whether a start now would use the template as defined: the same launcher,
        the same host state (a successor started from it may be adopted as it is)."""
        cached = self._cached
        return (
            cached is not None and cached[0] is self._context.spawner and cached[1] == self._host()
        )

    def _host(self) -> tuple[Any, ...]:
        """The host's state a template is defined in."""
        return (
            os.environ._data.copy() if self._spec.inherit_env else None,  # type: ignore[attr-defined]
            os.getcwd(),
            tuple(sys.path),
            tuple(sys.argv),
        )

    def forget(self) -> None:
        if self._cached is not None:
            launcher, _, tid = self._cached
            launcher.forget(tid)

    def _request(self, host: tuple[Any, ...], notify: NotifyEndpoint | None) -> SpawnRequest:
        """Our spawn request: one object for every child of the tree built alike in
        the same host state, which the launcher then defines once."""
        spec = self._spec
        if spec.target is not None and self._payload is None:
            self._payload = pickled_target(spec)
        shape = request_shape(spec, self._payload)
        if shape is None:
            return build_request(spec, self._payload, notify)
        shared = self._context.requests.get(shape)
        if shared is not None and shared[0] == host:
            return shared[1]
        request = build_request(spec, self._payload, notify)
        self._context.requests[shape] = (host, request)
        return request
