"""The sqlite3 exceptions of a SQLite ledger turned into the ctxledger error a user can
act on: a full disk, a lock held too long, a damaged file, a permission or a medium."""

from __future__ import annotations

import sqlite3

from ctxledger.errors import (
    CtxLedgerError,
    IntegrityError,
    StorageFullError,
    StoreBusy,
    StoreError,
)
from ctxledger.eventstore.space import PAGE_SIZE, out_of_space

__all__ = ["check_numbered", "translated", "undecoded"]

# primary result codes (sqlite3 reports extended codes; the low byte is the primary one)
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR = 5, 6, 8, 10
_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 11, 13, 14, 26


def translated(exc: sqlite3.Error, where: str, path: str, busy_timeout_ms: int) -> CtxLedgerError:
    """The error to raise for `exc`; `where` ("could not … in <path>") starts its line."""
    code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code == _SQLITE_FULL or (code == _SQLITE_IOERR and out_of_space(path, 2 * PAGE_SIZE + 64)):
        return StorageFullError(
            f"{where}: the database or disk is full (max_page_count, free space or the "
            "file-size limit); nothing from this operation was written: free disk space "
            "(or raise max_page_count / ulimit -f) and retry"
        )
    if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
        return StoreBusy(
            f"{where}: another writer held the lock for more than {busy_timeout_ms} ms; "
            "retry, or open the store with a larger busy_timeout_ms"
        )
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or isinstance(exc, sqlite3.IntegrityError):
        return IntegrityError(
            f"{where}: the file is damaged or inconsistent ({exc}); restore it from a "
            "backup (`ctxledger verify` or Ledger.verify() names the first bad event "
            "while the file still opens)"
        )
    if code in (_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN):
        return StoreError(f"{where}: {exc}; check the disk and the file's permissions")
    return StoreError(f"{where}: {exc}")


def undecoded(exc: UnicodeDecodeError) -> sqlite3.DatabaseError:
    """The SQLite error whose message Python could not decode (it quotes bytes of a
    damaged schema): a damaged file, its message decoded with replacements."""
    raw = exc.object if isinstance(exc.object, bytes) else str(exc).encode()
    error = sqlite3.DatabaseError(raw.decode("utf-8", "replace"))
    error.sqlite_errorcode = _SQLITE_CORRUPT
    return error


#: whether the file's own log (``main``: an older ledger read as it is shadows it with a
#: TEMP view) still numbers its rows by the row id
_SEQ_IS_ROWID = (
    "SELECT pk = 1 AND upper(type) = 'INTEGER' FROM pragma_table_info('events', 'main') "
    "WHERE name = 'seq'"
)


def check_numbered(conn: sqlite3.Connection, path: str) -> None:
    """IntegrityError when the log's seq is no longer its row id: a schema whose bytes
    changed but still parses reads every seq NULL, so every read by seq found an empty
    log, an append a TypeError and a verify with no anchor "ok" (session 39). Checked
    once when the ledger opens, before anything reads or writes it."""
    row = conn.execute(_SEQ_IS_ROWID).fetchone()
    if row is not None and not row[0]:
        raise IntegrityError(
            f"{path} is damaged: the log's seq is not a number (its schema changed); "
            "restore it from a backup (`ctxledger verify` of the backup says whether it "
            "is sound); nothing was written"
        )
