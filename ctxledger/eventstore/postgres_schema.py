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


#: migration 0002 as applied (0003 derives its replacement from it: keep it unchanged)
_APPEND_FUNCTION_0002 = """
        CREATE FUNCTION ctxledger_append(
            p_lock bigint, p_channel text, p_streams text[], p_expected bigint[],
            p_counts integer[], p_stream_json bytea[], p_event_ids text[], p_kinds text[],
            p_schemas integer[], p_payloads bytea[], p_idents bytea[]
        ) RETURNS bigint[]
        LANGUAGE plpgsql VOLATILE
        SET search_path FROM CURRENT
        AS $fn$
        DECLARE
            v_seq bigint := 0;
            v_prev text := repeat('0', 64);
            v_next_id bigint;
            v_ids bigint[] := '{}';
            v_versions bigint[] := '{}';
            v_sid bigint;
            v_ver bigint;
            k integer := 0;
        BEGIN
            PERFORM pg_advisory_xact_lock(p_lock);
            SELECT seq, hash INTO v_seq, v_prev FROM events ORDER BY seq DESC LIMIT 1;
            IF NOT FOUND THEN
                v_seq := 0;
                v_prev := repeat('0', 64);
            END IF;
            FOR i IN 1 .. cardinality(p_streams) LOOP
                SELECT s.stream_id, (SELECT coalesce(max(e.version), 0) FROM events AS e
                                     WHERE e.stream_id = s.stream_id)
                  INTO v_sid, v_ver FROM streams AS s WHERE s.stream = p_streams[i];
                IF NOT FOUND THEN
                    v_sid := NULL;
                    v_ver := 0;
                END IF;
                IF p_counts[i] > 0 AND p_expected[i] IS NOT NULL AND p_expected[i] <> v_ver THEN
                    RAISE EXCEPTION 'stream % is at version %, not %', p_streams[i], v_ver,
                        p_expected[i]
                        USING ERRCODE = 'CL409',
                              DETAIL = json_build_array(p_streams[i], p_expected[i], v_ver)::text;
                END IF;
                v_ids := v_ids || v_sid;
                v_versions := v_versions || v_ver;
            END LOOP;
            SELECT coalesce(max(stream_id), 0) INTO v_next_id FROM streams;
            FOR i IN 1 .. cardinality(p_streams) LOOP
                IF p_counts[i] > 0 AND v_ids[i] IS NULL THEN
                    v_next_id := v_next_id + 1;
                    v_ids[i] := v_next_id;
                    INSERT INTO streams (stream_id, stream, created_seq)
                        VALUES (v_next_id, p_streams[i], v_seq + 1);
                END IF;
                FOR j IN 1 .. p_counts[i] LOOP
                    k := k + 1;
                    v_seq := v_seq + 1;
                    v_versions[i] := v_versions[i] + 1;
                    v_prev := encode(sha256(
                        convert_to('["' || v_prev || '",' || v_seq || ',', 'UTF8')
                        || p_stream_json[i]
                        || convert_to(',' || v_versions[i] || ',', 'UTF8')
                        || p_idents[k] || '\\x5d'::bytea
                        || p_payloads[k]), 'hex');
                    INSERT INTO events (seq, event_id, stream_id, version, kind, schema,
                                        payload, hash)
                        VALUES (v_seq, p_event_ids[k], v_ids[i], v_versions[i], p_kinds[k],
                                p_schemas[k], p_payloads[k], v_prev);
                END LOOP;
            END LOOP;
            PERFORM pg_notify(p_channel, v_seq::text);
            RETURN v_versions;
        END
        $fn$
        """


@PG_MIGRATIONS("0002_append_function")
def _create_append_function(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """``ctxledger_append``: a whole small append in one statement, so one round trip.

    The append lock is then held only while the server runs the function and
    commits, never across a client round trip (a descheduled writer no longer stalls
    every other). Same steps as the client-side path: lock, tail, every expected
    version checked before any write (SQLSTATE ``CL409`` with the stream, expected
    and actual versions as a JSON detail), new streams, the rows hashed into the
    chain, ``pg_notify``. The client sends each event's header pieces already
    JSON-encoded as UTF-8 bytes (``"stream"`` and ``"event_id","kind",schema``), so
    the header hashed here is byte-for-byte ``base.chain_header``: SQL never escapes
    a string. Each statement of a VOLATILE PL/pgSQL function takes a new snapshot,
    so the tail read after the lock is the true tail. ``search_path`` is pinned to
    the ledger's schema.
    """
    conn.execute(_APPEND_FUNCTION_0002)


@PG_MIGRATIONS("0003_append_after_linked_rows")
def _append_after_linked_rows(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """``ctxledger_append`` chains from the tail's 64-hex chain value (``base.chain_tip``).

    A ledger copied from SQLite (``ctxledger migrate``) keeps SQLite's linked rows,
    whose hash column is ``<digest>`` or ``<digest>:<link>``; the next per-event hash
    chains from the link, as the client-side path and the verifier do. For a
    per-event row the value is its whole hash, so nothing changes for other ledgers.
    """
    conn.execute(
        _APPEND_FUNCTION_0002.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1).replace(
            "SELECT seq, hash INTO", "SELECT seq, right(hash, 64) INTO", 1
        )
    )


# --- SQL, built once ------------------------------------------------------------------------

#: a small append in one statement (autocommit: its own transaction, one round trip)
CALL_APPEND = (
    "SELECT ctxledger_append(%s, %s, %s::text[], %s::bigint[], %s::integer[], %s::bytea[],"
    " %s::text[], %s::text[], %s::integer[], %s::bytea[], %s::bytea[])"
)
#: the SQLSTATE ``ctxledger_append`` raises when an expected version is stale
STALE_VERSION = "CL409"

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
#: reads bound only from below (the caller caps the LIMIT and drops rows past its end): an
#: upper bound makes the planner guess a small range from stale statistics, and then it
#: scans and sorts every row past the start for each batch instead of walking the index
READ_ALL = (
    "SELECT seq, version, schema, payload, hash FROM events WHERE seq >= %s ORDER BY seq LIMIT %s"
)
READ_STREAM = (
    "SELECT seq, version, schema, payload, hash FROM events"
    " WHERE stream_id = %s AND version >= %s ORDER BY version LIMIT %s"
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
