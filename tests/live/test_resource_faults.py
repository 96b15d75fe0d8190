"""Resource faults on real children, each seen as the error or exit a real one gives:
a full disk (actors.testing.small_disk), too few file descriptors and too little
memory (the spec's `limits` and `memory_limit`)."""

from __future__ import annotations

import errno
import os
import signal
import time

import pytest

from actors import testing
from supervision import ChildSpec, EventKind, ExitKind, Restart, SupervisorSpec


def fill(folder: str) -> None:
    """Write to one file in `folder` until a write fails (the error ends the child)."""
    with open(os.path.join(folder, "data"), "wb", buffering=0) as f:
        while True:
            f.write(b"x" * 4096)


def open_files() -> None:
    """Open files until the kernel refuses one."""
    kept = []
    while True:
        kept.append(open(os.devnull, "rb"))  # noqa: SIM115 - kept open on purpose


def allocate(megabytes: int) -> None:
    """Ask for `megabytes` at once."""
    block = bytearray(megabytes * 1024 * 1024)
    print(len(block))


def leak(step_mb: int) -> None:
    """Grow by `step_mb` every 50 ms, touching each page."""
    kept = []
    while True:
        kept.append(b"x" * (step_mb * 1024 * 1024))
        time.sleep(0.05)


def _exit_of(nanny_tree, child: ChildSpec):  # type: ignore[no-untyped-def]
    tree = nanny_tree(SupervisorSpec(id="app", children=[child]))
    return tree.wait_for(EventKind.CHILD_EXITED, child.id, timeout=20).reason


def test_a_small_disk_is_full_with_enospc_as_root(nanny_tree):
    with testing.small_disk(64 * 1024) as disk:
        if os.geteuid() != 0:
            pytest.skip("a tmpfs needs root; CI runs as root (fsize: the next test)")
        assert disk.kind == "tmpfs" and disk.limits == {} and disk.error == errno.ENOSPC
        reason = _exit_of(
            nanny_tree,
            ChildSpec(id="writer", target=fill, args=(str(disk.path),), restart=Restart.TEMPORARY),
        )
        assert reason.kind is ExitKind.EXCEPTION and reason.exc_type == "OSError"
        assert "[Errno 28] No space left on device" in reason.message
        written = (disk.path / "data").stat().st_size
        assert 32 * 1024 <= written <= 64 * 1024  # full at the size it was given
    assert not disk.path.exists()


def test_an_fsize_disk_gives_python_efbig_and_kills_a_program_with_sigxfsz(nanny_tree):
    with testing.small_disk(64 * 1024, tmpfs=False) as disk:
        assert disk.kind == "fsize" and disk.limits == {"fsize": 64 * 1024}
        assert disk.error == errno.EFBIG
        writer = ChildSpec(
            id="writer",
            target=fill,
            args=(str(disk.path),),
            limits=disk.limits,
            restart=Restart.TEMPORARY,
        )
        dd = ChildSpec(
            id="dd",
            command=["dd", "if=/dev/zero", f"of={disk.path}/dd", "bs=4096", "count=100"],
            limits=disk.limits,
            restart=Restart.TEMPORARY,
        )
        tree = nanny_tree(SupervisorSpec(id="app", children=[writer, dd]))
        python = tree.wait_for(EventKind.CHILD_EXITED, "writer", timeout=20).reason
        program = tree.wait_for(EventKind.CHILD_EXITED, "dd", timeout=20).reason
        assert python.exc_type == "OSError"
        assert "[Errno 27] File too large" in python.message
        assert (disk.path / "data").stat().st_size == 64 * 1024
        assert program.kind is ExitKind.KILLED and program.signal == signal.SIGXFSZ
    assert not disk.path.exists()


def test_small_disk_refuses_a_size_that_is_not_bytes():
    bad = "1M"
    with (
        pytest.raises(ValueError, match=r"small_disk\(size='1M'\): expected a whole number"),
        testing.small_disk(bad),  # type: ignore[arg-type]
    ):
        pass


def test_too_few_file_descriptors_give_emfile(nanny_tree):
    reason = _exit_of(
        nanny_tree,
        ChildSpec(id="opener", target=open_files, limits={"nofile": 32}, restart=Restart.TEMPORARY),
    )
    assert reason.kind is ExitKind.EXCEPTION and reason.exc_type == "OSError"
    assert "[Errno 24] Too many open files" in reason.message  # EMFILE


def test_an_address_space_limit_gives_memoryerror(nanny_tree):
    reason = _exit_of(
        nanny_tree,
        ChildSpec(
            id="big",
            target=allocate,
            args=(2048,),
            limits={"as": "1G"},
            restart=Restart.TEMPORARY,
        ),
    )
    assert reason.kind is ExitKind.EXCEPTION and reason.exc_type == "MemoryError"


def test_memory_limit_kills_the_child_and_the_event_says_so(nanny_tree):
    limit = 60 * 1024 * 1024
    reason = _exit_of(
        nanny_tree,
        ChildSpec(id="hog", target=leak, args=(8,), memory_limit=limit, restart=Restart.TEMPORARY),
    )
    assert reason.kind is ExitKind.MEMORY_LIMIT and not reason.is_normal  # stopped: SIGTERM
    assert f"over memory_limit={limit}" in reason.message
