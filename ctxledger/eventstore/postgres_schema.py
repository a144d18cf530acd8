"""Schema, migrations and SQL text of the PostgreSQL event store.

The tables mirror the SQLite ones (:mod:`ctxledger.eventstore.migrations`):
``events`` (``seq`` is the global order, ``UNIQUE (event_id)`` and
``UNIQUE (stream_id, version)`` are the backstops of idempotency and concurrency),
``streams``, ``blobs`` (content-addressed) and ``checkpoints``; plus ``ledger_meta``,
which names the ledger with a random id (local side files, such as the recall index,
are keyed by it).

Migrations are registered by decorator and run one transaction each, together with
the row recording them in ``_migrations``, under a transaction-scoped advisory lock:
several processes opening a new ledger at once apply each migration exactly once.
Migrations are append-only: never edit one that has shipped, add the next one.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable

import psycopg
from psycopg import sql

from ctxledger.errors import StoreError

MigrationFn = Callable[[psycopg.Connection[tuple[object, ...]]], None]


def lock_key(schema: str, purpose: str) -> int:
    """A signed 64-bit advisory-lock key for `purpose` in `schema` (advisory locks are database-wide)."""
    digest = hashlib.sha256(f"ctxledger:{purpose}:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def notify_channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel announcing appends to the ledger in `schema`."""
    return "ctxledger_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


class PgMigrations:
    """An ordered set of named migrations; register with ``@migrations("0001_name")``."""

    def __init__(self) -> None:
        self._steps: list[tuple[str, MigrationFn]] = []

    def __call__(self, name: str) -> Callable[[MigrationFn], MigrationFn]:
        def register(fn: MigrationFn) -> MigrationFn:
            if any(existing == name for existing, _ in self._steps):
                raise ValueError(f"migration {name!r} is registered twice")
            self._steps.append((name, fn))
            return fn

        return register

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._steps]

    def applied(self, conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
        """Names recorded in the connection's schema, oldest first (read-only)."""
        found = conn.execute("SELECT to_regclass('_migrations') IS NOT NULL").fetchone()
        if not found or not found[0]:
            return []
        return [
            str(r[0])
            for r in conn.execute("SELECT name FROM _migrations ORDER BY applied_at, name")
        ]

    def apply(self, conn: psycopg.Connection[tuple[object, ...]], schema: str) -> list[str]:
        """Apply every pending migration, one transaction each; returns the names applied.

        `conn` must be in autocommit mode with `schema` first on its search path.
        Raises StoreError when the ledger records a migration this code does not know.
        """
        applied = self.applied(conn)
        unknown = [name for name in applied if name not in self.names]
        if unknown:
            raise StoreError(
                f"this ledger was migrated by a newer ctxledger (unknown migration {unknown[0]!r}); "
                "upgrade ctxledger to open it"
            )
        if all(name in applied for name in self.names):
            return []
        done: list[str] = []
        for name, fn in self._steps:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema, "migrate"),))
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS _migrations"
                    " (name text PRIMARY KEY, applied_at timestamptz NOT NULL)"
                )
                if conn.execute("SELECT 1 FROM _migrations WHERE name = %s", (name,)).fetchone():
                    continue  # another process applied it meanwhile
                fn(conn)
                conn.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (%s, %s)",
                    (name, datetime.datetime.now(datetime.UTC)),
                )
                done.append(name)
        return done


