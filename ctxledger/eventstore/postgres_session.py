"""How each connection of a PostgreSQL ledger is set up: its schema and durability,
behind a connection pooler too (README: PostgreSQL for fleets).

The ledger's ``search_path`` and ``synchronous_commit`` travel twice: as the startup
packet's ``options`` (so a ``DISCARD ALL`` on a direct connection resets to them), and as
``SET``s sent with :func:`set_up`'s check, one round trip. PgBouncer refuses the
``options`` startup parameter (``unsupported startup parameter: options``): the store
then connects without it (:func:`connect`) and relies on the ``SET``s; where a pooler
drops it without a word (``ignore_startup_parameters = options``) the ``SET``s still
hold, and :func:`check_schema` refuses any connection whose schema is not the ledger's,
so ``?schema=`` is never dropped silently.

A pooler in transaction mode hands each transaction a server session other clients
used: a statement the pool's :func:`configure` prepares may already be there, prepared
by another store (perhaps of another schema). The store then never uses prepared
statements (``Appender.plain``), so the collision is no error. Search path, ``LISTEN``
and leases are still session state there, so the store's open refuses a connection
whose statements reach different server sessions (:func:`check_session`), and keeps its
first connection open until the pool's first is set up (:class:`PoolSetUp`): two client
connections open at once share a server session only under transaction (or statement)
pooling, so an open there is refused whatever the pooler's load.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import psycopg.errors
import psycopg_pool
from psycopg import sql

from ctxledger.errors import ConnectionLost, StoreError
from ctxledger.eventstore import postgres_schema as q
from ctxledger.eventstore.postgres_append import Appender, prepare
from ctxledger.eventstore.postgres_errors import GRANTS
from ctxledger.eventstore.postgres_url import NoLedger

__all__ = ["PoolSetUp", "check_schema", "check_session", "connect", "open_schema", "set_up"]

Conn = psycopg.Connection[tuple[Any, ...]]

#: PgBouncer's refusal of a startup parameter it does not know
_REFUSED = "unsupported startup parameter"
#: the open's connection asks its server process id again this often at the end
_RECHECKS = 3


def connect(conninfo: str, kwargs: dict[str, Any]) -> Conn:
    """A connection with `kwargs`; when the server (a pooler) refuses the ``options``
    startup parameter, one without it, and `kwargs` lose it for every later connection
    (the store's pool, leases and listener are made after its first connection)."""
    try:
        return psycopg.connect(conninfo, **kwargs)
    except psycopg.OperationalError as exc:
        if "options" not in kwargs or _REFUSED not in str(exc):
            raise
    del kwargs["options"]
    return psycopg.connect(conninfo, **kwargs)


def set_up(conn: Conn, schema: str, commit: str) -> tuple[str | None, int]:
    """Set the ledger's schema and durability on `conn` (one round trip); returns the
    connection's ``current_schema()`` after (None while the schema does not exist) and
    its server process id. `schema` is quoted (``user``, ``order``: reserved words);
    `commit` is ``on`` or ``off``."""
    cur = conn.execute(
        sql.SQL(
            "SET search_path TO {}; SET synchronous_commit TO {}; "
            "SELECT current_schema(), pg_backend_pid()"
        ).format(sql.Identifier(schema), sql.SQL(commit))
    )
    while cur.nextset():
        pass
    row = cur.fetchone()
    assert row is not None
    return (None if row[0] is None else str(row[0])), int(row[1])


def open_schema(conn: Conn, schema: str, commit: str, where: str, *, create: bool) -> int:
    """The store's first connection: set up (:func:`set_up`), the schema created if
    missing and `create`, the session checked (:func:`check_session`) before any table is
    read or made. Without `create`, a database and schema with no ledger is
    :class:`NoLedger`, nothing created (the same connection: no second connect).
    Returns the connection's server process id."""
    found, pid = set_up(conn, schema, commit)
    if found != schema:  # no such schema yet (or no USAGE on it, or a pooler)
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        if exists.fetchone() is None:
            if not create:
                raise NoLedger(where)
            q.create_schema(conn, schema)
    check_session(conn, pid, schema, where)
    if not create:
        found_table = conn.execute("SELECT to_regclass('_migrations')").fetchone()
        if found_table is None or found_table[0] is None:
            raise NoLedger(where)
    return pid


def check_session(conn: Conn, pid: int, schema: str, where: str) -> None:
    """After :func:`set_up` (and the schema's creation), in a round trip of its own: the
    same server session, and the ledger's schema first on its path. A pooler in
    transaction mode hands the next statement another server session, whose search path
    is another client's: refused (when it is seen), before any table is read or made."""
    found = conn.execute("SELECT current_schema(), pg_backend_pid()").fetchone()
    assert found is not None
    if int(found[1]) != pid:
        raise _pooled(where, "its statements reach different server sessions")
    check_schema(found[0], schema, where)


def _pooled(where: str, seen: str) -> StoreError:
    return StoreError(
        f"could not open the ledger in {where}: {seen} (a pooler in transaction mode, "
        "PgBouncer pool_mode = transaction, which is not supported); the ledger's schema, "
        "durability, leases and follow() are session state: use session pooling "
        "(pool_mode = session) or connect to the server directly"
    )


def check_schema(found: str | None, schema: str, where: str) -> None:
    """Refuse a connection whose current schema is not the ledger's: a role without
    ``USAGE`` on it, or a pooler that does not keep the session's ``SET search_path``
    (whose tables would be read, or created, in another schema)."""
    if found != schema:
        raise StoreError(
            f"could not open the ledger in {where}: no schema {schema} on the connection's "
            f"search path (it reads {found or 'none'}); the role connecting needs {GRANTS}; "
            "a pooler between ctxledger and the server (PgBouncer) must keep the session's "
            "`SET search_path`: use session pooling (pool_mode = session)"
        )


class PoolSetUp:
    """The store pool's setup of each new connection (its ``configure``): schema and
    durability (checked), then the append's prepared statements. One already there (a
    server session another client prepared on: a pooler in transaction mode) may be
    another store's: the store's appends and reads then use plain statements only.

    The open's connection (`opener`, server process `pid`) stays open until the pool's
    first connection is set up (:meth:`opened`): a pool connection on the same server
    session, or an opener moved to another one, is a pooler in transaction mode, refused.
    The last refusal is kept for the pool's timeout to name (:meth:`timed_out`)."""

    def __init__(self, schema: str, commit: str, where: str, appender: Appender) -> None:
        self.schema, self.commit, self.where, self.appender = schema, commit, where, appender
        self.opener: tuple[Conn, int] | None = None
        self.compared = threading.Event()
        self.refused: StoreError | None = None

    def __call__(self, conn: Conn) -> None:
        opener = None if self.compared.is_set() else self.opener
        opening = opener is not None
        try:
            found, pid = set_up(conn, self.schema, self.commit)
            if opener is not None:
                try:
                    if pid == opener[1]:
                        raise _pooled(self.where, "two of its connections share a server session")
                finally:
                    self.compared.set()
            check_schema(found, self.schema, self.where)
        except StoreError as exc:
            self.refused = exc
            raise
        if self.appender.plain or opening:  # (opening: the tables may not be made yet; an
            return  # append prepares its statements where they are missing: Appender.held)
        try:
            prepare(conn)
        except psycopg.errors.DuplicatePreparedStatement:
            self.appender.plain = True

    def pool(
        self, conninfo: str, kwargs: dict[str, Any], size: int, timeout: float
    ) -> psycopg_pool.ConnectionPool[Conn]:
        """The store's pool, open, its first connection compared (:meth:`opened`); closed
        again when that fails. `opener` is forgotten either way (the caller closes it)."""
        pool: psycopg_pool.ConnectionPool[Conn] = psycopg_pool.ConnectionPool(
            conninfo,
            kwargs=kwargs,
            min_size=1,
            max_size=size,
            timeout=timeout,
            open=True,
            name=f"ctxledger-{self.schema}",
            configure=self,
        )
        try:
            self.opened(timeout)
        except BaseException:
            pool.close()
            raise
        finally:
            self.opener = None
        return pool

    def opened(self, timeout: float) -> None:
        """Wait (up to `timeout` s) for the pool's first connection to be compared with the
        open's (still open), then check the open's is on its server session still."""
        assert self.opener is not None
        conn, pid = self.opener
        if not self.compared.wait(timeout):
            raise ConnectionLost(
                f"could not open the ledger in {self.where}: no pool connection within "
                f"{timeout:g} s{self._why()}"
            )
        if self.refused is not None:
            raise self.refused
        for _ in range(_RECHECKS):  # (each its own transaction: a busy pooler moves it)
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            if row is None or int(row[0]) != pid:
                raise _pooled(self.where, "its statements reach different server sessions")

    def timed_out(self, error: ConnectionLost) -> ConnectionLost:
        """`error` (the pool gave no connection in time) with the last refusal's reason."""
        return ConnectionLost(f"{error}{self._why()}") if self.refused else error

    def _why(self) -> str:
        return f" (the last new connection was refused: {self.refused})" if self.refused else ""
