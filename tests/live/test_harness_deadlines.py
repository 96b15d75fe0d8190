"""`eventually` and `within`: one deadline over several steps, the last failure named
(issue 38, item 6)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.testing import TreeHarness, eventually, within
from supervision import ChildSpec, EventKind, SupervisorSpec


def test_eventually_returns_once_a_real_process_made_it_true(
    nanny_tree: Callable[..., TreeHarness], tmp_path: Path
) -> None:
    flag = tmp_path / "flag"
    script = f"sleep 0.3; echo up > {flag}; exec sleep 60"
    nanny_tree(SupervisorSpec("t", children=[ChildSpec("w", command=["sh", "-c", script])]))

    def written() -> str:
        assert flag.exists(), "no flag yet"
        return flag.read_text()

    assert eventually(written, 10) == "up\n"


def test_eventually_fails_at_its_deadline_with_the_last_failure() -> None:
    tries = []

    def never() -> None:
        tries.append(1)
        raise AssertionError(f"try {len(tries)}")

    began = time.monotonic()
    with pytest.raises(
        AssertionError,
        match=r"never did not pass within 0.3 s \(\d+ tries\); "
        r"the last: AssertionError: try \d+",
    ) as raised:
        eventually(never, 0.3)
    assert 0.3 <= time.monotonic() - began < 3
    assert str(raised.value.__cause__) == f"try {len(tries)}"
    assert len(tries) > 2


def test_eventually_retries_false_but_not_an_error() -> None:
    with pytest.raises(AssertionError, match="it returned False"):
        eventually(lambda: False, 0.1, what="the flag")
    calls = []

    def broken() -> None:
        calls.append(1)
        raise KeyError("a test's bug")

    with pytest.raises(KeyError):
        eventually(broken, 5)
    assert calls == [1]  # at once: not a "not yet"


def test_within_gives_its_deadline_to_the_waits_inside(
    nanny_tree: Callable[..., TreeHarness],
) -> None:
    tree = nanny_tree(SupervisorSpec("t", children=[ChildSpec("w", command=["sleep", "60"])]))
    began = time.monotonic()
    with pytest.raises(TimeoutError), within(0.5):
        tree.wait_ready("w")  # ready at once: takes little of the 0.5 s
        tree.wait_for(EventKind.CHILD_EXITED, "w")  # never: what is left, not 10 s
    assert time.monotonic() - began < 5


def test_within_fails_a_block_that_took_longer_and_nests_shorter() -> None:
    took_longer = r"the block took 0\.\d+ s, more than within\(0.1\)"
    with pytest.raises(AssertionError, match=took_longer), within(0.1):
        time.sleep(0.2)  # the block's own work, not a synchronisation
    with within(5) as outer:
        with pytest.raises(AssertionError, match="more than within"), within(0.2) as inner:
            assert inner.left() <= 0.2 < outer.left()
            with pytest.raises(AssertionError, match="did not pass within"):
                eventually(lambda: False)  # the inner deadline, not 10 s
        assert outer.left() > 4
    with pytest.raises(ValueError, match="positive"), within(0):
        pass
