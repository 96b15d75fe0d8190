"""Live trees' fixtures: the real users the privilege tests (test_trust_*.py) run
their children as."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.users import User, real_user


@pytest.fixture
def child_user() -> Iterator[User]:
    """A real unprivileged user for one test's child (tests/support/users.py; needs root)."""
    with real_user("ntc") as user:
        yield user


@pytest.fixture
def other_user() -> Iterator[User]:
    """A second real user: a neighbour of the child, or a stranger to the tree."""
    with real_user("nto") as user:
        yield user
