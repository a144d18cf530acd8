"""A SQLite ledger's files on disk: the database created private, and its side lock file.

The ledger and its WAL files are readable by their owner only (0600); the side lock
file (``<ledger>.lock``) is what the fair write lock of :mod:`.sqlite` ``flock``s.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys

from ctxledger.errors import IntegrityError, InvalidInput, StoreError

__all__ = [
    "SQLITE_HEADER",
    "create_ledger_file",
    "create_private_file",
    "open_side_lock",
]

#: the first 16 bytes of every SQLite database file
SQLITE_HEADER = b"SQLite format 3\x00"


def open_side_lock(path: str) -> int | None:
    """The descriptor of the side lock file (created 0600), or None where there is none
    (no ``fcntl``, or a read-only directory: writes then rely on busy_timeout alone).

    Root writing another user's ledger leaves a root-owned lock file that locks the owner
    out until removed: nothing here hands files to the ledger's owner, since anyone who
    can write the folder could point such a hand-over (through a link) at a file of
    their choosing. Read commands never open another user's ledger writable."""
    if sys.platform == "win32":
        return None
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None


def create_ledger_file(path: str) -> None:
    """:func:`create_private_file`, a failure as the StoreError a user can act on."""
    try:
        create_private_file(path)
    except OSError as exc:
        raise StoreError(
            f"cannot create the ledger {path}: {exc.strerror}; "
            "check the directory exists and is writable"
        ) from exc


def create_private_file(path: str) -> None:
    """Create an empty database file readable by its owner only; an existing one of ours
    that others may read (0644 from an older version or a copy) is made private too.

    Changes nothing and raises InvalidInput when `path` is a directory (``--db /tmp``),
    IntegrityError when it is a file that is no SQLite database (``--db notes.txt``, or
    a ledger whose first page is gone): before, such a path had its mode cut to the
    owner's (a directory too) and then failed as a "damaged" ledger.
    """
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, mode=0o700, exist_ok=True)
    except RecursionError:  # (makedirs recurses once per missing folder)
        raise OSError(errno.ENAMETOOLONG, "the path names too many folders", parent) from None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        _check_database_file(path)
        for name in (path, path + "-wal", path + "-shm"):
            with contextlib.suppress(OSError):  # not ours, or gone: leave it to its owner
                st = os.stat(name)
                if st.st_uid == os.getuid() and st.st_mode & 0o077 and stat.S_ISREG(st.st_mode):
                    os.chmod(name, stat.S_IMODE(st.st_mode) & 0o700)
        return
    os.close(fd)


def _check_database_file(path: str) -> None:
    """Raise unless `path` is a regular file that is empty or an SQLite database."""
    try:
        st = os.stat(path)
    except OSError:
        return  # gone meanwhile, or unreadable: the open reports it
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise InvalidInput(f"{path} is {kind}, not a ledger file; nothing was changed")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:
        return  # not readable by us: the open reports it
    if head and head != SQLITE_HEADER:
        raise IntegrityError(
            f"{path} is not an SQLite database: a file that is no ledger (check the path), "
            "or a ledger damaged past its first page (restore it from a backup); "
            "nothing was changed"
        )
