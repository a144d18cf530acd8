"""Leases on a PostgreSQL ledger: session-level advisory locks (see :mod:`.leases`).

``try_lease(key)`` takes ``pg_try_advisory_lock`` of a 64-bit hash of `key` within the
ledger's schema (advisory locks are database-wide) on one connection of its own, which
holds every lease the process takes: session-level advisory locks stack on a
connection, so a process may hold any number of leases (a server proxying many
sessions at once, each turn holding one, plus compactions) with one connection. The
connection is separate from the store's pool, so a lease holder can always append.
The server would grant a lock its holder's connection already has, so the process
keeps the set of keys it holds and refuses a second holder itself. A holder whose
connection dies loses its locks with it, and a killed process's connection closes, so
the server drops its locks: a lease never outlives its holder.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import psycopg

from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore.leases import Release

Conn = psycopg.Connection[tuple[Any, ...]]


class PgLeases:
    """The advisory-lock leases of one store (thread-safe)."""

    def __init__(self, conninfo: str, kwargs: Mapping[str, Any], schema: str) -> None:
        """`kwargs` are the store's connection options (autocommit, timeouts, search path)."""
        self._conninfo, self._kwargs, self._schema = conninfo, dict(kwargs), schema
        self._mutex = threading.Lock()  # guards the connection and the held keys
        self._conn: Conn | None = None
        self._held: set[int] = set()
        self._closed = False

    def key(self, key: str) -> int:
        return q.lock_key(self._schema, "lease:" + key)

    def try_lease(self, key: str) -> Release | None:
        """Raises psycopg.Error when the server cannot be reached."""
        lock = self.key(key)
        with self._mutex:
            if lock in self._held:
                return None  # this process holds it (the server would grant it again)
            if not self._lock(lock):
                return None
            self._held.add(lock)
        return self._releaser(lock)

    def _lock(self, lock: int) -> bool:
        for attempt in (0, 1):
            conn = self._connection()
            try:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
                return bool(row and row[0])
            except psycopg.Error as exc:
                self._drop()  # broken: its locks (if any) went with it
                if attempt == 0 and isinstance(exc, psycopg.OperationalError):
                    continue  # a server restart: once more on a fresh connection
                raise
        raise AssertionError("unreachable")

    def _releaser(self, lock: int) -> Release:
        conn = self._conn

        def release() -> None:
            with self._mutex:
                if lock not in self._held:
                    return
                self._held.discard(lock)
                if conn is not self._conn or conn is None:
                    return  # the connection it was taken on is gone, and the lock with it
                try:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
                except psycopg.Error:
                    self._drop()

        return release

    def _connection(self) -> Conn:
        if self._closed:
            raise psycopg.OperationalError("the store is closed")
        if self._conn is None or self._conn.closed:
            self._held.clear()  # a new connection holds none of the old locks
            self._conn = psycopg.connect(self._conninfo, **self._kwargs)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._held.clear()
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close the connection: leases still held are dropped with it."""
        with self._mutex:
            self._closed = True
            self._drop()
