"""supervision._frozen.build: the fast path makes the same record as the constructor."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from supervision import EventKind, ExitReason
from supervision._actions import Report, StartChild, TerminateChild
from supervision._events import Event
from supervision._frozen import build
from tests.support.fake_executor import worker


@pytest.mark.parametrize(
    "cls, fields",
    [
        (
            Event,
            {
                "time": 1.5,
                "supervisor": "root/pool",
                "context": EventKind.CHILD_EXITED,
                "offender": "w1",
                "reason": ExitReason.normal(),
                "pid": 1234,
                "incarnation": 2,
                "detail": "why",
            },
        ),
        (StartChild, {"child_id": "w1", "spec": worker("w1"), "settle": 0.0}),
        (TerminateChild, {"child_id": "w1", "spec": worker("w1")}),
    ],
)
def test_build_makes_the_record_the_constructor_makes(cls, fields):
    built, made = build(cls, dict(fields)), cls(**fields)
    assert built == made and repr(built) == repr(made)
    assert pickle.loads(pickle.dumps(built)) == made
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.child_id = "other"  # type: ignore[misc]


def test_every_record_the_core_builds_fast_has_no_post_init_to_skip():
    for cls in (Event, Report, StartChild, TerminateChild):
        assert dataclasses.is_dataclass(cls) and not hasattr(cls, "__post_init__")
        assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
