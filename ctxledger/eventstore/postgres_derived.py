"""Derived values of the PostgreSQL store: ``get_derived`` / ``put_derived`` (see
:mod:`ctxledger.eventstore.derived`). As in SQLite the table is a cache outside the
versioned migrations: the first store creates it, a read finding no table finds no value,
and an older ctxledger sharing the database ignores it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import psycopg
import psycopg.errors

__all__ = ["PgDerived"]

Conn = psycopg.Connection[tuple[object, ...]]

_CREATE = (
    "CREATE TABLE IF NOT EXISTS derived (ref text NOT NULL, kind text NOT NULL,"
    " version text NOT NULL, value bytea NOT NULL, PRIMARY KEY (ref, kind, version))"
)
_GET = "SELECT value FROM derived WHERE ref = %s AND kind = %s AND version = %s"
_DROP = "DELETE FROM derived WHERE ref = %s AND kind = %s AND version <> %s"
_PUT = (
    "INSERT INTO derived (ref, kind, version, value) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (ref, kind, version) DO UPDATE SET value = EXCLUDED.value"
)
_ANY = "SELECT EXISTS (SELECT 1 FROM derived)"
# octet_length of a TOASTed value reads its header, never its chunks (as SQLite's length)
_LONG_BLOBS = "SELECT ref FROM blobs WHERE octet_length(data) >= %s"
_LONG_PAYLOAD = "SELECT EXISTS (SELECT 1 FROM events WHERE octet_length(payload) >= %s)"
#: what a concurrent ``CREATE TABLE IF NOT EXISTS`` of the same table can raise (the
#: table's row type colliding in pg_type is a DuplicateObject: "type ... already exists")
_RACED = (
    psycopg.errors.UniqueViolation,
    psycopg.errors.DuplicateTable,
    psycopg.errors.DuplicateObject,
)


class PgDerived:
    """``get_derived`` / ``put_derived`` and the
    :class:`~ctxledger.eventstore.longscan.LongContentScan` on the store's pool (``_run``,
    ``_fetch``)."""

    _run: Callable[[str, Callable[[Conn], Any]], Any]
    _fetch: Callable[[str, str, Sequence[Any]], list[tuple[Any, ...]]]

    def get_derived(self, ref: str, kind: str, version: str) -> bytes | None:
        """The value stored under (ref, kind, version), or None (read-only; no table yet:
        None)."""

        def get(conn: Conn) -> bytes | None:
            try:
                with conn.transaction():
                    row = conn.cursor(binary=True).execute(_GET, (ref, kind, version)).fetchone()
            except psycopg.errors.UndefinedTable:
                return None
            return bytes(cast("bytes", row[0])) if row is not None else None

        found: bytes | None = self._run("read a derived value", get)
        return found

    def put_derived(self, ref: str, kind: str, version: str, value: bytes) -> None:
        """Store `value` under (ref, kind, version), replacing it and the rows of other
        versions of (ref, kind); the first store creates the table (another writer
        creating it at the same moment: tried once more)."""

        def put(conn: Conn) -> None:
            for attempt in (0, 1):
                try:
                    with conn.transaction():
                        conn.execute(_CREATE)
                        conn.execute(_DROP, (ref, kind, version))
                        conn.execute(_PUT, (ref, kind, version, value))
                    return
                except _RACED:
                    if attempt:
                        raise

        self._run("store a derived value", put)

    def long_blob_refs(self, min_size: int) -> set[str]:
        """The refs of the blobs holding at least `min_size` bytes (read-only)."""
        return {str(row[0]) for row in self._fetch("list the long blobs", _LONG_BLOBS, (min_size,))}

    def has_long_payload(self, min_size: int) -> bool:
        """Whether any row's payload holds at least `min_size` bytes (read-only)."""
        return bool(self._fetch("look for long payloads", _LONG_PAYLOAD, (min_size,))[0][0])

    def has_derived(self) -> bool:
        """Whether any derived value is stored (read-only; no table yet: False)."""

        def any_row(conn: Conn) -> bool:
            try:
                with conn.transaction():
                    return bool(conn.execute(_ANY).fetchone()[0])  # type: ignore[index]
            except psycopg.errors.UndefinedTable:
                return False

        found: bool = self._run("look for derived values", any_row)
        return found
