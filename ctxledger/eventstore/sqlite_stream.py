"""SQLite's writes of event rows: the multi-row INSERT of an append, and a streamed
append's body (:mod:`ctxledger.eventstore.streamed`), inside the transaction the
store holds (``SQLiteEventStore._transaction``)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

from ctxledger.errors import ConcurrencyError, InvalidInput
from ctxledger.eventstore import sqlite_sql as q
from ctxledger.eventstore.base import StreamedRequest
from ctxledger.eventstore.rows import GENESIS_HASH, chain_tip, row_digest
from ctxledger.eventstore.streamed import checked_request, link_of, link_start, prepared_chunks

COLUMNS = 10  # per event row in q.INSERT_EVENT
#: SQLite's page cache while a streamed append writes (the store's own, 16 MB, is put back
#: after): the rows go in seq order and their indexes' keys grow, so the pages written
#: are seldom read again; what outgrows the cache is spilled to the WAL, still
#: uncommitted. Session 42: 16 MB of an import's peak (of 172 MB at 200k messages),
#: no CPU time lost.
STREAM_CACHE_KIB = 2048


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
    cache = conn.execute(q.CACHE_SIZE).fetchone()[0]
    try:  # (the shrink inside: the finally puts the size back whatever stops it)
        conn.execute(f"{q.CACHE_SIZE} = -{STREAM_CACHE_KIB}")
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
    finally:
        with contextlib.suppress(sqlite3.Error):  # (an error of the append's own wins)
            conn.execute(f"{q.CACHE_SIZE} = {int(cache)}")
    return out, ((first + 1, seq) if seq > first else None)


def _column(
    conn: sqlite3.Connection, sql: str, span: tuple[int, int], last: object
) -> Iterator[Any]:
    """One column of the rows at seqs `span` (inserted), in seq order, then `last`."""
    for (value,) in conn.execute(sql, span):
        yield value
    yield last


def _link(conn: sqlite3.Connection, start: bytes, first: int, held: list[object]) -> str:
    """The link of the append whose rows from seq `first` are inserted but for `held`,
    its last row's values (not yet inserted): read back, a column at a time."""
    last_seq = held[0]
    assert isinstance(last_seq, int)
    span = (first, last_seq - 1)
    lists = (
        _column(conn, sql, span, held[at])
        for sql, at in (
            (q.LINK_IDS, 1),
            (q.LINK_KINDS, 4),
            (q.LINK_SCHEMAS, 5),
            (q.LINK_DIGESTS, 7),
        )
    )
    return link_of(start, lists, _column(conn, q.PAYLOADS, span, held[6]))


def _write_one(
    conn: sqlite3.Connection, request: StreamedRequest, at: tuple[int, str], threshold: int
) -> tuple[int, str, int]:
    """One stream's rows after log position `at` (seq, chain value); returns the new
    position and the stream's version. Its last row waits for the link (it holds it)."""
    seq, prev = at
    stream = request.stream
    found = conn.execute(q.STREAM, (stream,)).fetchone()
    stream_id, version = (found[0], found[1]) if found is not None else (None, 0)
    start: bytes | None = None  # the link header's text before its lists
    first = seq + 1
    held: list[object] = []  # the latest row's values, inserted once the next one comes
    for chunk in prepared_chunks(request, threshold):
        if chunk.blobs:
            conn.executemany(q.INSERT_BLOB, [(r, len(d), d) for r, d in chunk.blobs.items()])
        if start is None:  # (an empty request writes nothing, so it cannot be stale)
            if request.expected_version not in (None, version):
                raise ConcurrencyError(stream, request.expected_version or 0, version)
            if stream_id is None:
                stream_id = conn.execute(q.NEW_STREAM, (stream, seq + 1)).lastrowid
            start = link_start(prev, first, stream, version + 1)
        flat: list[object] = held
        for row, (message_id, tokens) in zip(chunk.rows, chunk.heads, strict=True):
            digest = row_digest(row[3])
            seq, version = seq + 1, version + 1
            flat.extend((seq, row[0], stream_id, version, row[1], row[2], row[3], digest,
                         message_id, tokens))  # fmt: skip
        held = flat[-COLUMNS:]
        del flat[-COLUMNS:]
        insert_rows(conn, flat)
    if start is None:
        return seq, prev, version
    prev = _link(conn, start, first, held)
    held[7] = f"{held[7]}:{prev}"
    insert_rows(conn, held)
    return seq, prev, version


__all__ = ["COLUMNS", "STREAM_CACHE_KIB", "insert_rows", "write_stream"]
