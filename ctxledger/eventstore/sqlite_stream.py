"""SQLite's writes of event rows: the multi-row INSERT of an append, and a streamed
append's body (:mod:`ctxledger.eventstore.streamed`), inside the transaction the
store holds (``SQLiteEventStore._transaction``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator

from ctxledger.errors import ConcurrencyError, InvalidInput
from ctxledger.eventstore import sqlite_sql as q
from ctxledger.eventstore.base import StreamedRequest
from ctxledger.eventstore.rows import GENESIS_HASH, chain_tip, row_digest
from ctxledger.eventstore.streamed import LinkHeader, checked_request, link_of, prepared_chunks

COLUMNS = 10  # per event row in q.INSERT_EVENT


def insert_rows(conn: sqlite3.Connection, flat: list[object]) -> None:
    """INSERT the flattened event rows: whole blocks of q.BLOCK rows, then the rest one by one."""
    step = q.BLOCK * COLUMNS
    whole = len(flat) - len(flat) % step
    for start in range(0, whole, step):
        conn.execute(q.INSERT_BLOCK, flat[start : start + step])
    if len(flat) - whole == COLUMNS:  # the common one-event append: skip executemany
        conn.execute(q.INSERT_EVENT, flat[whole:])
    elif whole < len(flat):
        conn.executemany(
            q.INSERT_EVENT, [flat[i : i + COLUMNS] for i in range(whole, len(flat), COLUMNS)]
        )


def write_stream(
    conn: sqlite3.Connection, requests: Iterable[StreamedRequest], threshold: int
) -> tuple[dict[str, int], tuple[int, int] | None]:
    """Insert every request's events, a chunk at a time; (new versions, seqs written)."""
    tail = conn.execute(q.TAIL).fetchone()
    seq, prev = (tail[0], chain_tip(tail[1])) if tail is not None else (0, GENESIS_HASH)
    first, out, seen = seq, {}, set[str]()
    try:
        for request in requests:
            request = checked_request(request, seen)
            seq, prev, out[request.stream] = _write_one(conn, request, (seq, prev), threshold)
    except sqlite3.IntegrityError as err:  # (not a damaged file, as the store would say)
        if "event_id" not in str(err):
            raise
        raise InvalidInput(
            "an event id of the append is already stored: append_stream takes new events "
            "only (append_many answers a re-send as a no-op); nothing was appended"
        ) from err
    return out, ((first + 1, seq) if seq > first else None)


def _payloads(conn: sqlite3.Connection, first: int, last: int) -> Iterator[bytes]:
    for (payload,) in conn.execute(q.PAYLOADS, (first, last)):
        yield payload


def _write_one(
    conn: sqlite3.Connection, request: StreamedRequest, at: tuple[int, str], threshold: int
) -> tuple[int, str, int]:
    """One stream's rows after log position `at` (seq, chain value); returns the new
    position and the stream's version. Its last row waits for the link (it holds it)."""
    seq, prev = at
    stream = request.stream
    found = conn.execute(q.STREAM, (stream,)).fetchone()
    stream_id, version = (found[0], found[1]) if found is not None else (None, 0)
    header: LinkHeader | None = None
    held: list[object] = []  # the latest row's values, inserted once the next one comes
    for chunk in prepared_chunks(request, threshold):
        if chunk.blobs:
            conn.executemany(q.INSERT_BLOB, [(r, len(d), d) for r, d in chunk.blobs.items()])
        if header is None:  # (an empty request writes nothing, so it cannot be stale)
            if request.expected_version not in (None, version):
                raise ConcurrencyError(stream, request.expected_version or 0, version)
            if stream_id is None:
                stream_id = conn.execute(q.NEW_STREAM, (stream, seq + 1)).lastrowid
            header = LinkHeader(prev, seq + 1, stream, version + 1)
        flat: list[object] = held
        for row, (message_id, tokens) in zip(chunk.rows, chunk.heads, strict=True):
            digest = row_digest(row[3])
            header.add(row, digest)
            seq, version = seq + 1, version + 1
            flat.extend((seq, row[0], stream_id, version, row[1], row[2], row[3], digest,
                         message_id, tokens))  # fmt: skip
        held = flat[-COLUMNS:]
        del flat[-COLUMNS:]
        insert_rows(conn, flat)
    if header is None:
        return seq, prev, version
    last_seq, payload, last_digest = held[0], held[6], held[7]
    assert isinstance(last_seq, int) and isinstance(payload, bytes)
    prev = link_of(header, _payloads(conn, last_seq - len(header) + 1, last_seq - 1), payload)
    held[7] = f"{last_digest}:{prev}"
    insert_rows(conn, held)
    return seq, prev, version


__all__ = ["COLUMNS", "insert_rows", "write_stream"]
