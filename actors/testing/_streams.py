"""Which of a child's streams the harness can read, by their true names.

The launcher keeps a child's stderr (it tees it on to where it goes) and a stream
the spec captures. When a child's stdout and stderr go to one file (both to one
path, or both to this process's stdout and stderr when those are one file, as
under `2>&1` or a test runner's pipe), it gives the child one pipe for both, so
that their order survives: what it keeps is then both streams, under one name
("both"), never passed off as stderr."""

from __future__ import annotations

import os
from collections.abc import Iterator

from supervision import CAPTURE, ChildSpec, LogLine, SupervisorSpec

from .._launcher._outputs import OwnStreams, _one_destination

Stream = str  # "stdout", "stderr" or "both"
STREAMS = ("stdout", "stderr", "both")


def merged(spec: ChildSpec, own: OwnStreams) -> bool:
    """Whether the child's stdout and stderr are kept as one stream."""
    if spec.stdout is None and spec.stderr is None and own.terminal:
        return False  # a terminal is left as it is: neither is kept
    stdout = None if spec.stdout is None else os.fspath(spec.stdout)
    stderr = None if spec.stderr is None else os.fspath(spec.stderr)
    return _one_destination(stdout, stderr, own)


def merged_ids(spec: SupervisorSpec, own: OwnStreams) -> frozenset[str]:
    return frozenset(c.id for c in _workers(spec) if merged(c, own))


def _workers(spec: SupervisorSpec) -> Iterator[ChildSpec]:
    for child in spec.children:
        if isinstance(child, SupervisorSpec):
            yield from _workers(child)
        else:
            yield child


def resolve(child_id: str, spec: ChildSpec, stream: Stream | None, own: OwnStreams) -> str:
    """The stream to read ("stdout" or "stderr": "both" is read as the pipe it shares
    with stderr), or a ValueError that says what is kept and how to keep the other."""
    if stream is not None and stream not in STREAMS:
        raise ValueError(f'stream must be "stdout", "stderr" or "both", not {stream!r}')
    if merged(spec, own):
        if stream in (None, "both"):
            return "stderr"
        raise ValueError(
            f"child {child_id!r} writes its stdout and stderr to one file, so it has one "
            'pipe for both (their order kept): read them together with stream="both", '
            f'or keep {stream} apart with {stream}="capture" in its spec'
        )
    if stream == "both":
        raise ValueError(f'child {child_id!r} keeps its streams apart: read "stdout" or "stderr"')
    wanted = stream or "stderr"
    if not keeps(spec, wanted, own):
        raise ValueError(
            f"child {child_id!r} does not keep its {wanted} (it goes "
            f"{'to this terminal' if own.terminal else 'on, unread'}): set "
            f'{wanted}="capture" in its spec to read it'
        )
    return wanted


def keeps(spec: ChildSpec, stream: str, own: OwnStreams) -> bool:
    """Whether what the child writes to `stream` is kept, for reading."""
    if getattr(spec, stream, None) == CAPTURE:
        return True
    ready = spec.ready
    if isinstance(ready, LogLine) and (1 if stream == "stdout" else 2) in ready.streams:
        return True
    if stream == "stderr":  # tee'd on to where it goes, unless that is a terminal
        return not (spec.stdout is None and spec.stderr is None and own.terminal)
    return False
