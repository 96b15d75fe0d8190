"""The launcher client's reader thread: the tree's one exit watcher.

It decodes the launcher's reports (records of `actors._launcher._protocol`, plain
data: nothing from the launcher is ever unpickled here) and applies each to what it
names, one handler per record type: a child's exit and its successor's birth, a
new main process, readiness, output, heartbeats, a spawn's answer, a standby. The
tables it applies them to (`Children`) are shared with the client, under its lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from .._launcher import _protocol, _wire
from .._launcher._protocol import (
    RESPAWNING,
    ChannelClosed,
    Exited,
    Forked,
    Heartbeat,
    Hello,
    Output,
    Prepared,
    Ready,
    Respawned,
    Spawned,
    SpawnFailed,
    StandbyDied,
)
from .._launcher._record import Record
from ._handle import ChildProcess
from ._port import LaunchError, PendingSpawn, ProcessExit, Standby

log = logging.getLogger("actors._process._client")


class Children:
    """What the launcher's reports name, by pid or request id; under `lock`."""

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock
        self.live: dict[int, ChildProcess] = {}
        # Successors announced by an Exited, until their Respawned: by the old pid.
        self.unborn: dict[int, ChildProcess | None] = {}
        self.pending: dict[int, PendingSpawn] = {}
        self.standbys: dict[int, Standby] = {}


class Reader:
    """Reads the launcher's socket until EOF, applying each report as it comes."""

    def __init__(
        self,
        sock: socket.socket,
        children: Children,
        on_hello: Callable[[int, str | None], None],
        kill: Callable[[], None],
    ) -> None:
        self._sock, self._children = sock, children
        self._on_hello, self._kill = on_hello, kill
        self._handlers: dict[type[Record], Callable[[Any], None]] = {
            Exited: self._exited,
            Respawned: self._respawned,
            Forked: self._forked,
            Output: self._output,
            Ready: self._ready,
            Spawned: self._spawned,
            SpawnFailed: self._spawn_failed,
            Heartbeat: self._heartbeat,
            ChannelClosed: self._channel_closed,
            Prepared: self._prepared,
            StandbyDied: self._standby_died,
            Hello: self._hello,
        }

    def run(self) -> None:
        decoder = _wire.Decoder(_protocol.REPORT_FRAME)
        buf = bytearray(1 << 18)
        view = memoryview(buf)
        while True:
            try:
                n = self._sock.recv_into(buf)
            except OSError:
                return
            if not n:
                return
            try:
                records = [
                    _protocol.decode(v, _protocol.REPORT_RECORDS) for v in decoder.feed(view[:n])
                ]
            except _wire.WireError as e:
                log.error("nannytree: the launcher sent a malformed report (%s); killing it", e)
                self._kill()
                return
            for record in records:
                try:
                    self.dispatch(record)
                except Exception:
                    log.exception("nannytree launcher: cannot handle report %s", record.TAG)

    def dispatch(self, record: Record) -> None:
        """Apply one report to what it names."""
        self._handlers[type(record)](record)

    def _get(self, pid: int) -> ChildProcess | None:
        with self._children.lock:
            return self._children.live.get(pid)

    # -- a child's life ---------------------------------------------------------

    def _exited(self, record: Exited) -> None:
        children = self._children
        with children.lock:
            child = children.live.pop(record.pid, None)
            if record.respawned == RESPAWNING:
                # Its successor is being started; nobody's is killed at its birth.
                successor = child._announce_successor() if child is not None else None
                children.unborn[record.pid] = successor
        if child is not None:
            child._set_exit(
                ProcessExit(
                    record.pid,
                    record.status,
                    record.uptime,
                    record.error,
                    stderr=child.output(2),
                    detached=tuple(p for p in record.detached if type(p) is int),
                    group_wait=record.group_wait,
                    lingering=record.lingering,
                )
            )

    def _respawned(self, record: Respawned) -> None:
        children = self._children
        with children.lock:
            unborn = children.unborn.pop(record.pid, None)
            if unborn is not None and record.new_pid:
                children.live[record.new_pid] = unborn  # before any report about it
        if unborn is None:
            if record.new_pid:  # nobody owns the old one any more
                with contextlib.suppress(OSError):
                    os.killpg(record.new_pid, signal.SIGKILL)
        elif not record.new_pid:
            unborn._never_born()  # the host restarts it the ordinary way
        elif not unborn._born_as(record.new_pid):
            with contextlib.suppress(OSError):
                os.killpg(record.new_pid, signal.SIGKILL)

    def _forked(self, record: Forked) -> None:
        children = self._children
        with children.lock:
            child = children.live.pop(record.pid, None)
            if child is not None:
                children.live[record.main_pid] = child
        if child is not None:
            child._forked(record.main_pid, record.pgid)

    def _output(self, record: Output) -> None:
        child = self._get(record.pid)
        if child is not None:
            child._append_output(record.stream, record.data)

    def _ready(self, record: Ready) -> None:
        child = self._get(record.pid)
        if child is not None:
            child._set_ready()

    def _heartbeat(self, record: Heartbeat) -> None:
        child = self._get(record.pid)
        if child is not None:
            child.last_beat = time.monotonic()

    def _channel_closed(self, record: ChannelClosed) -> None:
        child = self._get(record.pid)
        if child is not None:
            child._channel_closed(record.why)

    # -- answers to requests ------------------------------------------------------

    def _spawned(self, record: Spawned) -> None:
        children = self._children
        with children.lock:
            slot = children.pending.pop(record.req, None)
            if slot is not None:
                child = ChildProcess(record.pid, slot.notify)
                slot.child = child
                children.live[record.pid] = child
        if slot is None:
            # Its requester gave up waiting: nobody would ever stop it.
            with contextlib.suppress(OSError):
                os.killpg(record.pid, signal.SIGKILL)
            return
        slot._finish()

    def _spawn_failed(self, record: SpawnFailed) -> None:
        with self._children.lock:
            slot = self._children.pending.pop(record.req, None)
        if slot is not None:
            slot.error = LaunchError(
                f"cannot start child {slot.name!r}: {record.message}",
                name=slot.name,
                errno=record.errno,
            )
            slot._finish()

    def _prepared(self, record: Prepared) -> None:
        with self._children.lock:
            standby = self._children.standbys.get(record.standby)
        if standby is not None:
            standby.pid = record.pid
            standby._done.set()

    def _standby_died(self, record: StandbyDied) -> None:
        with self._children.lock:
            self._children.standbys.pop(record.standby, None)

    def _hello(self, record: Hello) -> None:
        self._on_hello(record.pid, record.error)
