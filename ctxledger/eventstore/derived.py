"""Derived values: data computed from a message's content, kept to save the work.

A side table ``derived`` of ``(ref, kind, version) -> value``: ``ref`` is a message
content's blob ref (sha256 of its UTF-8), ``kind`` what was computed (``facts/…``), and
``version`` everything the value depends on besides the content (for facts: the
extraction code's fingerprint, see :mod:`ctxledger.compressor.factstore`). Like a
checkpoint, a value is not an event: it is outside the hash chain, a copy (``ctxledger
migrate``) leaves it behind, and a value that is missing, of another version or damaged
is recomputed as if the table were empty. Reads never write. What a read trusts,
``verify --derived`` checks: a value at the current version that differs from its recomputation
fails it (:func:`ctxledger.ledger.derived.differing_values`; ``ctxledger upgrade``
replaces it).

The table is a cache, so it is **not** a versioned migration: the first store creates it
(``CREATE TABLE IF NOT EXISTS``, in the writer's transaction) and a read that finds no
table finds no value. An older ctxledger ignores a table it does not know (it refuses a
ledger with an unknown *migration*), and a read-only open needs nothing applied.
A store replaces the rows of other versions of the same (ref, kind): one row each.

A mixin of :class:`~ctxledger.eventstore.sqlite.SQLiteEventStore`; the PostgreSQL one is
:mod:`ctxledger.eventstore.postgres_derived`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

__all__ = ["STORED_MIN_CHARS", "SQLiteDerived"]

#: a string content at least this long has its values stored when appended: ~8 ms of
#: fact extraction (~30 ms per MB), where a cold what-if's own work (~120 ms for 200
#: messages) starts to feel it, and a lookup costs ~0.1 ms
STORED_MIN_CHARS = 256 * 1024

CREATE_DERIVED = (
    "CREATE TABLE IF NOT EXISTS derived (ref TEXT NOT NULL, kind TEXT NOT NULL,"
    " version TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (ref, kind, version))"
)
GET_DERIVED = "SELECT value FROM derived WHERE ref = ? AND kind = ? AND version = ?"
DROP_OTHER_VERSIONS = "DELETE FROM derived WHERE ref = ? AND kind = ? AND version <> ?"
PUT_DERIVED = "INSERT OR REPLACE INTO derived (ref, kind, version, value) VALUES (?, ?, ?, ?)"


class SQLiteDerived:
    """``get_derived`` / ``put_derived`` of the SQLite store (its ``_conn``, ``_lock``,
    ``_errors``, ``_writing``)."""

    _conn: sqlite3.Connection
    _lock: threading.RLock
    _errors: Callable[[str], AbstractContextManager[None]]
    _writing: Callable[[], AbstractContextManager[None]]

    def get_derived(self, ref: str, kind: str, version: str) -> bytes | None:
        """The value stored under (ref, kind, version), or None (read-only). A ledger no
        value was stored in has no table: None."""
        with self._lock, self._errors("read a derived value"):
            try:
                row = self._conn.execute(GET_DERIVED, (ref, kind, version)).fetchone()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                return None
        return bytes(row[0]) if row is not None else None

    def put_derived(self, ref: str, kind: str, version: str, value: bytes) -> None:
        """Store `value` under (ref, kind, version), replacing it and the rows of other
        versions of (ref, kind); the table is created on the first store. One transaction."""
        with self._lock, self._errors("store a derived value"), self._writing():
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(CREATE_DERIVED + " WITHOUT ROWID")
                conn.execute(DROP_OTHER_VERSIONS, (ref, kind, version))
                conn.execute(PUT_DERIVED, (ref, kind, version, value))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