def create_schema(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> None:
    """CREATE SCHEMA IF NOT EXISTS, serialized (concurrent creations race on the catalog)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema, "schema"),))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))


PG_MIGRATIONS = PgMigrations()


@PG_MIGRATIONS("0001_event_log")
def _create_event_log(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """The log, its streams, content-addressed blobs, checkpoints and the ledger's id.

    ``events.payload`` is ``bytea`` (the exact bytes that were hashed); ``seq`` is
    assigned by the store under the append lock, never by a sequence, so it is
    gapless. No foreign key from ``events`` to ``streams`` (as in SQLite): its check
    would lock the stream's row on every insert, and verify() finds an orphan row.
    ``blobs.data`` is stored uncompressed (EXTERNAL): contents are read whole or
    sliced, and compressing them costs writers.
    """
    conn.execute(
        """
        CREATE TABLE streams (
            stream_id bigint PRIMARY KEY,
            stream text NOT NULL UNIQUE,
            created_seq bigint NOT NULL
        );
        CREATE TABLE events (
            seq bigint PRIMARY KEY,
            event_id text NOT NULL,
            stream_id bigint NOT NULL,
            version bigint NOT NULL,
            kind text NOT NULL,
            schema integer NOT NULL,
            payload bytea NOT NULL,
            hash text NOT NULL,
            CONSTRAINT events_event_id_key UNIQUE (event_id),
            CONSTRAINT events_stream_version_key UNIQUE (stream_id, version)
        );
        CREATE TABLE blobs (ref text PRIMARY KEY, size bigint NOT NULL, data bytea NOT NULL);
        ALTER TABLE blobs ALTER COLUMN data SET STORAGE EXTERNAL;
        CREATE TABLE checkpoints (name text PRIMARY KEY, seq bigint NOT NULL, state bytea NOT NULL);
        CREATE TABLE ledger_meta (ledger_id text NOT NULL);
        INSERT INTO ledger_meta (ledger_id) VALUES (md5(random()::text || clock_timestamp()::text));
        """
    )


# --- SQL, built once ------------------------------------------------------------------------

TAIL = "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
LAST_SEQ = "SELECT max(seq) FROM events"
_VERSION_OF = (
    "(SELECT coalesce(max(e.version), 0) FROM events AS e WHERE e.stream_id = s.stream_id)"
)
STREAMS_NAMED = (
    f"SELECT s.stream, s.stream_id, {_VERSION_OF} FROM streams AS s WHERE s.stream = ANY(%s)"
)
STREAM_VERSION = f"SELECT {_VERSION_OF} FROM streams AS s WHERE s.stream = %s"
STREAM_ID = "SELECT stream_id FROM streams WHERE stream = %s"
STREAMS = f"SELECT s.stream, {_VERSION_OF} FROM streams AS s ORDER BY s.stream_id"
NEXT_STREAM_ID = "SELECT coalesce(max(stream_id), 0) FROM streams"
NEW_STREAMS = "INSERT INTO streams (stream_id, stream, created_seq) VALUES "
INSERT_EVENTS = (
    "INSERT INTO events (seq, event_id, stream_id, version, kind, schema, payload, hash) VALUES "
)
COPY_EVENTS = (
    "COPY events (seq, event_id, stream_id, version, kind, schema, payload, hash)"
    " FROM STDIN (FORMAT BINARY)"
)
STREAMS_OF_EVENTS = (
    "SELECT e.event_id, s.stream FROM events AS e JOIN streams AS s USING (stream_id)"
    " WHERE e.event_id = ANY(%s)"
)
READ_ALL = (
    "SELECT seq, version, schema, payload, hash FROM events"
    " WHERE seq >= %s AND seq <= %s ORDER BY seq LIMIT %s"
)
READ_STREAM = (
    "SELECT seq, version, schema, payload, hash FROM events"
    " WHERE stream_id = %s AND version >= %s AND version <= %s ORDER BY version LIMIT %s"
)
VERIFY_EVENTS = (
    "SELECT e.seq, coalesce(s.stream, ''), e.version, e.event_id, e.kind, e.schema, e.payload, e.hash"
    " FROM events AS e LEFT JOIN streams AS s USING (stream_id) WHERE e.seq >= %s ORDER BY e.seq LIMIT %s"
)
LIST_BLOBS = "SELECT ref, size FROM blobs"
KNOWN_BLOBS = "SELECT ref FROM blobs WHERE ref = ANY(%s)"
INSERT_BLOB = "INSERT INTO blobs (ref, size, data) VALUES (%s, %s, %s) ON CONFLICT (ref) DO NOTHING"
GET_BLOB = "SELECT data FROM blobs WHERE ref = %s"
HAS_BLOB = "SELECT 1 FROM blobs WHERE ref = %s"
SAVE_CHECKPOINT = (
    "INSERT INTO checkpoints (name, seq, state) VALUES (%s, %s, %s)"
    " ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, state = excluded.state"
)
LOAD_CHECKPOINT = "SELECT seq, state FROM checkpoints WHERE name = %s"
LEDGER_ID = "SELECT ledger_id FROM ledger_meta LIMIT 1"
