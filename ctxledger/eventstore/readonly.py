"""Opening a SQLite ledger read-only: an archived ledger, read-only media, a file or a
folder this process may not write.

A normal open writes: it creates the file, makes it private, opens the side lock
file, switches to WAL and applies migrations, and SQLite in WAL mode makes the
``-wal`` and ``-shm`` files beside the ledger. A read-only open does none of that:

- no ``-shm`` beside the ledger (nobody has it open in WAL mode): SQLite's
  ``immutable=1`` URI, which reads the main file and writes nothing anywhere (it takes
  no locks: whatever is there is read as it is). A non-empty ``-wal`` left without
  its ``-shm`` holds events the main file lacks, which ``immutable`` would not see:
  refused, naming the file to open writable once;
- a ``-shm`` present (a writer has it open, or left it): ``mode=ro``, which joins its
  shared index (SQLite reads a ``-shm`` it may not write from private memory);
- an empty file: an empty ledger, built in memory (the file is never written);
- a ledger at an older schema cannot be migrated here: refused, saying so.

The store refuses every write (``SQLiteEventStore._writing``).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse

from ctxledger.errors import StoreError

__all__ = [
    "READ_ONLY_WRITE",
    "connect_read_only",
    "is_writable",
    "read_only_target",
    "refuse_old_schema",
    "refuse_unwritable",
]

#: what a write on a read-only store says (after "the ledger <path> ")
READ_ONLY_WRITE = (
    "is open read-only (a read command, or a file or folder this process cannot write): "
    "nothing was written; run the writing command where the ledger can be written"
)


def is_writable(path: str) -> bool:
    """Whether this process may write the ledger at `path`, its folder (the ``-wal``,
    ``-shm`` and lock files are made there) and the ``-wal`` / ``-shm`` already there.
    ``os.access`` answers for the real user and sees read-only mounts (EROFS)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not (os.access(path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK)):
        return False
    return all(os.access(path + s, os.W_OK) for s in ("-wal", "-shm") if os.path.lexists(path + s))


def _size(path: str) -> int:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def read_only_target(path: str) -> str | None:
    """The SQLite URI that reads `path` writing nothing, or None for an empty file (read
    as an empty ledger). StoreError for a ledger whose write-ahead log cannot be read
    without writing; a missing file is the caller's to refuse."""
    if _size(path) == 0 and not os.path.lexists(path + "-wal"):
        return None
    uri = "file:" + urllib.parse.quote(os.fsencode(os.path.abspath(path)))
    if os.path.lexists(path + "-shm"):
        return uri + "?mode=ro"
    if _size(path + "-wal") > 0:
        raise StoreError(
            f"the ledger {path} has a write-ahead log ({path}-wal) not yet merged into it and "
            f"no {path}-shm: it cannot be read without writing; open it once where it can be "
            "written (`ctxledger upgrade`), or copy the ledger and its -wal to such a folder"
        )
    return uri + "?immutable=1"


def refuse_old_schema(path: str, pending: list[str]) -> None:
    """StoreError when a ledger opened read-only needs `pending` migrations first."""
    if pending:
        raise StoreError(
            f"the ledger {path} was written by an older ctxledger (migration {pending[0]!r} "
            "is not applied) and is open read-only: it cannot be migrated here; run "
            "`ctxledger upgrade` on it where it can be written, or on a copy; nothing was written"
        )


def connect_read_only(path: str) -> sqlite3.Connection:
    """A connection reading `path` (see the module docstring); ``":memory:"`` for an
    empty file, whose caller creates the empty schema in that memory."""
    target = read_only_target(path)
    if target is None:
        return sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    return sqlite3.connect(target, uri=True, isolation_level=None, check_same_thread=False)


def refuse_unwritable(path: str) -> None:
    """StoreError, before anything is touched, when an open for writing finds a ledger
    file this process cannot write (SQLite would open it read-only and fail at the first
    write, after the file was made private and a lock file made beside it)."""
    if os.path.isfile(path) and not is_writable(path):
        raise StoreError(
            f"the ledger {path} cannot be written by this user (a read-only file, folder or "
            "medium): a command that writes needs it writable; commands that only read "
            "open it read-only; nothing was written"
        )
