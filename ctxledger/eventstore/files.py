"""A SQLite ledger's files on disk: the database created private, and its side lock file.

The ledger and its WAL files are readable by their owner only (0600); the side lock
file (``<ledger>.lock``) is what the fair write lock of :mod:`.sqlite` ``flock``s.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys

__all__ = ["create_private_file", "open_side_lock"]


def open_side_lock(path: str) -> int | None:
    """The descriptor of the side lock file (created 0600), or None where there is none
    (no ``fcntl``, or a read-only directory: writes then rely on busy_timeout alone)."""
    if sys.platform == "win32":
        return None
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None


def create_private_file(path: str) -> None:
    """Create an empty database file readable by its owner only; an existing one of ours
    that others may read (0644 from an older version or a copy) is made private too."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for name in (path, path + "-wal", path + "-shm"):
            with contextlib.suppress(OSError):  # not ours, or gone: leave it to its owner
                st = os.stat(name)
                if st.st_uid == os.getuid() and st.st_mode & 0o077:
                    os.chmod(name, stat.S_IMODE(st.st_mode) & 0o700)
        return
    os.close(fd)
