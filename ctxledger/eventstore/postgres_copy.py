"""A batched PostgreSQL append in two round trips (see :mod:`ctxledger.eventstore.postgres_append`).

A batch of more than ``CALL_ROWS`` events without new blobs (a bulk import, a
``migrate`` of per-event rows, a 1,000-event batch) is one simple-query message:

    SELECT pg_advisory_xact_lock(key);        -- the append lock (gapless seq)
    EXECUTE ctxledger_seal(channel);          -- what waits goes first; the tail
    INSERT INTO streams … ON CONFLICT DO NOTHING;   -- missing streams, in name order
    EXECUTE ctxledger_streams(names);         -- ids and versions
    SELECT pg_notify(channel, …);             -- delivered at commit
    COPY events (…) FROM STDIN (FORMAT BINARY)

PostgreSQL runs a message of several statements as one implicit transaction that
commits when its last statement ends, so the lock is held from the tail read through
the rows' commit and its flush, as in the client-side transaction. The client reads
the tail and versions from the first round trip's results, hashes and packs the rows
and sends them 512 at a time while the server inserts the step before (smaller steps
overlapped more but made the server wait for data, and wake, more often: more server
CPU per row on a busy machine) and ends the ``COPY``: the commit is the second round
trip's answer. The client-side transaction costs four
(head, ``COPY`` start, ``COPY`` end, ``COMMIT``).

A stale expected version aborts the ``COPY`` (nothing written, the seal rolled back
with it) and the caller takes the client-side transaction, which tells a re-send from
a conflict. Unique violations come back from the ``COPY`` like from any statement.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import struct
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import psycopg
import psycopg.errors
from psycopg import generators, pq
from psycopg.abc import PQGen

from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore.base import AppendRequest
from ctxledger.eventstore.postgres_errors import leaving
from ctxledger.eventstore.preparing import PreparedBatch
from ctxledger.eventstore.rows import GENESIS_HASH, chain_header, chain_rows, chain_tip

__all__ = [
    "PREPARED",
    "Placed",
    "RowPacker",
    "copy_append",
    "copy_shaped",
    "hash_rows",
    "unprepared",
]

Conn = psycopg.Connection[tuple[Any, ...]]

#: the statements each pool connection prepares (SQL-level: ``EXECUTE``d in the appends'
#: multi-statement messages; ``$n`` parameters, each used once and in order)
PREPARED = {
    "ctxledger_seal(text)": q.SEAL,
    "ctxledger_streams(text[])": q.STREAMS_NAMED.replace("%s", "$1"),
    "ctxledger_next_streams(integer)": q.NEXT_STREAM_IDS,
    "ctxledger_insert(bigint, text, bigint, bigint, text, integer, bytea, text)": (
        q.INSERT_EVENTS + "($1, $2, $3, $4, $5, $6, $7, $8)"
    ),
}


def unprepared(sql: str) -> str:
    """`sql` with each ``EXECUTE name(%s, ...)`` of a :data:`PREPARED` statement replaced by
    its text (``%s`` parameters): for a connection that cannot keep prepared statements."""
    for name, statement in PREPARED.items():
        call = f"EXECUTE {name.split('(')[0]}({', '.join(['%s'] * (name.count(',') + 1))})"
        sql = sql.replace(call, re.sub(r"\$\d+", "%s", statement))
    return sql


_HEAD = (
    "SELECT pg_advisory_xact_lock(%s);"
    "EXECUTE ctxledger_seal(%s);"
    "INSERT INTO streams (stream_id, stream)"
    " SELECT nextval('streams_id_seq'), m.n FROM unnest(%s::text[]) AS m(n)"
    " WHERE NOT EXISTS (SELECT 1 FROM streams AS s WHERE s.stream = m.n)"
    " ORDER BY m.n ON CONFLICT (stream) DO NOTHING;"
    "EXECUTE ctxledger_streams(%s);"
    "SELECT pg_notify(%s, ((SELECT coalesce(max(seq), 0) FROM events) + %s)::text);"
) + q.COPY_EVENTS
_HEAD_PLAIN = unprepared(_HEAD)
_TUPLES = pq.ExecStatus.TUPLES_OK
_COMMAND = pq.ExecStatus.COMMAND_OK
_COPY_IN = pq.ExecStatus.COPY_IN
_STATUSES = [_TUPLES, _TUPLES, _COMMAND, _TUPLES, _TUPLES, _COPY_IN]

#: binary COPY framing: the signature and header, and the trailer
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_TRAILER = b"\xff\xff"
#: a row up to its payload: field count; seq; event id; stream id; version; kind; schema;
#: the payload's length (each field after its length; ``% (len(id), len(kind))``)
_ROW = "!hiqi%dsiqiqi%dsiii"
#: the length of the hash field (sha256 hex)
_HASH_LENGTH = struct.pack("!i", 64)
#: rows hashed and packed per message sent (~400 kB of typical rows)
_STEP = 512
#: the largest ``CopyData`` message sent (psycopg's own limit: a much larger buffer can make
#: libpq loop forever, psycopg issue #255)
_MESSAGE = 128 * 1024


#: one stream's rows placed in the log: (batch, stream id, version before them)
Placed = tuple[PreparedBatch, int, int]
T = TypeVar("T")


class Appending(Protocol):
    """What :func:`copy_append` needs of the store's appender (``postgres_append.Appender``)."""

    key: int
    channel: str
    plain: bool

    def held(self, conn: Conn, fn: Callable[[Conn], T]) -> T: ...


