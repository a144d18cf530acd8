"""Derived values of the PostgreSQL store: migration ``0007_derived_values`` and the
store's ``get_derived`` / ``put_derived`` (see :mod:`ctxledger.eventstore.derived`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from ctxledger.eventstore.postgres_schema import PG_MIGRATIONS

__all__ = ["PgDerived"]

Conn = psycopg.Connection[tuple[object, ...]]

_GET = "SELECT value FROM derived WHERE ref = %s AND kind = %s AND version = %s"
_PUT = (
    "INSERT INTO derived (ref, kind, version, value) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (ref, kind, version) DO UPDATE SET value = EXCLUDED.value"
)


@PG_MIGRATIONS("0007_derived_values")
def _add_derived_values(conn: Conn) -> None:
    """``derived``: values computed from a message's content (SQLite's 0003)."""
    conn.execute(
        "CREATE TABLE derived (ref text NOT NULL, kind text NOT NULL, version text NOT NULL,"
        " value bytea NOT NULL, PRIMARY KEY (ref, kind, version))"
    )


class PgDerived:
    """``get_derived`` / ``put_derived`` on the store's pool (``_run``, ``_fetch``)."""

    _run: Callable[[str, Callable[[Conn], Any]], Any]
    _fetch: Callable[[str, str, Sequence[Any]], list[tuple[Any, ...]]]

    def get_derived(self, ref: str, kind: str, version: str) -> bytes | None:
        """The value stored under (ref, kind, version), or None (read-only)."""
        rows = self._fetch("read a derived value", _GET, (ref, kind, version))
        return bytes(rows[0][0]) if rows else None

    def put_derived(self, ref: str, kind: str, version: str, value: bytes) -> None:
        """Store `value` under (ref, kind, version), replacing one there (an upsert)."""
        self._run(
            "store a derived value", lambda conn: conn.execute(_PUT, (ref, kind, version, value))
        )
