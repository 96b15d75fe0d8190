"""Resource faults: a disk that fills up. (Too few file descriptors and too little
memory need no helper: they are the spec's `limits` and `memory_limit`; the
testing tutorial's "Faults after kill" shows each.)

A small disk is a tmpfs of the given size, mounted on a private folder: a write
past it fails as a full disk does (ENOSPC). Mounting needs root (CI runs as root);
elsewhere the folder is an ordinary one, and the child gets RLIMIT_FSIZE instead
(`disk.limits`, for its spec): a write that would make one file larger than the
size fails with EFBIG in Python (which ignores SIGXFSZ), and kills a program that
does not ignore it with SIGXFSZ. `disk.error` says which of the two the test should
expect.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class SmallDisk:
    """A folder that holds at most `size` bytes (see `small_disk`)."""

    path: Path
    size: int
    kind: str  # "tmpfs": a real small filesystem; "fsize": a limit on each file's size
    limits: dict[str, int] = field(default_factory=dict)  # for the child's spec

    @property
    def error(self) -> int:
        """The errno a write past the size gets: ENOSPC (tmpfs) or EFBIG (fsize)."""
        return errno.ENOSPC if self.kind == "tmpfs" else errno.EFBIG


def _mount(path: Path, size: int) -> bool:
    """Mount a tmpfs of `size` bytes on `path`; False when this process may not."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "nannytree-small-disk", path],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0  # root without CAP_SYS_ADMIN (a container): no mount


@contextlib.contextmanager
def small_disk(size: int, *, tmpfs: bool = True) -> Iterator[SmallDisk]:
    """A private folder that is full after `size` bytes, for a child to write to;
    removed (and unmounted) on leaving the block. Stop the tree first: nest the
    tree's block inside this one.

        with small_disk(64 * 1024) as disk, TreeHarness(spec_writing_to(disk)) as tree:
            ...

    As root, a tmpfs of `size` bytes (rounded up to whole pages): a write past it
    fails with ENOSPC, whatever the file. Otherwise (or with `tmpfs=False`) an
    ordinary folder, and the child must be given `limits=disk.limits`
    ({"fsize": size}): then no file the child writes, here or anywhere, may grow
    past `size` (EFBIG in Python; SIGXFSZ kills a program that does not ignore it).
    `disk.kind` says which ("tmpfs" or "fsize") and `disk.error` the errno to expect.
    """
    if not isinstance(size, int) or isinstance(size, bool) or size < 4096:
        raise ValueError(
            f"small_disk(size={size!r}): expected a whole number of bytes >= 4096 "
            "(one page), e.g. 64 * 1024"
        )
    path = Path(tempfile.mkdtemp(prefix="nannytree-disk-"))
    mounted = tmpfs and _mount(path, size)
    try:
        if mounted:
            yield SmallDisk(path, size, "tmpfs")
        else:
            yield SmallDisk(path, size, "fsize", {"fsize": size})
    finally:
        if mounted:
            # lazy: a process the test left holding a file must not keep the mount
            subprocess.run(["umount", "-l", path], capture_output=True, check=False)
        shutil.rmtree(path, ignore_errors=True)
