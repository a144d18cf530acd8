"""The sqlite3 exceptions of a SQLite ledger turned into the ctxledger error a user can
act on: a full disk, a lock held too long, a damaged file, a permission or a medium."""

from __future__ import annotations

import sqlite3

import msgspec

from ctxledger.errors import CtxLedgerError, IntegrityError, StorageFullError, StoreError
from ctxledger.eventstore.rows import VerifyReport
from ctxledger.eventstore.space import PAGE_SIZE, out_of_space

__all__ = ["checked_tail", "numbered", "translated", "undecoded"]

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
        return StoreError(
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


def checked_tail(path: str, tail: tuple[object, ...] | None) -> tuple[int, str] | None:
    """The log's last row (seq, hash) as an append reads it, None for an empty log;
    IntegrityError when they are not an integer and a text: a damaged file (a schema
    whose bytes changed so that seq is no longer the row id reads NULL seqs), onto which
    nothing is appended (it was a TypeError traceback, session 39)."""
    if tail is None:
        return None
    seq, stored = tail[0], tail[1]
    if isinstance(seq, int) and not isinstance(seq, bool) and isinstance(stored, str):
        return seq, stored
    raise IntegrityError(
        f"could not append in {path}: the file is damaged or inconsistent (the log's last "
        f"row reads seq {seq!r}); restore it from a backup (`ctxledger verify` names "
        "what it finds); nothing was written"
    )


#: a row whose seq is no integer; the walk (``seq >= ?``) never sees one
_UNNUMBERED = "SELECT 1 FROM events WHERE typeof(seq) != 'integer' LIMIT 1"


def numbered(conn: sqlite3.Connection, report: VerifyReport) -> VerifyReport:
    """`report` of a walk of the log, failed when the log holds a row whose seq is not
    an integer, which the walk by seq never read: a schema whose bytes changed so that
    seq is no longer the row id reads every seq NULL, and a walk of nothing was "ok"
    where no anchor said otherwise (session 39)."""
    if not report.ok or conn.execute(_UNNUMBERED).fetchone() is None:
        return report
    return msgspec.structs.replace(
        report,
        ok=False,
        problem="the log holds rows whose seq is not a number: the file is damaged "
        "(its schema changed); restore it from a backup",
    )
