"""PostgreSQL's streamed append (an import): chunks of events in one transaction (session 41).

``append_many`` reads every request whole (its ``COPY`` head names each stream's row
count), so an import held its whole log in memory. :meth:`StreamWriter.write` takes
:class:`~ctxledger.eventstore.base.StreamedRequest`\\ s whose events may be generators
and writes :data:`~ctxledger.eventstore.streamed.CHUNK` events at a time, validated and
encoded by ``prepare_append`` as for ``append_many``, in one explicit transaction:

    BEGIN; blob lock (exclusive); append lock;  -- once
      SET LOCAL statement_timeout, idle_in_transaction_session_timeout = 0;
      (from PostgreSQL 17) transaction_timeout = 0 for the transaction too;
      ctxledger_seal(channel)
    per CHUNK events of requests (or one request's first full chunk): their streams
      made when missing and looked up in one round trip, the expected versions checked,
      their new blobs (INSERT … ON CONFLICT DO NOTHING), their rows into one binary COPY
    per further chunk of a long stream: its blobs, its rows into that COPY
    SELECT pg_notify(channel, last seq); COMMIT

The rows are written sealed, per-event chained from the tail the seal leaves
(:class:`~ctxledger.eventstore.postgres_copy.RowPacker`, the bytes ``append_many``'s
``COPY`` sends), so the log is the one ``append_many`` writes for the same events.
The append lock is taken when the first chunk is ready and held until the ``COMMIT``
(as SQLite's ``BEGIN IMMEDIATE`` is): the gapless seq needs the tail, and each hash the
one before, so every row is hashed under it; other appenders insert their rows
unsealed meanwhile and are sealed after it. The caller's generators run inside that
window, so they should only build events (the import validates and counts before).

All or nothing: any error (a bad event, a stale version, an id already stored, a lost
connection, the server killed) rolls the transaction back. Nothing is retried: the
generators cannot be read twice. An event id already stored is refused as
``InvalidInput`` (SQLite's answer), not taken for a re-send; a row another appender
inserted at one of the stream's versions meanwhile is a ``ConcurrencyError``, also
when the request's expected version is None (it says so: the streamed append cannot
take None against a concurrent writer; retry).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
import psycopg.errors
import psycopg_pool
from psycopg import generators, pq

from ctxledger.errors import ConcurrencyError, CtxLedgerError, InvalidInput
from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore import streamed
from ctxledger.eventstore.base import StreamedRequest
from ctxledger.eventstore.postgres_append import BLOB_LOCK, Appender
from ctxledger.eventstore.postgres_copy import RowPacker
from ctxledger.eventstore.postgres_errors import leaving
from ctxledger.eventstore.rows import GENESIS_HASH, chain_tip
from ctxledger.eventstore.streamed import PreparedChunk, checked_request, prepared_chunks

__all__ = ["PgStreamed", "StreamWriter"]

Conn = psycopg.Connection[tuple[Any, ...]]

#: the transaction's locks and guards. The blob lock (exclusive) before the append
#: lock, the one order every appender inserting blobs takes them in
#: (``postgres_append.BLOB_LOCK``); the role's ``statement_timeout`` and ``lock_timeout``
#: still bound these waits (each statement of the message has its own timeout). Then
#: the caller's generators run inside the transaction, mostly with a ``COPY`` open: a
#: ``statement_timeout`` would cut that one statement when the import is slow as a
#: whole, an ``idle_in_transaction_session_timeout`` the transaction between
#: statements, PostgreSQL 17's ``transaction_timeout`` the whole; all off once the locks
#: are held, for this transaction only (``SET LOCAL``; the last one set only from 17 on,
#: an older server knows no such setting)
_LOCK = (
    "BEGIN; SELECT "
    + BLOB_LOCK.format("")
    + "; SELECT pg_advisory_xact_lock(%s);"
    + " SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0;"
    + " SELECT set_config('transaction_timeout', '0', true)"
    + " WHERE current_setting('server_version_num')::int >= 170000; "
    + q.SEAL.replace("$1", "%s")
)
#: the streams with rows made when missing, in name order (as ``append_many``'s ``COPY``
#: head makes them), then every named stream's id and version: one round trip
_PLACE = (
    "INSERT INTO streams (stream_id, stream)"
    " SELECT nextval('streams_id_seq'), m.n FROM unnest(%s::text[]) AS m(n)"
    " WHERE NOT EXISTS (SELECT 1 FROM streams AS s WHERE s.stream = m.n)"
    " ORDER BY m.n ON CONFLICT (stream) DO NOTHING; " + q.STREAMS_NAMED
)
_COPY = q.COPY_EVENTS.encode()
_IDLE = pq.TransactionStatus.IDLE


class PgStreamed:
    """``append_stream`` of the PostgreSQL store (its pool, append lock and threshold)."""

    _pool: psycopg_pool.ConnectionPool[Conn]
    _appender: Appender
    _blob_threshold: int
    _check_open: Callable[[], None]
    _translate: Callable[[psycopg.Error, str], CtxLedgerError]

    def append_stream(self, requests: Iterable[StreamedRequest]) -> dict[str, int]:
        """``append_many`` of requests whose events may be generators, encoded and
        written a chunk at a time in one transaction (:class:`StreamWriter`): the same
        rows and chain; never retried (the generators are read once)."""
        self._check_open()
        try:
            with leaving("nothing"), self._pool.connection() as conn:  # (one transaction)
                return StreamWriter(conn, self._appender, self._blob_threshold).write(requests)
        except psycopg.Error as exc:
            raise self._translate(exc, "append") from exc


class StreamWriter:
    """One streamed append on `conn` (an autocommit pool connection) for the ledger
    whose append lock, blob lock and notify channel `appender` holds."""

    def __init__(self, conn: Conn, appender: Appender, threshold: int) -> None:
        self.conn, self.threshold = conn, threshold
        self.key, self.channel, self.blob_key = appender.key, appender.channel, appender.blob_key
        self.cur = psycopg.ClientCursor(conn)
        #: (seq, chain value) of the log's end once the lock is held, else None
        self.tail: tuple[int, str] | None = None
        self.first = 0  # the first seq this append writes, once the lock is held
        #: the open ``COPY``'s packer, None between statements
        self.packer: RowPacker | None = None
        #: stream id -> (stream, its version before this append, the expected version
        #: given), for a clash's error
        self.placed: dict[int, tuple[str, int, int | None]] = {}

    def write(self, requests: Iterable[StreamedRequest]) -> dict[str, int]:
        """Every request's events, a chunk at a time, committed together; the new versions.

        Requests wait (their first chunks prepared) until :data:`~.streamed.CHUNK` events
        do, or one fills a chunk: then their streams are placed in one round trip and
        their rows go into one ``COPY`` (:meth:`_flush`); a long stream's further chunks
        follow into it."""
        out: dict[str, int] = {}
        seen: set[str] = set()
        pending: list[tuple[StreamedRequest, PreparedChunk | None]] = []
        waiting = 0
        try:
            for request in requests:
                request = checked_request(request, seen)
                chunks = prepared_chunks(request, self.threshold)
                first = next(chunks, None)
                pending.append((request, first))
                waiting += len(first.rows) if first is not None else 0
                if first is not None and len(first.rows) >= streamed.CHUNK:  # maybe more
                    stream_id, version = self._flush(pending, out)
                    for chunk in chunks:
                        version = self._copy(chunk, request.stream, stream_id, version)
                    out[request.stream] = version
                elif waiting >= streamed.CHUNK:
                    self._flush(pending, out)
                else:
                    continue
                pending, waiting = [], 0
            self._flush(pending, out)
            if self.tail is not None:
                self._commit()
        except BaseException:
            self._abort()
            raise
        return out

    def _locked(self) -> tuple[int, str]:
        """The append lock taken (once), what waits sealed: the log's (seq, chain value)."""
        if self.tail is None:
            self.cur.execute(_LOCK, (*self.blob_key, self.key, self.channel))
            while self.cur.nextset():  # (the seal's result is the last one)
                pass
            row = self.cur.fetchone()
            seq, value = (row[0], row[1]) if row is not None else (None, None)
            self.tail = (int(seq), chain_tip(str(value))) if seq is not None else (0, GENESIS_HASH)
            self.first = self.tail[0] + 1
        return self.tail

    def _flush(
        self, pending: list[tuple[StreamedRequest, PreparedChunk | None]], out: dict[str, int]
    ) -> tuple[int, int]:
        """The waiting requests written under the lock: their streams made (sorted, as
        the ``COPY`` head makes them) and looked up in one round trip, each expected
        version checked, their blobs inserted, their rows into one ``COPY``; their
        versions into `out`. The last one's (stream id, version) after it."""
        if not pending:
            return (0, 0)
        self._locked()
        self._end_copy()
        names = [request.stream for request, _ in pending]
        made = sorted(request.stream for request, chunk in pending if chunk is not None)
        self.cur.execute(_PLACE, (made, names))
        while self.cur.nextset():  # (the lookup's result is the last one)
            pass
        found = {str(r[0]): (int(r[1]), int(r[2])) for r in self.cur.fetchall()}
        blobs: dict[str, bytes] = {}
        for request, chunk in pending:
            if chunk is None:  # no events: nothing written, nothing to check (as SQLite)
                continue
            version = found[request.stream][1]
            if request.expected_version not in (None, version):
                raise ConcurrencyError(request.stream, request.expected_version or 0, version)
            blobs.update(chunk.blobs)
        if blobs:
            self.cur.executemany(q.INSERT_BLOB, [(r, len(d), d) for r, d in blobs.items()])
        stream_id = version = 0
        for request, chunk in pending:
            stream, expected = request.stream, request.expected_version
            stream_id, version = found.get(stream, (0, 0))
            if chunk is not None:
                self.placed[stream_id] = (stream, version, expected)
                version = self._copy(chunk._replace(blobs={}), stream, stream_id, version)
            out[stream] = version
        return (stream_id, version)

    def _copy(self, chunk: PreparedChunk, stream: str, stream_id: int, version: int) -> int:
        """The chunk's blobs, then its rows into the open ``COPY`` (opened if none is: one
        for the chunks of a stream without blobs, so the server inserts while the next
        chunk is made); the stream's version after them."""
        if chunk.blobs:
            self._end_copy()
            self.cur.executemany(q.INSERT_BLOB, [(r, len(d), d) for r, d in chunk.blobs.items()])
        packer = self.packer
        if packer is None:
            packer = self.packer = self._begin_copy()
        version = packer.add(chunk.rows, stream, stream_id, version)
        self.tail = (packer.seq, packer.prev)
        return version

    def _begin_copy(self) -> RowPacker:
        assert self.tail is not None
        conn, pgconn = self.conn, self.conn.pgconn
        with conn.lock:
            pgconn.send_query(_COPY)
            (started,) = conn.wait(generators.fetch_many(pgconn))
        if started.status != pq.ExecStatus.COPY_IN:
            raise psycopg.errors.error_from_result(started, encoding=conn.info.encoding)
        return RowPacker(conn, *self.tail)

    def _end_copy(self) -> None:
        """The open ``COPY`` (if any) finished: its last rows sent, the server's answer read."""
        packer, self.packer = self.packer, None
        if packer is None:
            return
        packer.finish()
        try:
            with self.conn.lock:
                self.conn.wait(generators.copy_end(self.conn.pgconn, None))
        except psycopg.errors.UniqueViolation as exc:
            refused = _refused(exc, self.placed)
            if refused is exc:
                raise
            raise refused from exc

    def _commit(self) -> None:
        assert self.tail is not None
        self._end_copy()
        self.cur.execute("SELECT pg_notify(%s, %s); COMMIT", (self.channel, str(self.tail[0])))

    def _abort(self) -> None:
        """End an open ``COPY`` with an error and roll the transaction back (the original
        error is the one raised)."""
        conn = self.conn
        if self.packer is not None:
            self.packer = None
            with contextlib.suppress(psycopg.Error), conn.lock:  # (the expected "COPY failed")
                conn.wait(generators.copy_end(conn.pgconn, b"the append stopped"))
        if not conn.closed and conn.info.transaction_status != _IDLE:
            with contextlib.suppress(psycopg.Error):  # keep the original error
                conn.execute("ROLLBACK")


_CLASH = re.compile(r"\(stream_id, version\)=\((\d+), \d+\)")


def _refused(
    exc: psycopg.errors.UniqueViolation, placed: dict[int, tuple[str, int, int | None]]
) -> Exception:
    """A unique violation of the ``COPY``, as the error the caller can act on (`placed`:
    the streams written, by id, with their versions when this append found them and the
    expected versions given)."""
    name = exc.diag.constraint_name
    if name == "events_event_id_key":
        return InvalidInput(
            "an event id of the append is already stored: append_stream takes new events "
            "only (append_many answers a re-send as a no-op); nothing was appended"
        )
    found = _CLASH.search(exc.diag.message_detail or "")
    if name == "events_stream_version_key" and found and int(found[1]) in placed:
        # another appender inserted a row at one of its versions after the lookup
        # (with no expected version given the caller never named one: say what happened)
        stream, base, expected = placed[int(found[1])]
        return ConcurrencyError(stream, base, base + 1, interleaved=expected is None)
    return exc
