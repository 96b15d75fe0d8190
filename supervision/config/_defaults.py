"""A tree file's `[defaults]` table: the worker keys every worker of the file gets
unless its own table says otherwise, as supervisord's and systemd's defaults; and
the default `restart_limit` a tree file's worker gets without any (containment an
operator does not have to ask for: docs/otp-semantics.md section 15). Pure.

    [defaults]
    restart_limit = { intensity = 5, period = 30 }   # or false: OTP's charging
    shutdown = 10
    backoff = true
    required = false

The Python API has no such default: a ChildSpec's restart_limit is None unless set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .._errors import SpecError
from ..spec._fields import Restart, Strategy
from ..spec._restart_limit import RestartLimit
from ..spec._spec import ChildSpec
from ._errors import ConfigError
from ._keys import DEFAULT_RESTART_LIMIT_STRATEGIES, DEFAULTS_KEYS

PATH = "defaults"


class _Loader(Protocol):
    """The tree file's loader (_load.py), as this module reads a worker's keys with it."""

    def error(self, path: str, value: Any, expected: str) -> ConfigError: ...
    def check_keys(self, table: Mapping[str, Any], path: str, allowed: tuple[str, ...]) -> None: ...
    def child_fields(self, table: dict[str, Any], path: str, kw: dict[str, Any]) -> None: ...
    def daemon_fields(self, table: dict[str, Any], path: str, kw: dict[str, Any]) -> None: ...
    def seconds(
        self, table: Mapping[str, Any], path: str, key: str, *, zero: bool = False
    ) -> float: ...
    def boolean(self, table: Mapping[str, Any], path: str, key: str) -> bool: ...
    def restart_limit(self, value: Any, path: str) -> RestartLimit | None: ...


def read_defaults(loader: _Loader, table: Any) -> dict[str, Any]:
    """`[defaults]` as ChildSpec keyword values, each checked as a worker's would be
    (a bad one names `defaults.KEY`, the value and the fix). Raises ConfigError."""
    if not isinstance(table, dict):
        raise loader.error(PATH, table, "expected a table: [defaults]")
    loader.check_keys(table, PATH, DEFAULTS_KEYS)
    kw: dict[str, Any] = {}
    loader.child_fields(table, PATH, kw)  # restart, shutdown, backoff
    loader.daemon_fields(table, PATH, kw)  # stop_signal, kill_mode
    for key in ("start_timeout", "min_uptime"):
        if key in table:
            kw[key] = loader.seconds(table, PATH, key, zero=key == "min_uptime")
    if "required" in table:
        kw["required"] = loader.boolean(table, PATH, "required")
    if "restart_limit" in table:  # None: opted out, every worker charges its supervisor
        kw["restart_limit"] = loader.restart_limit(table["restart_limit"], f"{PATH}.restart_limit")
    probe = {k: v for k, v in kw.items() if k != "restart_limit"}
    try:  # the values a worker would refuse, refused here, once, under their own name
        ChildSpec("defaults", command=["true"], **probe)
    except SpecError as e:
        raise loader.error(f"{PATH}.{e.field}", e.value, e.expected) from None
    return kw


def apply_defaults(
    kw: dict[str, Any], written: dict[str, Any], defaults: dict[str, Any], strategy: Strategy
) -> None:
    """Fill a worker's keyword values `kw` (read from its table `written`) with the
    file's defaults, then its default restart_limit: RestartLimit() (5 in 30 s) unless
    its table or [defaults] says otherwise (`false`: none), for a worker that is
    restarted (not temporary) alone by its supervisor's strategy (one_for_one,
    simple_one_for_one). Under one_for_all and rest_for_one a crash is meant to
    restart the group, which a child of its own limit would not: no limit is given
    there, unless the worker's own table asks for one."""
    for key, value in defaults.items():
        if key != "restart_limit" and key not in written:
            kw[key] = value
    if "restart_limit" in written:
        return
    if kw.get("restart", Restart.PERMANENT) is Restart.TEMPORARY:
        return
    if strategy.value not in DEFAULT_RESTART_LIMIT_STRATEGIES:
        return
    kw["restart_limit"] = defaults.get("restart_limit", RestartLimit())
