"""LightFuture: what pooled actors' asks answer with, as pykka's ThreadingFuture does."""

from __future__ import annotations

import queue
import threading

import pykka
import pytest

from actors._runtime._future import LightFuture


def test_get_waits_for_set_and_every_getter_sees_the_value() -> None:
    future = LightFuture()
    got: list[int] = []
    getters = [
        threading.Thread(target=lambda: got.append(future.get(timeout=10))) for _ in range(4)
    ]
    for t in getters:
        t.start()
    future.set(42)
    for t in getters:
        t.join(10)
    assert got == [42] * 4 and future.get() == 42 and future.get(timeout=0) == 42


def test_get_raises_what_was_set_as_an_exception() -> None:
    future = LightFuture()
    try:
        raise ValueError("bad child")
    except ValueError:
        future.set_exception()
    for _ in range(2):
        with pytest.raises(ValueError, match="bad child"):
            future.get(timeout=1)


def test_get_times_out_when_nothing_was_set() -> None:
    future = LightFuture()
    with pytest.raises(pykka.Timeout):
        future.get(timeout=0)
    with pytest.raises(pykka.Timeout):
        future.get(timeout=0.01)


def test_a_future_is_set_once() -> None:
    future = LightFuture()
    future.set(1)
    with pytest.raises(queue.Full):
        future.set(2)
    with pytest.raises(queue.Full):
        future.set_exception((RuntimeError, RuntimeError("x"), None))
    assert future.get() == 1


def test_map_and_join_work_through_get_hooks() -> None:
    a, b = LightFuture(), LightFuture()
    doubled = a.map(lambda v: v * 2)
    both = a.join(b)
    a.set(3)
    b.set(4)
    assert doubled.get(timeout=1) == 6 and both.get(timeout=1) == [3, 4]


def test_pooled_actors_answer_asks_with_it() -> None:
    from actors._runtime._pooled import PooledActor

    class Echo(PooledActor):
        def on_receive(self, message: object) -> object:
            if message == "boom":
                raise RuntimeError("boom")
            return message

    ref = Echo.start()
    try:
        future = ref.ask("hello", block=False)
        assert isinstance(future, LightFuture) and future.get(timeout=10) == "hello"
        with pytest.raises(RuntimeError, match="boom"):
            ref.ask("boom", timeout=10)
    finally:
        ref.stop()
