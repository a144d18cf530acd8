"""How the PostgreSQL store writes an append (see :mod:`ctxledger.eventstore.postgres`).

Two paths, the same rows and hashes (per-event
:func:`~ctxledger.eventstore.rows.chain_hash` rows; a copy of a linked SQLite ledger
asks for linked rows, which only the client-side path writes). A small append without
blobs with one event (every chat turn) is one ``CALL ctxledger_append_one`` (migrations
``0005``/``0006``: the steps below in one round trip, the row written sealed at once when
the lock is free; the call is prepared on each pool connection); with more events it is one call of ``ctxledger_insert`` (``0003``),
its own transaction: the version checks, the streams and the rows, inserted
unsealed; if the append lock is free it also seals (``ctxledger_seal``) in the same
transaction, so an append alone costs one flush. Else it commits (sharing the flush
with other appenders' commits) and a second call, ``ctxledger_await``, waits for the
lock and seals whatever is still unsealed. A batch of more than 16 events without new
blobs is one message and a ``COPY`` (:mod:`ctxledger.eventstore.postgres_copy`).
Anything else (blobs, linked rows, and the retry after a stale version or a stored
event id) runs the client-side transaction: statements bound client-side and sent several per message
(``BEGIN; lock; seal what waits; versions; stream ids``, then the rows as
``EXECUTE``s of statements each pool connection prepared, or a binary ``COPY`` for a
batch, written sealed with the hashes computed here, ``pg_notify`` and ``COMMIT``).
Read_stream's lookup (:func:`stream_ends`) is prepared here too, with the ``CALL``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import psycopg
import psycopg.errors
from psycopg import generators, pq

from ctxledger.errors import ConcurrencyError, CtxLedgerError, DuplicateEventError
from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore.postgres_copy import PREPARED, Placed, hash_rows, unprepared
from ctxledger.eventstore.postgres_errors import Left, cancelled, leaving, mark
from ctxledger.eventstore.preparing import PreparedBatch
from ctxledger.eventstore.resends import StoredAs, already_stored, as_stored, blobs_then
from ctxledger.eventstore.rows import GENESIS_HASH, chain_tip

__all__ = ["BLOB_LOCK", "CALL_ROWS", "Appender", "client_side", "prepare", "stream_ends"]

Conn = psycopg.Connection[tuple[Any, ...]]

_IDLE = psycopg.pq.TransactionStatus.IDLE
#: the blob lock (session 42), taken before the append lock by whoever inserts blobs in
#: an append transaction: shared by an append that inserts its blobs before it waits for
#: the append lock, exclusive by a streamed append (``postgres_stream``), which inserts
#: them while it holds it. Without it such an append's uncommitted blob and the import's
#: insert of the same ref waited on each other, and deadlock detection could abort the
#: import; with one order (blob lock, then append lock) no such cycle can form.
BLOB_LOCK = "pg_advisory_xact_lock{}(%s, %s)"
#: lock, tail, the named streams' ids and versions, the next stream id (after a BEGIN);
#: the statements a connection prepared (:func:`prepare`): planned once per connection
_HEAD = (
    "SELECT pg_advisory_xact_lock(%s);"
    "EXECUTE ctxledger_seal(%s);"
    "EXECUTE ctxledger_streams(%s);"
    "EXECUTE ctxledger_next_streams(%s)"
)
_INSERT_ROW = "EXECUTE ctxledger_insert(%s, %s, %s, %s, %s, %s, %s, %s)"
#: the same without the prepared statements (a connection that cannot keep them)
_HEAD_PLAIN = unprepared(_HEAD)
_INSERT_ROW_PLAIN = unprepared(_INSERT_ROW)
#: the one-event append, prepared with libpq on each pool connection (protocol level:
#: psycopg's DEALLOCATE ALL after a ROLLBACK only runs once psycopg prepared something,
#: and the pool's ``prepare_threshold=None`` keeps it from ever doing so)
_ONE = b"ctxledger_one"
_ONE_SQL = q.CALL_ONE.replace("%s", "$%d") % tuple(range(1, 11))
#: int8, text, text, int8, bytea, text, text, int4, bytea, bytea; bytea travels as bytes
_ONE_TYPES = [20, 25, 25, 20, 17, 25, 25, 23, 17, 17]
_ONE_FORMATS = [0, 0, 0, 0, 1, 0, 0, 0, 1, 1]
#: read_stream's lookup (a stream's id and ends), prepared beside it: bound and planned
#: once, not built in Python; five integers (or NULLs) come back as text
_ENDS = b"ctxledger_stream_ends"
Ends = tuple[int | None, ...] | None
_PROTOCOL = {_ONE: (_ONE_SQL, _ONE_TYPES), _ENDS: (q.STREAM_ENDS.replace("%s", "$1"), [25])}
#: appends of up to this many events send their rows as literals, with the COMMIT
_INLINE_ROWS = 16
#: appends without blobs of up to this many events go through ``ctxledger_insert``
#: (which numbers an append's rows ``pid = n * 1000 + k``: keep this under 1000)
CALL_ROWS = 16
_json = msgspec.json.Encoder().encode
_COPY_TYPES = ["int8", "text", "int8", "int8", "text", "int4", "bytea", "text"]
_MISSING = psycopg.errors.InvalidSqlStatementName
T = TypeVar("T")
#: the look-up after a cut one-event call (:meth:`Appender.one_left`) waits this long at
#: most for a lock on ``events`` (another session's ``LOCK TABLE``, a migration) and runs
#: this long at most: past either it answers "maybe" rather than add the role's whole
#: wait (or no end at all) to the one that was just cut
_LOOKUP_LIMITS = "SET LOCAL lock_timeout = '100ms'; SET LOCAL statement_timeout = '500ms'"


def _rollback(conn: Conn) -> None:
    """End a failed transaction before the connection goes back to the pool."""
    if not conn.closed and conn.info.transaction_status != _IDLE:
        with contextlib.suppress(psycopg.Error):  # keep the original error
            conn.execute("ROLLBACK")


def _results(cur: psycopg.ClientCursor[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
    """The rows of every statement of a multi-statement execute, in order."""
    out: list[list[tuple[Any, ...]]] = []
    while True:
        out.append(cur.fetchall() if cur.description is not None else [])
        if not cur.nextset():
            return out


def _copy_rows(conn: Conn, plan: list[Placed], seq: int, prev: str) -> None:
    """The rows of `plan` by binary ``COPY``, hashed while it streams."""
    with conn.cursor().copy(q.COPY_EVENTS) as copy:
        copy.set_types(_COPY_TYPES)
        hash_rows(plan, seq, prev, copy.write_row)


class Appender:
    """Writes appends to the ledger whose append-lock key and notify channel it holds."""

    def __init__(self, key: int, channel: str) -> None:
        self.key = key
        self.channel = channel
        #: the blob lock's key (:data:`BLOB_LOCK`): the append lock's 64 bits as two
        #: int4s, a key space of its own (advisory locks on two int4s never clash with
        #: those on one int8)
        high, low = key >> 32, key & 0xFFFFFFFF
        self.blob_key = (high, low - (1 << 32) if low >= 1 << 31 else low)
        self._key = b"%d" % key
        self._channel = channel.encode()
        #: set when prepared statements do not hold on this store's connections (:meth:`held`)
        self.plain = False

    def held(self, conn: Conn, fn: Callable[[Conn], T]) -> T:
        """`fn(conn)`, which uses the statements each pool connection prepared
        (:func:`prepare`). When one is gone (a ``DISCARD ALL`` or ``DEALLOCATE``, a pooler
        that hands out another server session) they are prepared again and `fn` runs once
        more; if that does not hold either (a pooler in transaction mode), `fn` runs on
        plain statements, and so does every later append of this store. Safe to repeat:
        a missing statement fails its transaction, rolled back, before anything is kept."""
        if not self.plain:
            try:
                return fn(conn)
            except _MISSING:
                _rollback(conn)
            prepare(conn, again=True)
            try:
                return fn(conn)
            except _MISSING:
                _rollback(conn)
                self.plain = True
        return fn(conn)

    def call(self, conn: Conn, batches: list[PreparedBatch]) -> dict[str, int]:
        """A small append without blobs: one ``ctxledger_insert`` call (autocommit: its
        own transaction) inserts the rows unsealed, and seals them if the append lock
        is free; else one ``ctxledger_await`` call waits for the sealer of the moment
        and seals them if it did not. The header pieces are JSON-encoded here, so the
        server hashes exactly ``chain_header``'s bytes. A one-event append (every chat
        turn) is one ``CALL ctxledger_append_one`` (migration 0005) with scalar
        arguments: the same steps in one round trip, its row written once (sealed
        directly) when the lock is free."""
        if len(batches) == 1 and len(batches[0].rows) == 1:
            try:
                return self.held(conn, lambda c: self.call_one(c, batches[0]))
            except psycopg.Error as exc:
                mark(exc, self.one_left(conn, exc, batches[0]))
                raise
        return self.call_many(conn, batches)

    def one_left(self, conn: Conn, exc: psycopg.Error, batch: PreparedBatch) -> Left:
        """What a one-event ``CALL`` the server cancelled had left. Its procedure commits
        the row before it waits for another writer's seal, so a cancel before that commit
        left nothing and one after it left the row stored. One look-up of the event, on
        this error path only, tells which (the CALL is over, its open transaction rolled
        back; the id is unique), judged as a re-send is (:meth:`_already_stored`): the
        same event stored in the same stream is "committed" (by this call, or by the
        append a re-send repeats); no row, or a row holding another event or in another
        stream (this one's insert could not have committed), is "nothing". When the
        session cannot ask (it ended), or the look-up fails or runs past its own short
        limits (:data:`_LOOKUP_LIMITS`): "maybe"."""
        if not cancelled(exc) or conn.broken:
            return "maybe"
        try:
            with conn.transaction():
                conn.execute(_LOOKUP_LIMITS)
                stored = self._already_stored(conn, [batch], {})
        except DuplicateEventError:
            return "nothing"
        except (psycopg.Error, CtxLedgerError):
            return "maybe"
        return "committed" if stored else "nothing"

    def call_many(self, conn: Conn, batches: list[PreparedBatch]) -> dict[str, int]:
        """``ctxledger_insert``, then ``ctxledger_await`` if it could not seal."""
        params = self.call_params(batches)
        with leaving("nothing"):  # (one statement, its own transaction)
            found = conn.execute(q.CALL_INSERT, params).fetchone()
        assert found is not None
        versions, sealed = found
        if not sealed:
            with leaving("committed"):
                conn.execute(q.CALL_AWAIT, (self.key, self.channel, params[6]))
        return {b.stream: int(v) for b, v in zip(batches, versions, strict=True)}

    def call_one(self, conn: Conn, batch: PreparedBatch) -> dict[str, int]:
        """One event: ``ctxledger_append_one`` inserts it (sealed if the lock is free,
        else unsealed, committed, then sealed by whoever holds the lock next).

        Sent as the statement each pool connection prepared (:func:`prepare`) with
        libpq's own call and binary ``bytea`` arguments: no statement to parse on the
        server, no query to build or bytes to hex-encode here."""
        ((event_id, kind, schema, payload),) = batch.rows
        if self.plain:
            return self._call_one_plain(conn, batch)
        text = conn.info.encoding
        expected = batch.expected_version
        params: list[bytes | None] = [
            self._key,
            self._channel,
            batch.stream.encode(text),
            None if expected is None else b"%d" % expected,
            _json(batch.stream),
            event_id.encode(text),
            kind.encode(text),
            b"%d" % schema,
            payload,
            _json((event_id, kind, schema))[1:-1],
        ]
        with conn.lock:
            conn.pgconn.send_query_prepared(_ONE, params, _ONE_FORMATS)
            results = conn.wait(generators.execute(conn.pgconn))
        found = results[-1]
        if found.status != pq.ExecStatus.TUPLES_OK:
            raise psycopg.errors.error_from_result(found, encoding=text)
        value = found.get_value(0, 0)
        assert value is not None
        return {batch.stream: int(value)}

    def _call_one_plain(self, conn: Conn, batch: PreparedBatch) -> dict[str, int]:
        """:meth:`call_one` as a plain ``CALL`` (psycopg binds the same arguments)."""
        ((event_id, kind, schema, payload),) = batch.rows
        header = _json((event_id, kind, schema))[1:-1]
        head = (self.key, self.channel, batch.stream, batch.expected_version, _json(batch.stream))
        found = conn.execute(
            q.CALL_ONE, (*head, event_id, kind, schema, payload, header)
        ).fetchone()
        assert found is not None
        return {batch.stream: int(found[0])}

    def call_params(self, batches: list[PreparedBatch]) -> tuple[Any, ...]:
        """The arguments of ``ctxledger_insert`` (those of migration 0002's
        ``ctxledger_append`` too) for `batches`."""
        rows = [row for batch in batches for row in batch.rows]
        return (
            self.key,
            self.channel,
            [b.stream for b in batches],
            [b.expected_version for b in batches],
            [len(b.rows) for b in batches],
            [_json(b.stream) for b in batches],
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            [r[3] for r in rows],
            [_json((r[0], r[1], r[2]))[1:-1] for r in rows],
        )

    def transaction(
        self,
        conn: Conn,
        batches: list[PreparedBatch],
        new_blobs: dict[str, bytes],
        *,
        check_ids: bool,
    ) -> dict[str, int]:
        """:meth:`_transaction` on the connection's statements (:meth:`held`)."""
        with leaving("nothing"):
            return self.held(conn, lambda c: self._transaction(c, batches, new_blobs, check_ids))

    def _transaction(
        self,
        conn: Conn,
        batches: list[PreparedBatch],
        new_blobs: dict[str, bytes],
        check_ids: bool,
    ) -> dict[str, int]:
        """One append transaction in two round trips (three with blobs, four for big batches).

        Statements are bound client-side and sent several per message (simple query
        protocol); the connection is in autocommit mode, so BEGIN/COMMIT are explicit
        and any failure rolls back before the connection goes back to the pool.
        """
        names = [batch.stream for batch in batches]
        cur = psycopg.ClientCursor(conn)
        try:
            if new_blobs:  # the blob lock (shared) before the blobs, as the import's
                cur.execute("BEGIN; SELECT " + BLOB_LOCK.format("_shared"), self.blob_key)
                self._store_blobs(conn, new_blobs)  # before the lock: big bytes, no ordering
            # the lock first; then statements of their own, whose snapshots see every commit
            head = (self.key, self.channel, names, len(names))
            statement = _HEAD_PLAIN if self.plain else _HEAD
            cur.execute(statement if new_blobs else "BEGIN;" + statement, head)
            _, tail, found_rows, id_rows = _results(cur)[-4:]
            found = {str(s): (int(i), int(v)) for s, i, v in found_rows}
            current: list[tuple[int | None, int]] = [found.get(n, (None, 0)) for n in names]
            stale = next(
                (
                    (batch, version)
                    for batch, (_, version) in zip(batches, current, strict=True)
                    if batch.rows and batch.expected_version not in (None, version)
                ),
                None,
            )
            if stale is not None or check_ids:
                if self._already_stored(conn, batches, new_blobs):
                    conn.execute("COMMIT")  # a re-send: only the seal of what was waiting
                    return {n: version for n, (_, version) in zip(names, current, strict=True)}
                if stale is not None:
                    # keep the seal of what was waiting (this append's blobs go with it)
                    conn.execute("ROLLBACK" if new_blobs else "COMMIT")
                    raise ConcurrencyError(
                        stale[0].stream, stale[0].expected_version or 0, stale[1]
                    )
            seq, prev = (int(tail[0][0]), chain_tip(str(tail[0][1]))) if tail else (0, GENESIS_HASH)
            return self._write(cur, batches, current, seq, prev, [int(r[0]) for r in id_rows])
        except BaseException:
            _rollback(conn)
            raise

    def _write(
        self,
        cur: psycopg.ClientCursor[tuple[Any, ...]],
        batches: list[PreparedBatch],
        current: list[tuple[int | None, int]],
        seq: int,
        prev: str,
        new_ids: list[int],
    ) -> dict[str, int]:
        """Hash the rows after the tail (seq, prev), insert them, notify and COMMIT.

        Everything waiting was sealed in this transaction first, so the rows written
        here come after it; a row inserted meanwhile at one of these versions is a
        unique violation (the append is retried), never a misordered stream. The new
        streams' rows go with the notify and the COMMIT (``events`` has no foreign key
        to them; a race on a stream name fails the COMMIT's statement and is retried)."""
        plan: list[Placed] = []
        new_streams: list[tuple[int, str, int]] = []
        out: dict[str, int] = {}
        end = seq
        for batch, (stream_id, version) in zip(batches, current, strict=True):
            out[batch.stream] = version + len(batch.rows)
            if not batch.rows:
                continue
            if stream_id is None:
                stream_id = new_ids.pop()
                new_streams.append((stream_id, batch.stream, end + 1))
            plan.append((batch, stream_id, version))
            end += len(batch.rows)
        statements: list[str] = []
        params: list[Any] = []
        if new_streams:
            statements.append(q.NEW_STREAMS + ", ".join(["(%s, %s, %s)"] * len(new_streams)))
            params += [value for row in new_streams for value in row]
        if end - seq > _INLINE_ROWS:  # COPY (binary): bytes travel as bytes, nothing to parse
            _copy_rows(cur.connection, plan, seq, prev)
        else:
            rows: list[tuple[Any, ...]] = []
            hash_rows(plan, seq, prev, rows.append)
            statements += [_INSERT_ROW_PLAIN if self.plain else _INSERT_ROW] * len(rows)
            params += [value for row in rows for value in row]
        statements += ["SELECT pg_notify(%s, %s)", "COMMIT"]
        cur.execute(";".join(statements), [*params, self.channel, str(end)])
        return out

    def _store_blobs(self, conn: Conn, new_blobs: dict[str, bytes]) -> None:
        """INSERT the blobs not stored yet (ON CONFLICT DO NOTHING: a racing writer's copy wins)."""
        known = {str(r[0]) for r in conn.execute(q.KNOWN_BLOBS, (list(new_blobs),)).fetchall()}
        missing = [(ref, len(data), data) for ref, data in new_blobs.items() if ref not in known]
        if missing:
            conn.cursor().executemany(q.INSERT_BLOB, missing)

    def _already_stored(
        self, conn: Conn, batches: list[PreparedBatch], new_blobs: dict[str, bytes]
    ) -> bool:
        """Whether this append is a re-send (:func:`already_stored`; one query for its ids,
        blobs read on this connection only for a row whose bytes differ)."""
        wanted = [row[0] for batch in batches for row in batch.rows]
        stored: dict[str, StoredAs] = {
            str(r[0]): (r[1], r[2], r[3], as_stored(r[4]))
            for r in conn.execute(q.STREAMS_OF_EVENTS, (wanted,)).fetchall()
        }

        def blob_in(ref: str) -> bytes | None:
            row = conn.execute(q.GET_BLOB, (ref,)).fetchone()
            return None if row is None else bytes(row[0])

        return already_stored(batches, stored.get, blobs_then(new_blobs, blob_in))


def client_side(batches: list[PreparedBatch], new_blobs: dict[str, bytes]) -> bool:
    """Whether an append goes the client-side transaction's way (blobs, linked rows)."""
    return bool(new_blobs) or any(b.chain == "linked" for b in batches)


def prepare(conn: Conn, *, again: bool = False) -> None:
    """Prepare the append's statements on a new pool connection (SQL-level PREPARE, so
    they can be EXECUTEd inside the multi-statement messages of an append; the
    one-event ``CALL`` at protocol level, for :meth:`Appender.call_one`, and
    :func:`stream_ends` beside it). `again`: those still there are left as they are."""
    kept: tuple[type[psycopg.Error], ...] = (
        (psycopg.errors.DuplicatePreparedStatement,) if again else ()
    )
    for name, statement in PREPARED.items():
        with contextlib.suppress(*kept):
            conn.execute(f"PREPARE {name} AS {statement}")
    for protocol_name in _PROTOCOL:
        with contextlib.suppress(*kept):
            _send_prepare(conn, protocol_name)


def _send_prepare(conn: Conn, name: bytes) -> None:
    sql, types = _PROTOCOL[name]
    with conn.lock:
        conn.pgconn.send_prepare(name, sql.encode(), types)
        (done,) = conn.wait(generators.execute(conn.pgconn))
    if done.status != pq.ExecStatus.COMMAND_OK:
        raise psycopg.errors.error_from_result(done, encoding=conn.info.encoding)


def stream_ends(conn: Conn, stream: str, appender: Appender) -> Ends:
    """The stream's id and the (seq, version) of its lowest and highest sealed rows by
    version (``STREAM_ENDS``), or None for no such stream. The statement prepared on the
    connection; when it is gone (a ``DISCARD ALL`` or ``DEALLOCATE``, a pooler that
    hands out another server session) it is prepared again, and if that does not hold
    either, the query runs unprepared: a read never depends on the session's state. For
    an idle autocommit connection (the pool's): in an open transaction, a missing
    statement aborts it and neither retry can run. On a store whose prepared statements
    do not hold (``appender.plain``, set by its appends or here, as :meth:`Appender.held`
    sets it) the query runs unprepared at once.

    A name holding NUL is no stream (appends refuse it): text parameters end at a NUL,
    so it would be looked up cut short."""
    if "\x00" in stream:
        return None
    if not appender.plain:
        held, found = _ends_prepared(conn, stream)
        if not held:
            with contextlib.suppress(psycopg.errors.DuplicatePreparedStatement):
                _send_prepare(conn, _ENDS)
            held, found = _ends_prepared(conn, stream)
        if held:
            return found
        appender.plain = True  # (as held() decides it: later reads go plain at once)
    row = conn.execute(q.STREAM_ENDS, (stream,)).fetchone()
    return None if row is None else tuple(row)


def _ends_prepared(conn: Conn, stream: str) -> tuple[bool, Ends]:
    """(True, :func:`stream_ends`) by the prepared statement; (False, None) when the
    session has no such statement."""
    text = conn.info.encoding
    with conn.lock:
        conn.pgconn.send_query_prepared(_ENDS, [stream.encode(text)])
        (found,) = conn.wait(generators.execute(conn.pgconn))
    if found.status != pq.ExecStatus.TUPLES_OK:
        error = psycopg.errors.error_from_result(found, encoding=text)
        if isinstance(error, psycopg.errors.InvalidSqlStatementName):
            return False, None
        raise error
    if found.ntuples == 0:
        return True, None
    values = [found.get_value(0, column) for column in range(5)]
    return True, tuple(None if value is None else int(value) for value in values)
