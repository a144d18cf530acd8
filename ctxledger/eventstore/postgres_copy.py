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
the tail and versions from the first round trip's results, hashes the rows while
they stream (:func:`~ctxledger.eventstore.postgres_append.hash_rows`, 64 at a time, so
the server inserts one step while the next is hashed) and ends the ``COPY``: the
commit is the second round trip's answer. The client-side transaction costs four
(head, ``COPY`` start, ``COPY`` end, ``COMMIT``).

A stale expected version aborts the ``COPY`` (nothing written, the seal rolled back
with it) and the caller takes the client-side transaction, which tells a re-send from
a conflict. Unique violations come back from the ``COPY`` like from any statement.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg.errors
from psycopg import generators, pq
from psycopg.abc import PQGen

from ctxledger.eventstore import postgres_schema as q
from ctxledger.eventstore.base import PreparedBatch
from ctxledger.eventstore.rows import GENESIS_HASH, chain_rows, chain_tip

__all__ = ["Placed", "copy_append", "hash_rows"]

Conn = psycopg.Connection[tuple[Any, ...]]

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
_TUPLES = pq.ExecStatus.TUPLES_OK
_COMMAND = pq.ExecStatus.COMMAND_OK
_COPY_IN = pq.ExecStatus.COPY_IN
_STATUSES = [_TUPLES, _TUPLES, _COMMAND, _TUPLES, _TUPLES, _COPY_IN]

#: binary COPY framing: the signature and header, and the trailer
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_TRAILER = b"\xff\xff"
#: one row's fixed parts around its variable fields: (field count, seq, event id
#: length), (stream id, version, kind length), (schema, payload length), hash length
_ROW_A = struct.Struct("!hiqi").pack
_ROW_B = struct.Struct("!iqiqi").pack
_ROW_C = struct.Struct("!iii").pack
_LENGTH = struct.Struct("!i").pack
#: rows hashed and packed per message sent (~50 kB of typical rows)
_STEP = 64


#: one stream's rows placed in the log: (batch, stream id, version before them)
Placed = tuple[PreparedBatch, int, int]


def hash_rows(
    plan: list[Placed], seq: int, prev: str, emit: Callable[[tuple[Any, ...]], None]
) -> None:
    """Each row of `plan` as ``COPY_EVENTS`` columns, hashed after (seq, prev), to `emit`.

    Per-event hashes (as ``ctxledger_seal`` computes them) are made ``_STEP`` rows
    at a time (the chain is the same: each hash names its own seq and version); a copy
    of a linked ledger asks for linked rows, whose link spans its whole append."""
    for batch, stream_id, version in plan:
        rows, chain = batch.rows, batch.chain or "per_event"
        step = len(rows) if chain == "linked" else _STEP
        for start in range(0, len(rows), step):
            part = rows[start : start + step]
            hashes, prev = chain_rows(prev, seq, batch.stream, version, part, chain)
            for (event_id, kind, schema, payload), digest in zip(part, hashes, strict=True):
                seq += 1
                version += 1
                emit((seq, event_id, stream_id, version, kind, schema, payload, digest))


def copy_append(
    conn: Conn, key: int, channel: str, batches: list[PreparedBatch]
) -> dict[str, int] | None:
    """Append per-event-chained `batches` (more than a few rows, no new blobs) in one
    implicit transaction; the streams' new versions, or None when an expected version
    is stale (nothing written: the caller looks again under the client-side path)."""
    names = [b.stream for b in batches]
    new = sorted(b.stream for b in batches if b.rows)  # streams with rows, made if missing
    total = sum(len(b.rows) for b in batches)
    head = psycopg.ClientCursor(conn).mogrify(_HEAD, (key, channel, new, names, channel, total))
    text = conn.info.encoding
    pgconn = conn.pgconn
    with conn.lock:
        pgconn.send_query(head.encode(text))
        results = conn.wait(generators.execute(pgconn))
        for result, status in zip(results, _STATUSES, strict=False):
            if result.status != status:
                raise psycopg.errors.error_from_result(result, encoding=text)
        if len(results) != len(_STATUSES):  # pragma: no cover - the server's protocol
            raise psycopg.OperationalError("the batched append's head answered unexpectedly")
        tail, streams = results[1], results[3]
        found = {
            _text(streams, r, 0, text): (
                int(_text(streams, r, 1, text)),
                int(_text(streams, r, 2, text)),
            )
            for r in range(streams.ntuples)
        }
        out: dict[str, int] = {}
        for batch in batches:
            version = found[batch.stream][1] if batch.stream in found else 0
            if batch.rows and batch.expected_version not in (None, version):
                conn.wait(_abort(pgconn, b"stale expected version"))
                return None
            out[batch.stream] = version + len(batch.rows)
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
    """Hash and pack the rows after (seq, prev) and send them, ``_STEP`` rows a message."""
    text = conn.info.encoding
    pgconn = conn.pgconn
    parts: list[bytes] = [_SIGNATURE]
    kinds: dict[str, bytes] = {}
    count = 0

    def pack(row: tuple[Any, ...]) -> None:
        nonlocal parts, count
        seq, event_id, stream_id, version, kind, schema, payload, digest = row
        ident = event_id.encode(text)
        name = kinds.get(kind) or kinds.setdefault(kind, kind.encode(text))
        hashed = digest.encode(text)
        parts += (
            _ROW_A(8, 8, seq, len(ident)),
            ident,
            _ROW_B(8, stream_id, 8, version, len(name)),
            name,
            _ROW_C(4, schema, len(payload)),
            payload,
            _LENGTH(len(hashed)),
            hashed,
        )
        count += 1
        if count == _STEP:
            conn.wait(generators.copy_to(pgconn, b"".join(parts), flush=False))
            parts, count = [], 0

    plan = [(b, found[b.stream][0], found[b.stream][1]) for b in batches if b.rows]
    hash_rows(plan, seq, prev, pack)
    parts.append(_TRAILER)
    conn.wait(generators.copy_to(pgconn, b"".join(parts), flush=False))


def _abort(pgconn: pq.abc.PGconn, why: bytes) -> PQGen[None]:
    """End the COPY with an error (the implicit transaction rolls back), results consumed."""
    with contextlib.suppress(psycopg.Error):  # the expected "COPY from stdin failed"
        yield from generators.copy_end(pgconn, why)
