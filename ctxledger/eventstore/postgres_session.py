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
whose statements it sees reach different server sessions (:func:`check_session`); with
one server connection behind the pooler it cannot see it (the README: do not use it).
"""

from __future__ import annotations

from typing import Any

import psycopg
import psycopg.errors
from psycopg import sql

from ctxledger.errors import StoreError
from ctxledger.eventstore import postgres_schema as q
from ctxledger.eventstore.postgres_append import Appender, prepare
from ctxledger.eventstore.postgres_errors import GRANTS
from ctxledger.eventstore.postgres_url import NoLedger

__all__ = ["check_schema", "check_session", "configure", "connect", "open_schema", "set_up"]

Conn = psycopg.Connection[tuple[Any, ...]]

#: PgBouncer's refusal of a startup parameter it does not know
_REFUSED = "unsupported startup parameter"


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


def open_schema(conn: Conn, schema: str, commit: str, where: str, *, create: bool) -> None:
    """The store's first connection: set up (:func:`set_up`), the schema created if
    missing and `create`, the session checked (:func:`check_session`) before any table is
    read or made. Without `create`, a database and schema with no ledger is
    :class:`NoLedger`, nothing created (the same connection: no second connect)."""
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


def check_session(conn: Conn, pid: int, schema: str, where: str) -> None:
    """After :func:`set_up` (and the schema's creation), in a round trip of its own: the
    same server session, and the ledger's schema first on its path. A pooler in
    transaction mode hands the next statement another server session, whose search path
    is another client's: refused (when it is seen), before any table is read or made."""
    found = conn.execute("SELECT current_schema(), pg_backend_pid()").fetchone()
    assert found is not None
    if int(found[1]) != pid:
        raise StoreError(
            f"could not open the ledger in {where}: its statements reach different server "
            "sessions (a pooler in transaction mode, PgBouncer pool_mode = transaction); "
            "the ledger's schema, leases and follow() are session state: use session "
            "pooling (pool_mode = session) or connect to the server directly"
        )
    check_schema(found[0], schema, where)


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


def configure(conn: Conn, schema: str, commit: str, where: str, appender: Appender) -> None:
    """Set up a new pool connection: schema and durability (checked), then the append's
    prepared statements. One already there (a server session another client prepared
    on: a pooler in transaction mode) may be another store's: the store's appends and
    reads then use plain statements only."""
    check_schema(set_up(conn, schema, commit)[0], schema, where)
    if appender.plain:
        return
    try:
        prepare(conn)
    except psycopg.errors.DuplicatePreparedStatement:
        appender.plain = True