def hash_rows(
    plan: list[Placed], seq: int, prev: str, emit: Callable[[tuple[Any, ...]], None]
) -> None:
    """Each row of `plan` as ``COPY_EVENTS`` columns, hashed after (seq, prev), to `emit`.

    Per-event hashes (as ``ctxledger_seal`` computes them) are made ``_STEP`` rows
    at a time (the chain is the same: each hash names its own seq and version); a copy
    of a linked ledger asks for linked rows, whose link spans its whole append."""
    for batch, stream_id, version in plan:
        rows, chain = batch.rows, batch.chain or "per_event"
        step = max(len(rows), 1) if chain == "linked" else _STEP
        for start in range(0, len(rows), step):
            part = rows[start : start + step]
            hashes, prev = chain_rows(prev, seq, batch.stream, version, part, chain)
            for (event_id, kind, schema, payload), digest in zip(part, hashes, strict=True):
                seq += 1
                version += 1
                emit((seq, event_id, stream_id, version, kind, schema, payload, digest))


def copy_shaped(requests: Sequence[AppendRequest], more_than: int) -> bool:
    """True for an append :func:`copy_append` can start before it is prepared: more than
    `more_than` events, no linked rows asked for, streams that are ids (nothing the head
    could not bind; :func:`~ctxledger.eventstore.preparing.prepare_append` checks the rest)."""
    total = 0
    for request in requests:
        stream = request.stream
        if type(stream) is not str or not stream or "\x00" in stream or request.chain == "linked":
            return False
        try:
            total += len(request.events)
        except TypeError:
            return False
    return total > more_than


def copy_append(
    conn: Conn,
    appender: Appending,
    heads: Sequence[tuple[str, int]],
    prepare: Callable[[], list[PreparedBatch] | None],
) -> dict[str, int] | None:
    """:func:`_copy_append` on the connection's statements (``appender.held``): its
    head's ``EXECUTE``s, or plain statements where they do not hold."""
    with leaving("nothing"):  # (one transaction)
        return appender.held(conn, lambda c: _copy_append(c, appender, heads, prepare))


def _copy_append(
    conn: Conn,
    appender: Appending,
    heads: Sequence[tuple[str, int]],
    prepare: Callable[[], list[PreparedBatch] | None],
) -> dict[str, int] | None:
    """Append per-event-chained batches of more than a few rows in one implicit
    transaction; the streams' new versions, or None when nothing was written because
    an expected version is stale or ``prepare`` declined (returned None).

    `heads` are the streams and their event counts, in request order; ``prepare()``
    validates and encodes the batches (:func:`~ctxledger.eventstore.preparing.prepare_append`)
    while the head is on its way and the server takes the lock and seals: an error it
    raises aborts the ``COPY`` (nothing written) and propagates."""
    names = [stream for stream, _ in heads]
    new = sorted(stream for stream, n in heads if n)  # streams with rows, made if missing
    total = sum(n for _, n in heads)
    key, channel = appender.key, appender.channel
    params = (key, channel, new, names, channel, total)
    head = psycopg.ClientCursor(conn).mogrify(_HEAD_PLAIN if appender.plain else _HEAD, params)
    text = conn.info.encoding
    pgconn = conn.pgconn
    with conn.lock:
        pgconn.send_query(head.encode(text))
        conn.wait(generators.send(pgconn))
        try:
            batches = prepare()
        except BaseException:
            results = conn.wait(generators.fetch_many(pgconn))
            if results and results[-1].status == _COPY_IN:
                conn.wait(_abort(pgconn, b"the append was refused before any row was sent"))
            raise
        results = conn.wait(generators.fetch_many(pgconn))
        _check(results, text)
        found = {
            _text(results[3], r, 0, text): (
                int(_text(results[3], r, 1, text)),
                int(_text(results[3], r, 2, text)),
            )
            for r in range(results[3].ntuples)
        }
        out: dict[str, int] = {}
        for batch in batches or ():
            version = found[batch.stream][1] if batch.stream in found else 0
            if batch.rows and batch.expected_version not in (None, version):
                batches = None  # stale: the client-side path tells a re-send from a conflict
                break
            out[batch.stream] = version + len(batch.rows)
        if batches is None:
            conn.wait(_abort(pgconn, b"the append took another way"))
            return None
        tail = results[1]
        if tail.ntuples and tail.get_value(0, 0) is not None:
            seq, prev = int(_text(tail, 0, 0, text)), chain_tip(_text(tail, 0, 1, text))
        else:
            seq, prev = 0, GENESIS_HASH
        try:
            _stream_rows(conn, batches, found, seq, prev)
        except BaseException:
            conn.wait(_abort(pgconn, b"the client stopped the append"))
            raise
        conn.wait(generators.copy_end(pgconn, None))
    return out


