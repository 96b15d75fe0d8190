"""actors._runtime._flag.Flag: an Event made only when somebody waits."""

from __future__ import annotations

import threading

from actors._runtime._flag import Flag


def test_a_set_flag_is_seen_without_waiting() -> None:
    flag = Flag()
    assert not flag.is_set()
    flag.set()
    assert flag.is_set() and flag.wait(0) and flag.wait()


def test_a_wait_times_out_while_unset() -> None:
    assert Flag().wait(0.01) is False


def test_a_waiter_is_woken_by_a_set_from_another_thread() -> None:
    flag = Flag()
    waiting = threading.Event()
    woken: list[bool] = []

    def waiter() -> None:
        waiting.set()
        woken.append(flag.wait(30))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(10)
    flag.set()
    thread.join(30)
    assert woken == [True]


def test_many_waiters_and_setters_race_without_a_lost_wakeup() -> None:
    for _ in range(200):
        flag = Flag()
        results: list[bool] = []
        waiters = [threading.Thread(target=_wait_into, args=(flag, results)) for _ in range(3)]
        for t in waiters:
            t.start()
        flag.set()
        for t in waiters:
            t.join(30)
        assert results == [True, True, True]


def _wait_into(flag: Flag, results: list[bool]) -> None:
    results.append(flag.wait(30))
