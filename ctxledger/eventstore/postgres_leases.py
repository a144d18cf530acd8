"""Leases on a PostgreSQL ledger: session-level advisory locks (see :mod:`.leases`).

``try_lease(key)`` takes ``pg_try_advisory_lock`` of a 64-bit hash of `key` within the
ledger's schema (advisory locks are database-wide) on a connection of a small pool of
its own, and keeps that connection until the lease is released. The pool is separate
from the store's main one, so a lease holder can always append; a process already
holding `size` leases gets None (it waits) for the next one. A holder whose
connection dies loses the lock with it, and a killed process's connections close,
so the server drops its locks: a lease never outlives its holder.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import psycopg
import psycopg_pool

from ctxledger.eventstore import postgres_schema as q
from ctxledger.eventstore.leases import Release

Conn = psycopg.Connection[tuple[Any, ...]]


class PgLeases:
    """The advisory-lock leases of one store (thread-safe)."""

    def __init__(
        self, conninfo: str, kwargs: Mapping[str, Any], schema: str, *, size: int, timeout: float
    ) -> None:
        self._conninfo, self._kwargs, self._schema = conninfo, dict(kwargs), schema
        self._size, self._timeout = size, timeout
        self._mutex = threading.Lock()
        self._pool: psycopg_pool.ConnectionPool[Conn] | None = None
        self._held = 0
        self._closed = False

    def key(self, key: str) -> int:
        return q.lock_key(self._schema, "lease:" + key)

    def try_lease(self, key: str) -> Release | None:
        """Raises psycopg.Error or PoolTimeout when the server cannot be reached."""
        with self._mutex:
            if self._held >= self._size:
                return None
            self._held += 1
        try:
            release = self._try(self.key(key))
        except BaseException:
            self._done()
            raise
        if release is None:
            self._done()
        return release

    def _try(self, lock: int) -> Release | None:
        pool = self._connections()
        for attempt in (0, 1):
            conn = pool.getconn()
            try:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
            except psycopg.Error as exc:
                conn.close()  # broken or in an unknown state: the pool replaces it
                pool.putconn(conn)
                if attempt == 0 and isinstance(exc, psycopg.OperationalError):
                    continue  # a server restart: once more on a fresh connection
                raise
            if not (row and row[0]):
                pool.putconn(conn)
                return None
            return self._releaser(pool, conn, lock)
        raise AssertionError("unreachable")

    def _releaser(self, pool: psycopg_pool.ConnectionPool[Conn], conn: Conn, lock: int) -> Release:
        done = threading.Lock()

        def release() -> None:
            if not done.acquire(blocking=False):
                return
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
            except psycopg.Error:
                conn.close()  # the lock went with the connection (or goes with it now)
            finally:
                pool.putconn(conn)  # a closed pool closes it
                self._done()

        return release

    def _done(self) -> None:
        with self._mutex:
            self._held -= 1

    def _connections(self) -> psycopg_pool.ConnectionPool[Conn]:
        """The pool, opened on first use (most processes never take a lease)."""
        with self._mutex:
            if self._closed:
                raise psycopg.OperationalError("the store is closed")
            if self._pool is None:
                self._pool = psycopg_pool.ConnectionPool(
                    self._conninfo,
                    kwargs=self._kwargs,
                    min_size=0,
                    max_size=self._size,
                    timeout=self._timeout,
                    open=True,
                    name=f"ctxledger-leases-{self._schema}",
                )
            return self._pool

    def close(self) -> None:
        """Close the pool: leases still held are dropped with their connections."""
        with self._mutex:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


__all__ = ["PgLeases"]