def _check(results: list[pq.abc.PGresult], encoding: str) -> None:
    """Raise the head's error, if a statement failed (the server then ran no more)."""
    for result, status in zip(results, _STATUSES, strict=False):
        if result.status != status:
            raise psycopg.errors.error_from_result(result, encoding=encoding)
    if len(results) != len(_STATUSES):  # pragma: no cover - the server's protocol
        raise psycopg.OperationalError("the batched append's head answered unexpectedly")


def _text(result: pq.abc.PGresult, row: int, column: int, encoding: str) -> str:
    value = result.get_value(row, column)
    assert value is not None
    return bytes(value).decode(encoding)


def _stream_rows(
    conn: Conn,
    batches: list[PreparedBatch],
    found: dict[str, tuple[int, int]],
    seq: int,
    prev: str,
) -> None:
    """Hash and pack the rows after (seq, prev) as binary ``COPY`` rows (:class:`RowPacker`)."""
    packer = RowPacker(conn, seq, prev)
    for batch in batches:
        if batch.rows:
            stream_id, version = found[batch.stream]
            packer.add(batch.rows, batch.stream, stream_id, version)
    packer.finish()


class RowPacker:
    """One ``COPY``'s data: rows hashed (per-event rows, exactly
    :func:`~ctxledger.eventstore.rows.chain_rows`) after (seq, prev) and packed as binary
    ``COPY`` rows, sent ``_STEP`` at a time; ``seq`` and ``prev`` follow the last row.

    One loop, one ``struct`` call per row (a ``Struct`` per shape of the id and kind):
    the row's fixed fields and its id and kind, then the payload, then the hash."""

    def __init__(self, conn: Conn, seq: int, prev: str) -> None:
        self.conn, self.seq, self.prev = conn, seq, prev
        self._shapes: dict[tuple[int, int], Callable[..., bytes]] = {}
        self._parts: list[bytes] = [_SIGNATURE]
        self._count = 0

    def add(
        self, rows: list[tuple[str, str, int, bytes]], stream: str, stream_id: int, version: int
    ) -> int:
        """Pack `rows` of `stream` after its `version`; returns the version after them."""
        conn, text = self.conn, self.conn.info.encoding
        sha256, header, shapes = hashlib.sha256, chain_header, self._shapes
        seq, prev, parts, count = self.seq, self.prev, self._parts, self._count
        for event_id, kind, schema, payload in rows:
            seq += 1
            version += 1
            digest = sha256(header((prev, seq, stream, version, event_id, kind, schema)))
            digest.update(payload)
            prev = digest.hexdigest()
            ident, name = event_id.encode(text), kind.encode(text)
            shape = (len(ident), len(name))
            pack = shapes.get(shape)
            if pack is None:
                pack = shapes[shape] = struct.Struct(_ROW % shape).pack
            parts += (
                pack(8, 8, seq, shape[0], ident, 8, stream_id, 8, version, shape[1], name, 4,
                     schema, len(payload)),
                payload,
                _HASH_LENGTH,
                prev.encode(),
            )  # fmt: skip
            count += 1
            if count == _STEP:
                send_rows(conn, parts)
                parts, count = [], 0
        self.seq, self.prev, self._parts, self._count = seq, prev, parts, count
        return version

    def finish(self) -> None:
        """The trailer, and whatever waits, sent."""
        self._parts.append(_TRAILER)
        send_rows(self.conn, self._parts)
        self._parts, self._count = [], 0


def send_rows(conn: Conn, parts: list[bytes]) -> None:
    """Hand one step of ``COPY`` data to libpq in ``CopyData`` messages of at most
    ``_MESSAGE`` bytes (sent as its buffer fills; flushed at the end)."""
    data = memoryview(b"".join(parts))
    for start in range(0, len(data), _MESSAGE):
        conn.wait(generators.copy_to(conn.pgconn, data[start : start + _MESSAGE], flush=False))


def _abort(pgconn: pq.abc.PGconn, why: bytes) -> PQGen[None]:
    """End the COPY with an error (the implicit transaction rolls back), results consumed."""
    with contextlib.suppress(psycopg.Error):  # the expected "COPY from stdin failed"
        yield from generators.copy_end(pgconn, why)
