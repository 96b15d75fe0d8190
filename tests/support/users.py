"""Real unprivileged users for the privilege tests: made with `useradd` for a test,
removed with their files after it. Needs root (CI runs as root and sets
NANNYTREE_REQUIRE_ROOT=1, where a missing root or useradd is an error, not a skip)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REQUIRED = os.environ.get("NANNYTREE_REQUIRE_ROOT") == "1"


@dataclass(frozen=True)
class User:
    """A user made for one test: its name, ids and home folder (0700, its own)."""

    name: str
    uid: int
    gid: int
    home: Path

    def chown(self, path: Path, mode: int | None = None) -> Path:
        """`path` made this user's (and given `mode`)."""
        os.chown(path, self.uid, self.gid)
        if mode is not None:
            os.chmod(path, mode)
        return path


def need_root() -> None:
    """Skip (or, with NANNYTREE_REQUIRE_ROOT=1, fail) unless real users can be made."""
    why = ""
    if os.geteuid() != 0:
        why = "needs root to make real users (CI runs as root)"
    elif shutil.which("useradd") is None or shutil.which("userdel") is None:
        why = "needs useradd and userdel (the passwd package)"
    if why:
        if REQUIRED:
            pytest.fail(f"{why}; NANNYTREE_REQUIRE_ROOT=1 makes this a failure")
        pytest.skip(why)


@contextlib.contextmanager
def real_user(prefix: str = "nt") -> Iterator[User]:
    """A new system user with its own group and a home folder, removed after."""
    need_root()
    name = f"{prefix}{uuid.uuid4().hex[:8]}"[:31]
    subprocess.run(
        ["useradd", "--create-home", "--user-group", "--shell", "/bin/sh", name],
        check=True,
        capture_output=True,
    )
    try:
        entry = pwd.getpwnam(name)
        yield User(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        subprocess.run(["userdel", "--force", "--remove", name], capture_output=True)
