"""Schema and migrations of the PostgreSQL event store (its SQL text is
:mod:`ctxledger.eventstore.postgres_sql`).

The tables mirror the SQLite ones (:mod:`ctxledger.eventstore.migrations`):
``events`` (``seq`` is the global order, NULL while a row waits to be sealed (migration
``0003``); ``UNIQUE (event_id)`` and ``UNIQUE (stream_id, version)`` are the backstops
of idempotency and concurrency),
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
import re
from collections.abc import Callable

import psycopg
from psycopg import sql

from ctxledger.errors import StoreError
from ctxledger.eventstore.postgres_procs import (
    APPEND_ONE_0005,
    APPEND_ONE_0006,
    flushing_seal,
    unflushed_waits,
)
from ctxledger.eventstore.postgres_sql import lock_key
from ctxledger.eventstore.registered import Registered

MigrationFn = Callable[[psycopg.Connection[tuple[object, ...]]], None]


class PgMigrations(Registered[MigrationFn]):
    """The PostgreSQL store's migrations, each applied in a transaction of its own."""

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
        if not applied:
            _check_encoding(conn)
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


def _check_encoding(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """A new ledger needs a UTF8 database: messages hold any text; a LATIN1 one refuses
    the first character it has no byte for (an append, later), SQL_ASCII checks none."""
    encoding = conn.info.parameter_status("server_encoding")
    if encoding is not None and encoding.upper() not in ("UTF8", "UTF-8", "UNICODE"):
        raise StoreError(
            f"the database's encoding is {encoding}, not UTF8: a ledger holds any text; "
            "create it with: CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0"
        )


def create_schema(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> None:
    """CREATE SCHEMA IF NOT EXISTS, serialized (concurrent creations race on the catalog);
    a database not UTF8 is refused first (no schema is left behind)."""
    _check_encoding(conn)
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
    conn.execute(
        """
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
    )


@PG_MIGRATIONS("0003_sealed_appends")
def _create_sealing(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Appends that group-commit: rows are inserted unsealed, then sealed in batches.

    An appender inserts its rows with ``seq`` and ``hash`` NULL (``ctxledger_insert``:
    versions checked against every row, sealed or not; ``UNIQUE (stream_id, version)``
    and ``UNIQUE (event_id)`` still decide races) and commits without the append lock,
    so concurrent appenders' commits share WAL flushes. Whoever holds the append lock
    runs ``ctxledger_seal``: every unsealed row it can see, in insertion order
    (``pid``), gets the next gapless ``seq`` and its chain hash, in one transaction
    (one flush for many appends), and a notification. Readers see only sealed rows;
    the lock is held until the seal commits, so seal order is commit order and seq n
    is visible no later than seq n+1. ``pid`` order is version order within a stream:
    a row at version v+1 is inserted only after its writer saw version v committed.
    The header pieces (``hdr_stream``, ``hdr_ident``) wait in the row until it is
    sealed, then are cleared. Stream ids come from a sequence (streams are created
    by appenders that do not hold the lock); ``streams.created_seq`` is NULL for a
    stream created unsealed (``streams()`` orders by the seq of each stream's
    version 1 instead). A sealed row has no ``pid`` when the client-side path wrote
    it sealed directly (it seals what waits first, under the lock).
    """
    conn.execute(
        """
        ALTER TABLE events DROP CONSTRAINT events_pkey;
        ALTER TABLE events ALTER COLUMN seq DROP NOT NULL, ALTER COLUMN hash DROP NOT NULL;
        ALTER TABLE events ADD CONSTRAINT events_seq_key UNIQUE (seq);
        CREATE SEQUENCE events_pid_seq;
        ALTER TABLE events ADD COLUMN pid bigint, ADD COLUMN hdr_stream bytea,
            ADD COLUMN hdr_ident bytea;
        CREATE INDEX events_unsealed ON events (pid) WHERE seq IS NULL;
        ALTER TABLE streams ALTER COLUMN created_seq DROP NOT NULL;
        CREATE SEQUENCE streams_id_seq;
        SELECT setval('streams_id_seq', coalesce(max(stream_id), 0) + 1, false) FROM streams;
        DROP FUNCTION ctxledger_append(bigint, text, text[], bigint[], integer[], bytea[],
            text[], text[], integer[], bytea[], bytea[]);
        """
    )
    conn.execute(
        r"""
        CREATE FUNCTION ctxledger_seal(p_channel text, OUT o_seq bigint, OUT o_hash text)
        LANGUAGE plpgsql VOLATILE
        SET search_path FROM CURRENT
        AS $fn$
        DECLARE
            r record;
            v_pids bigint[] := '{}';
            v_seqs bigint[] := '{}';
            v_hashes text[] := '{}';
        BEGIN
            -- the caller holds the append lock
            SELECT seq, hash INTO o_seq, o_hash FROM events WHERE seq IS NOT NULL
                ORDER BY seq DESC LIMIT 1;
            IF NOT FOUND THEN
                o_seq := 0;
                o_hash := repeat('0', 64);
            END IF;
            FOR r IN SELECT e.pid, e.version, e.hdr_stream, e.hdr_ident, e.payload
                     FROM events AS e WHERE e.seq IS NULL ORDER BY e.pid LOOP
                o_seq := o_seq + 1;
                o_hash := encode(sha256(
                    convert_to('["' || o_hash || '",' || o_seq || ',', 'UTF8')
                    || r.hdr_stream
                    || convert_to(',' || r.version || ',', 'UTF8')
                    || r.hdr_ident || '\x5d'::bytea
                    || r.payload), 'hex');
                v_pids := v_pids || r.pid;
                v_seqs := v_seqs || o_seq;
                v_hashes := v_hashes || o_hash;
            END LOOP;
            IF cardinality(v_pids) > 0 THEN
                UPDATE events AS e SET seq = u.seq, hash = u.hash, hdr_stream = NULL,
                                       hdr_ident = NULL
                    FROM unnest(v_pids, v_seqs, v_hashes) AS u(pid, seq, hash)
                    WHERE e.seq IS NULL AND e.pid = u.pid;
                PERFORM pg_notify(p_channel, o_seq::text);
            END IF;
        END
        $fn$;

        CREATE FUNCTION ctxledger_insert(
            p_lock bigint, p_channel text, p_streams text[], p_expected bigint[],
            p_counts integer[], p_stream_json bytea[], p_event_ids text[], p_kinds text[],
            p_schemas integer[], p_payloads bytea[], p_idents bytea[],
            OUT o_versions bigint[], OUT o_sealed boolean)
        LANGUAGE plpgsql VOLATILE
        SET search_path FROM CURRENT
        AS $fn$
        DECLARE
            v_sid bigint;
            v_ver bigint;
            k integer := 0;
            v_base bigint := nextval('events_pid_seq') * 1000;
        BEGIN
            o_versions := '{}';
            -- missing streams first, in name order (two appenders creating the same
            -- streams wait for each other in one order, never in a cycle)
            INSERT INTO streams (stream_id, stream)
                SELECT nextval('streams_id_seq'), n
                FROM (SELECT DISTINCT n FROM unnest(p_streams, p_counts) AS u(n, c)
                      WHERE c > 0 ORDER BY n) AS m
                WHERE NOT EXISTS (SELECT 1 FROM streams WHERE stream = m.n)
                ORDER BY n
                ON CONFLICT (stream) DO NOTHING;
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
                FOR j IN 1 .. p_counts[i] LOOP
                    k := k + 1;
                    v_ver := v_ver + 1;
                    INSERT INTO events (pid, event_id, stream_id, version, kind, schema,
                                        payload, hdr_stream, hdr_ident)
                        VALUES (v_base + k, p_event_ids[k], v_sid, v_ver,
                                p_kinds[k], p_schemas[k], p_payloads[k], p_stream_json[i],
                                p_idents[k]);
                END LOOP;
                o_versions := o_versions || v_ver;
            END LOOP;
            -- seal now if nobody else is sealing: then this append costs one flush
            o_sealed := pg_try_advisory_xact_lock(p_lock);
            IF o_sealed THEN
                PERFORM ctxledger_seal(p_channel);
            END IF;
        END
        $fn$;

        CREATE FUNCTION ctxledger_await(p_lock bigint, p_channel text, p_event_ids text[])
            RETURNS void
        LANGUAGE plpgsql VOLATILE
        SET search_path FROM CURRENT
        AS $fn$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM events WHERE event_id = ANY(p_event_ids)
                           AND seq IS NULL) THEN
                RETURN;  -- sealed already
            END IF;
            -- waits for the sealer of the moment; if our rows are still unsealed after
            -- it (it did not see them, or it died), seal them and everything before them
            PERFORM pg_advisory_xact_lock(p_lock);
            IF EXISTS (SELECT 1 FROM events WHERE event_id = ANY(p_event_ids) AND seq IS NULL)
            THEN
                PERFORM ctxledger_seal(p_channel);
            END IF;
        END
        $fn$;
        """
    )


@PG_MIGRATIONS("0004_seal_after_linked_rows")
def _seal_after_linked_rows(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """``ctxledger_seal`` chains from the tail's 64-hex chain value (``base.chain_tip``).

    A ledger copied from SQLite (``ctxledger migrate``, issue 14) keeps SQLite's
    linked rows, whose hash column is ``<digest>`` or ``<digest>:<link>``; the next
    per-event hash chains from the link, as the client-side path and the verifier do.
    For a per-event row that value is its whole hash: other ledgers see no change.
    The function is re-created from its own stored definition with only the tail read
    changed.
    """
    found = conn.execute("SELECT pg_get_functiondef('ctxledger_seal'::regproc)").fetchone()
    definition = str(found[0]) if found else ""
    tail = "SELECT seq, hash INTO o_seq, o_hash"
    if tail not in definition:
        raise StoreError("ctxledger_seal is not the function migration 0003 created")
    conn.execute(definition.replace(tail, "SELECT seq, right(hash, 64) INTO o_seq, o_hash", 1))


@PG_MIGRATIONS("0005_one_call_appends")
def _one_call_appends(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """A one-event append in one round trip, written once when the lock is free (issue 13).

    ``ctxledger_append_one`` is a procedure (``CALL``), so it can ``COMMIT`` half-way:
    it checks the version, then, if the append lock is free, seals what waits and
    inserts its row sealed (one write, one flush); else it inserts the row unsealed,
    commits (sharing the flush), and waits until its row is sealed: it looks up to 8
    times, 0.5 ms more apart each time (18 ms in all), and seals itself whenever it
    finds the lock free; only then does it queue for the lock (a long seal), and seal
    if its row is still unsealed. That is what ``ctxledger_insert`` +
    ``ctxledger_await`` do in two calls, with scalar arguments (no arrays to encode
    and parse); queueing at once made every waiter take the lock in turn, one wake-up
    after another, mostly only to find its row sealed. A procedure that commits cannot
    pin ``search_path``, so its body names the ledger's tables with the schema.
    ``ctxledger_seal`` walks the unsealed rows by a plain index scan: a bitmap scan
    visited every row the seal's UPDATE left dead in the partial index (all appended
    rows since the last vacuum) and never marked them, so each seal grew with the log.
    """
    schema = _ledger_schema(conn)
    conn.execute("ALTER FUNCTION ctxledger_seal(text) SET enable_bitmapscan = off")
    # quoted: a schema may be named by a reserved word (``user``, ``order``)
    conn.execute(APPEND_ONE_0005.replace("@.", f'"{schema}".'))


@PG_MIGRATIONS("0006_lean_one_call")
def _lean_one_call(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """``ctxledger_append_one`` with fewer statements; the seal's UPDATE planned once (issue 13).

    The procedure is replaced (same arguments, same steps, same rows and hashes; see
    :data:`~ctxledger.eventstore.postgres_procs.APPEND_ONE_0006`): the stream's id and
    version are read by one statement, and with the append lock free it calls
    ``ctxledger_seal`` only when a row waits (a probe of the partial index), reading the
    tail itself otherwise. A row that has to wait for a seal (the lock was taken) is
    committed with ``synchronous_commit`` off: until a seal commits it is unsealed, seen
    by no reader and acknowledged to no caller, and the seal's (synchronous) commit
    flushes the WAL up to itself, which holds this row's insert; a crash before that
    loses only an unacknowledged append. This halves the flushes of waiting appenders.
    ``ctxledger_insert`` (2-16 events) does the same when it could not seal (its rows
    then wait for ``ctxledger_await``).
    ``ctxledger_seal`` gets ``plan_cache_mode = force_generic_plan``: its ``UPDATE …
    FROM unnest(…)`` was planned again at every seal (a custom plan for each array,
    ~0.1 ms) because the generic plan's guess of the array length never looked cheaper.
    """
    conn.execute("ALTER FUNCTION ctxledger_seal(text) SET plan_cache_mode = force_generic_plan")
    _seal_flushes(conn)
    conn.execute(APPEND_ONE_0006.replace("@.", f'"{_ledger_schema(conn)}".'))
    # the same for 2-16 events: rows that wait for ctxledger_await commit unflushed
    conn.execute(unflushed_waits(_definition(conn, "ctxledger_insert")))


def _seal_flushes(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """A seal that seals rows commits with ``synchronous_commit`` on (:func:`flushing_seal`)."""
    conn.execute(flushing_seal(_definition(conn, "ctxledger_seal")))


def _definition(conn: psycopg.Connection[tuple[object, ...]], function: str) -> str:
    found = conn.execute(f"SELECT pg_get_functiondef('{function}'::regproc)").fetchone()
    return str(found[0]) if found else ""


def _ledger_schema(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    """The schema being migrated (first on the search path), checked to be a plain name."""
    found = conn.execute("SELECT current_schema()").fetchone()
    schema = str(found[0]) if found else ""
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", schema):
        raise StoreError(f"unexpected schema name {schema!r}")
    return schema
