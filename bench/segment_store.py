"""One row per append ("segments"): issue 14's candidate SQLite layout, write path and
the reads that check it (stage 1; not a store format of ctxledger).

A segment holds one append to one stream: its link header (the JSON that
:func:`~ctxledger.eventstore.rows.link_hash` hashes: previous link, first seq, stream,
first version, and every event's id, kind, schema and crc digest), the payloads
concatenated, their lengths, the message heads and the link. A WITHOUT ROWID table maps
each event id to its seq, so a re-sent id is found and a clashing one refused. The
link is the linked format's, hash for hash: the chain value a segment hands on is the
one the same append leaves in the events table, so exploding a segment gives the rows
that table would hold, and every reader of those rows (decode, the chain verifier)
works on it unchanged. A log may mix both: reads merge the two tables by seq.

:class:`SegmentStore` is :class:`~ctxledger.eventstore.SQLiteEventStore` with appends
written as segments (``most=N``: at most N events each, the link on an append's last)
and every read of the event-store contract reading both tables. Not built: a streamed
append (refused), per-event copies (refused), and the readers outside the store class
(``longscan``, the head backfill, read-only opens): see ``docs/notes/s42-segment.md``.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sqlite3
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from ctxledger.errors import ConcurrencyError
from ctxledger.events import MessageAppended, Recorded
from ctxledger.eventstore import sqlite_sql as q
from ctxledger.eventstore.preparing import PreparedBatch
from ctxledger.eventstore.resends import StoredAs, already_stored, as_stored, blobs_then
from ctxledger.eventstore.rows import (
    GENESIS_HASH,
    MESSAGE_SCHEMA,
    ColumnRow,
    HeadedRow,
    HeadRow,
    chain_tip,
    decode_bodies,
)
from ctxledger.eventstore.sqlite import SQLiteEventStore
from ctxledger.eventstore.verifier import ChainVerifier, VerifyReport
from ctxledger.messages import JSON

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS segments (first_seq INTEGER PRIMARY KEY,"
    " stream_id INTEGER NOT NULL, first_version INTEGER NOT NULL,"
    " last_version INTEGER NOT NULL, link TEXT NOT NULL, header BLOB NOT NULL,"
    " heads BLOB, lengths BLOB NOT NULL, payloads BLOB NOT NULL);"
    "CREATE UNIQUE INDEX IF NOT EXISTS segments_by_stream ON segments (stream_id, last_version);"
    "CREATE TABLE IF NOT EXISTS segment_ids (event_id TEXT PRIMARY KEY,"
    " seq INTEGER NOT NULL) WITHOUT ROWID;"
)
_TAIL = (
    "SELECT first_seq + last_version - first_version, link FROM segments"
    " ORDER BY first_seq DESC LIMIT 1"
)
# payloads last: reading the columns before them never walks their overflow pages
_INSERT_SEGMENT = (
    "INSERT INTO segments (first_seq, stream_id, first_version, last_version, header,"
    " lengths, payloads, heads, link) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_ID_BLOCK = 250  # ids per multi-row INSERT (500 parameters)
_INSERT_ID = "INSERT INTO segment_ids (event_id, seq) VALUES (?, ?)"
_INSERT_IDS = _INSERT_ID + ", (?, ?)" * (_ID_BLOCK - 1)
_STREAM = (
    "SELECT s.stream_id, max("
    "(SELECT coalesce(max(version), 0) FROM events AS e WHERE e.stream_id = s.stream_id),"
    " (SELECT coalesce(max(last_version), 0) FROM segments AS g WHERE g.stream_id = s.stream_id))"
    " FROM streams AS s WHERE s.stream = ?"
)
_ID_SEQ = "SELECT seq FROM segment_ids WHERE event_id = ?"
_SEGMENT_COLUMNS = (
    "SELECT g.first_seq, coalesce(s.stream, ''), g.first_version, g.header, g.lengths,"
    " g.payloads, g.heads, g.link FROM segments AS g LEFT JOIN streams AS s USING (stream_id)"
)
# the segments holding seqs from..to: the one that starts at or before `from`, and on
_SEGMENTS = (
    _SEGMENT_COLUMNS + " WHERE g.first_seq >= coalesce((SELECT max(first_seq) FROM segments"
    " WHERE first_seq <= ?), 0) AND g.first_seq <= ? ORDER BY g.first_seq LIMIT ?"
)
# the segments holding given seqs (a JSON array): the last one starting at or before each
_SEGMENTS_AT = (
    _SEGMENT_COLUMNS + " WHERE g.first_seq IN (SELECT (SELECT max(first_seq) FROM segments"
    " WHERE first_seq <= j.value) FROM json_each(?) AS j) ORDER BY g.first_seq"
)
# the same without the payloads (read_at: each payload is then read on its own)
_METAS_AT = _SEGMENTS_AT.replace("g.payloads", "x''")
_PAYLOAD_AT = "SELECT substr(payloads, ?, ?) FROM segments WHERE first_seq = ?"
_EVENTS_AT = q.VERIFY_HEADS.replace(
    "WHERE e.seq >= ? ORDER BY e.seq LIMIT ?",
    "WHERE e.seq IN (SELECT value FROM json_each(?)) ORDER BY e.seq",
)
# a stream's segments holding versions from..to, in version order
_STREAM_SEGMENTS = (
    _SEGMENT_COLUMNS + " WHERE g.stream_id = ? AND g.last_version >= ? AND g.first_version <= ?"
    " ORDER BY g.last_version"
)
_STREAM_EVENTS = q.VERIFY_HEADS.replace(
    "WHERE e.seq >= ? ORDER BY e.seq LIMIT ?",
    "WHERE e.stream_id = ? AND e.version >= ? AND e.version <= ? ORDER BY e.version",
)
_STREAM_ID = "SELECT stream_id FROM streams WHERE stream = ?"
# a rebuild's read: no payloads (they come last in the row, see _INSERT_SEGMENT)
_HEAD_SEGMENTS = (
    "SELECT first_seq, stream_id, header, heads FROM segments WHERE first_seq >="
    " coalesce((SELECT max(first_seq) FROM segments WHERE first_seq <= ?), 0)"
    " AND first_seq <= ? ORDER BY first_seq"
)
_STREAMS = (
    "SELECT s.stream, max("
    "(SELECT coalesce(max(version), 0) FROM events AS e WHERE e.stream_id = s.stream_id),"
    " (SELECT coalesce(max(last_version), 0) FROM segments AS g WHERE g.stream_id = s.stream_id))"
    " FROM streams AS s ORDER BY s.stream_id"
)
_SEGMENT_VERSION_AT = (
    "SELECT min(last_version, first_version + ? - first_seq) FROM segments"
    " WHERE stream_id = ? AND first_seq <= ? ORDER BY last_version DESC LIMIT 1"
)
_EVENTS_VERSION_AT = "SELECT max(version) FROM events WHERE stream_id = ? AND seq <= ?"
_VERIFY_EVENTS = q.VERIFY_HEADS.replace("e.seq >= ?", "e.seq >= ? AND e.seq <= ?")
_encode: Callable[[object], bytes] = msgspec.json.Encoder().encode
_Header = tuple[str, int, str, int, list[str], list[str], list[int], list[str]]
_decode_header = msgspec.json.Decoder(_Header).decode
_decode_heads = msgspec.json.Decoder(list[tuple[str | None, int | None]]).decode
#: a segment as _SEGMENTS reads it
Found = tuple[int, str, int, bytes, bytes, bytes, bytes | None, str]


def tail(conn: sqlite3.Connection) -> tuple[int, str]:
    """(last seq, chain value) of a log kept in segments and/or event rows."""
    ends = [conn.execute(_TAIL).fetchone(), conn.execute(q.TAIL).fetchone()]
    found = [(int(row[0]), chain_tip(row[1])) for row in ends if row is not None]
    return max(found) if found else (0, GENESIS_HASH)


def insert_ids(conn: sqlite3.Connection, flat: list[object]) -> None:
    """INSERT (event id, seq) pairs: whole blocks, then the rest one by one."""
    step = _ID_BLOCK * 2
    whole = len(flat) - len(flat) % step
    for start in range(0, whole, step):
        conn.execute(_INSERT_IDS, flat[start : start + step])
    if whole < len(flat):
        conn.executemany(_INSERT_ID, [flat[i : i + 2] for i in range(whole, len(flat), 2)])


def write_segment(
    conn: sqlite3.Connection,
    at: tuple[int, str],
    stream_id: int,
    version: int,
    batch: PreparedBatch,
    most: int | None = None,
) -> tuple[int, str]:
    """Insert one batch (linked) after log position `at`; the new position. One segment,
    or with `most` segments of at most that many events, only the last holding the link
    (the rest are an append still open, as the verifier reads linked rows)."""
    seq, prev = at
    rows = batch.rows
    ids = [row[0] for row in rows]
    kinds = [row[1] for row in rows]
    schemas = [row[2] for row in rows]
    payloads = [row[3] for row in rows]
    crc = zlib.crc32
    digests = [str(crc(p)) for p in payloads]
    header = _encode((prev, seq + 1, batch.stream, version + 1, ids, kinds, schemas, digests))
    joined = b"".join(payloads)
    sha = hashlib.sha256(header)
    sha.update(joined)
    link = sha.hexdigest()
    heads = batch.heads
    count = len(rows)
    sizes = list(map(len, payloads))
    step = most or count
    offset = 0
    for a in range(0, count, step):
        b = min(a + step, count)
        part = header if step == count else _encode(
            (prev, seq + 1 + a, batch.stream, version + 1 + a,
             ids[a:b], kinds[a:b], schemas[a:b], digests[a:b])
        )  # fmt: skip
        end = offset + sum(sizes[a:b])
        conn.execute(
            _INSERT_SEGMENT,
            (seq + 1 + a, stream_id, version + 1 + a, version + b, part,
             struct.pack(f"<{b - a}I", *sizes[a:b]),
             joined if step == count else joined[offset:end],
             _encode(heads[a:b]) if heads is not None else None, link if b == count else ""),
        )  # fmt: skip
        offset = end
    flat: list[object] = [None] * (2 * count)
    flat[0::2] = ids
    flat[1::2] = range(seq + 1, seq + count + 1)
    insert_ids(conn, flat)
    return seq + count, link


def broken(first_seq: int, stream: Any, first_version: int, seq: int) -> HeadedRow:
    """The row standing at `seq` for a segment that cannot be split: no payload, so it
    fails its digest (verify) and every decode of it (InvalidEvent)."""
    return (seq, stream, first_version + seq - first_seq, "", "", 0, b"", "?:", None, None)


def exploded(found: Found, lo: int = 0, hi: int = 2**62) -> list[HeadedRow]:
    """The rows a segment holds with lo <= seq <= hi, as the events table would hold
    them (verify's HeadedRow); a segment that cannot be split gives one :func:`broken`
    row, at its first seq or at `lo` if that is later (a read starting inside it)."""
    first_seq, stream, first_version, header, lengths, payloads, heads, link = found
    try:
        parts = _decode_header(header)
        ids, kinds, schemas, digests = parts[4], parts[5], parts[6], parts[7]
        count = len(digests)
        ends = list(itertools.accumulate(struct.unpack(f"<{count}I", lengths)))
        held = _decode_heads(heads) if heads is not None else [(None, None)] * count
        if not (count == len(ids) == len(kinds) == len(schemas) == len(held) >= 1):
            raise ValueError("columns of unequal length")
    except (msgspec.DecodeError, msgspec.ValidationError, struct.error, ValueError):
        at = max(first_seq, lo)
        return [broken(first_seq, stream, first_version, at)] if at <= hi else []
    a, b = max(lo - first_seq, 0), min(hi - first_seq + 1, count)
    if a >= b:
        return []
    starts = [0, *ends]
    bodies = [payloads[starts[i] : ends[i]] for i in range(a, b)]
    hashes = digests[a:b]
    if b == count and link:
        hashes[-1] = f"{hashes[-1]}:{link}"
    mids, tokens = zip(*held[a:b], strict=True)
    return list(
        zip(range(first_seq + a, first_seq + b), itertools.repeat(stream),
            range(first_version + a, first_version + b), ids[a:b], kinds[a:b], schemas[a:b],
            bodies, hashes, mids, tokens, strict=False)
    )  # fmt: skip


class SegmentStore(SQLiteEventStore):
    """Appends as segments; ``read_all``, ``stream_version`` and ``verify`` read both tables."""

    def __init__(
        self, path: str | os.PathLike[str], *, most: int | None = None, **options: Any
    ) -> None:
        self._most = most  # events per segment at most (None: one segment per append)
        self._event_rows = True  # the events table holds rows (found at each append until so)
        super().__init__(path, **options)
        with self._lock, self._errors("open the ledger"):
            self._conn.executescript(SCHEMA)
            self._event_rows = self._has_event_rows()

    def _has_event_rows(self) -> bool:
        """Whether the events table holds any row. segment_ids' key sees only ids written
        as segments: a re-send or clash of an id in an event row must be looked up."""
        return self._conn.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None

    def _versions(
        self, batches: list[PreparedBatch]
    ) -> tuple[list[tuple[int | None, int]], tuple[PreparedBatch, int] | None]:
        current: list[tuple[int | None, int]] = []
        stale: tuple[PreparedBatch, int] | None = None
        for batch in batches:
            row = self._conn.execute(_STREAM, (batch.stream,)).fetchone()
            stream_id, version = (row[0], row[1]) if row is not None else (None, 0)
            if stale is None and batch.rows and batch.expected_version not in (None, version):
                stale = (batch, version)
            current.append((stream_id, version))
        return current, stale

    def stream_version(self, stream: str) -> int:
        with self._lock, self._errors("read a stream version"):
            row = self._conn.execute(_STREAM, (stream,)).fetchone()
        return int(row[1]) if row is not None else 0

    def last_seq(self) -> int:
        with self._lock, self._errors("read the log's end"):
            return tail(self._conn)[0]

    def _stored_in(self, event_id: str) -> StoredAs | None:
        found = self._conn.execute(_ID_SEQ, (event_id,)).fetchone()
        if found is None:
            return super()._stored_in(event_id)
        seq = int(found[0])
        row = next(r for s in self._segments(seq, seq) for r in exploded(s) if r[0] == seq)
        return (row[1], row[4], row[5], as_stored(row[6]))

    def _write(
        self, batches: list[PreparedBatch], new_blobs: dict[str, bytes], check_ids: bool
    ) -> dict[str, int]:
        conn = self._conn
        current, stale = self._versions(batches)
        # rows another store wrote since the open (in this transaction: nothing can follow)
        self._event_rows = self._event_rows or self._has_event_rows()
        if stale is not None or check_ids or self._event_rows:
            blobs = blobs_then(new_blobs, self._blob_in)
            if already_stored(batches, self._stored_in, blobs):
                return {b.stream: v for b, (_, v) in zip(batches, current, strict=True)}
            if stale is not None:
                raise ConcurrencyError(stale[0].stream, stale[0].expected_version or 0, stale[1])
        if new_blobs:
            conn.executemany(q.INSERT_BLOB, [(r, len(d), d) for r, d in new_blobs.items()])
        at = tail(conn)
        first = at[0]
        out: dict[str, int] = {}
        for batch, (stream_id, version) in zip(batches, current, strict=True):
            out[batch.stream] = version + len(batch.rows)
            if not batch.rows:
                continue
            if batch.chain == "per_event":
                raise NotImplementedError("a per-event copy is not written as segments")
            if stream_id is None:
                stream_id = int(
                    conn.execute(q.NEW_STREAM, (batch.stream, at[0] + 1)).lastrowid or 0
                )
            at = write_segment(conn, at, stream_id, version, batch, self._most)
        self._wrote.span = (first + 1, at[0]) if at[0] > first else None
        return out

    def append_stream(self, requests: Iterable[Any]) -> dict[str, int]:
        """Not built: a streamed append writes event rows after the events table's own
        tail, which in a log continued in segments is not the log's end."""
        raise NotImplementedError("the segment prototype has no streamed append")

    def _segments(self, from_seq: int, to_seq: int, limit: int = 2**62) -> list[Found]:
        """The segments holding seqs from..to (at most `limit`), in seq order."""
        found: list[Found] = self._conn.execute(_SEGMENTS, (from_seq, to_seq, limit)).fetchall()
        return found

    def _headed(self, from_seq: int, limit: int) -> list[HeadedRow]:
        """Up to `limit` rows from `from_seq` on, from both tables, in seq order."""
        upto = from_seq + limit - 1  # seqs are dense: no more rows than that can follow
        with self._lock, self._errors("read the log"):
            rows: list[HeadedRow] = self._conn.execute(
                _VERIFY_EVENTS, (from_seq, upto, limit)
            ).fetchall()
            found = self._segments(from_seq, upto, limit)
        if rows:
            rows += [r for g in found for r in exploded(g, from_seq, upto)]
            rows.sort(key=lambda r: r[0])
        else:
            rows = [r for g in found for r in exploded(g, from_seq, upto)]
        return rows[:limit]

    def _stored_rows(
        self, from_seq: int, to_seq: int, limit: int
    ) -> list[tuple[int, int, int, bytes, str]]:
        rows = self._headed(from_seq, limit)
        return [(r[0], r[2], r[5], r[6], r[7]) for r in rows if r[0] <= to_seq]

    def _rows_at(self, seqs: Iterable[int]) -> list[HeadedRow]:
        """The rows at `seqs` from both tables, in seq order (only their segments read)."""
        wanted = sorted(set(seqs))
        asked = _encode(wanted)
        with self._lock, self._errors("read the log"):
            rows: list[HeadedRow] = self._conn.execute(_EVENTS_AT, (asked,)).fetchall()
            found = self._conn.execute(_METAS_AT, (asked,)).fetchall()
            keep = set(wanted).difference(r[0] for r in rows)
            for i, meta in enumerate(found):  # each seq left to the segment before it
                end = found[i + 1][0] if i + 1 < len(found) else 2**62
                rows += self._picked(meta, {s for s in keep if meta[0] <= s < end})
        rows.sort(key=lambda r: r[0])
        return rows

    def _picked(self, meta: Found, keep: set[int]) -> list[HeadedRow]:
        """The rows at `keep` (seqs this segment would hold) of a segment read without its
        payloads: each payload is read alone (``substr``: SQLite walks the blob's overflow
        pages only up to it). A segment that cannot be split gives a broken row at each."""
        first_seq, stream, first_version, header, lengths, _, heads, link = meta
        try:
            parts = _decode_header(header)
            count = len(parts[7])
            ends = list(itertools.accumulate(struct.unpack(f"<{count}I", lengths)))
            held = _decode_heads(heads) if heads is not None else [(None, None)] * count
            if not (count == len(parts[4]) == len(parts[5]) == len(parts[6]) == len(held)):
                raise ValueError("columns of unequal length")
        except (msgspec.DecodeError, msgspec.ValidationError, struct.error, ValueError):
            return [broken(first_seq, stream, first_version, s) for s in sorted(keep)]
        out: list[HeadedRow] = []
        for i in range(count):
            if first_seq + i not in keep:
                continue
            start = ends[i - 1] if i else 0
            payload = self._conn.execute(
                _PAYLOAD_AT, (start + 1, ends[i] - start, first_seq)
            ).fetchone()[0]
            digest = parts[7][i] if i < count - 1 or not link else f"{parts[7][i]}:{link}"
            out.append((first_seq + i, stream, first_version + i, parts[4][i], parts[5][i],
                        parts[6][i], bytes(payload), digest, *held[i]))  # fmt: skip
        return out

    def read_at(self, seqs: Sequence[int]) -> list[Recorded]:
        return self._decode([(r[0], r[2], r[5], r[6], r[7]) for r in self._rows_at(seqs)])

    def read_bodies(self, seqs: Sequence[int]) -> dict[int, JSON]:
        found, rest = decode_bodies((r[0], r[5], r[6]) for r in self._rows_at(seqs))
        for rec in self.read_at(rest) if rest else ():
            if type(rec.event) is MessageAppended:
                found[rec.seq] = rec.event.message
        return found

    def read_stored(self, from_seq: int = 1, batch_size: int = 2000) -> Iterator[Any]:
        next_seq = from_seq
        while rows := self._headed(next_seq, batch_size):
            yield from (r[:8] for r in rows)
            next_seq = rows[-1][0] + 1

    def read_rows(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[list[HeadRow]]:
        for rows in self._pages(from_seq, to_seq):
            yield [(r[0], r[2], r[5], r[6]) for r in rows]

    def read_heads(
        self, from_seq: int = 1, to_seq: int | None = None
    ) -> Iterator[tuple[Mapping[int, str], list[ColumnRow]]]:
        """Pages of ColumnRows from both tables; a segment's payloads are read only when
        one of its rows has no head to fold from (its header and heads come first)."""
        with self._lock, self._errors("read the log"):
            names = dict(self._conn.execute("SELECT stream_id, stream FROM streams").fetchall())
        last = min(self.last_seq(), to_seq or 2**62)
        for lo in range(from_seq, last + 1, 2000):
            hi = min(lo + 1999, last)
            with self._lock, self._errors("read the log"):
                rows: list[Any] = self._conn.execute(q.READ_HEAD_COLUMNS, (lo, hi, 2000)).fetchall()
                found = self._conn.execute(_HEAD_SEGMENTS, (lo, hi)).fetchall()
            merge = bool(rows)
            for first_seq, stream_id, header, heads in found:
                rows += self._head_rows(first_seq, stream_id, header, heads, lo, hi)
            if merge:
                rows.sort(key=lambda r: r[0])
            if rows:
                yield names, rows

    def _head_rows(
        self, first_seq: int, stream_id: int, header: bytes, heads: bytes | None, lo: int, hi: int
    ) -> list[Any]:
        """The ColumnRows of one segment with lo <= seq <= hi; one that cannot be split
        gives exploded's broken row (no head, no payload: its fold raises InvalidEvent)."""
        try:
            schemas = _decode_header(header)[6]
            held = _decode_heads(heads) if heads is not None else [(None, None)] * len(schemas)
            if len(held) != len(schemas):
                raise ValueError("columns of unequal length")
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
            with self._lock, self._errors("read the log"):
                g = self._conn.execute(_SEGMENT_COLUMNS + " WHERE g.first_seq = ?", (first_seq,))
                rows = exploded(g.fetchone(), lo, hi)
            return [(r[0], stream_id, r[8], r[9], r[5], r[6]) for r in rows]
        a, b = max(lo - first_seq, 0), min(hi - first_seq + 1, len(schemas))
        bodies: list[bytes | None] = [None] * (b - a)
        for i in range(a, b):
            if held[i][0] is None or schemas[i] != MESSAGE_SCHEMA:
                with self._lock, self._errors("read the log"):
                    g = self._conn.execute(
                        _SEGMENT_COLUMNS + " WHERE g.first_seq = ?", (first_seq,)
                    )
                    row = exploded(g.fetchone(), first_seq + i, first_seq + b - 1)
                for k, r in enumerate(row):
                    bodies[i - a + k] = (
                        None
                        if held[i + k][0] is not None and schemas[i + k] == MESSAGE_SCHEMA
                        else r[6]
                    )
                break
        return [
            (first_seq + i, stream_id, held[i][0], held[i][1], schemas[i], bodies[i - a])
            for i in range(a, b)
        ]

    def _pages(self, from_seq: int, to_seq: int | None) -> Iterator[list[HeadedRow]]:
        upto, next_seq = to_seq or 2**62, from_seq
        while rows := [r for r in self._headed(next_seq, 2000) if r[0] <= upto]:
            yield rows
            next_seq = rows[-1][0] + 1

    def versions_at(self, stream_ids: Iterable[int], seq: int) -> dict[int, int]:
        out: dict[int, int] = {}
        with self._lock, self._errors("read stream versions"):
            for stream_id in stream_ids:
                found = [
                    self._conn.execute(_SEGMENT_VERSION_AT, (seq, stream_id, seq)).fetchone(),
                    self._conn.execute(_EVENTS_VERSION_AT, (stream_id, seq)).fetchone(),
                ]
                versions = [int(row[0]) for row in found if row is not None and row[0] is not None]
                if versions:
                    out[stream_id] = max(versions)
        return out

    def _stream_rows(self, stream: str, from_version: int, to_version: int) -> list[HeadedRow]:
        with self._lock, self._errors("read a stream"):
            found = self._conn.execute(_STREAM_ID, (stream,)).fetchone()
            if found is None:
                return []
            where = (found[0], from_version, to_version)
            rows: list[HeadedRow] = self._conn.execute(_STREAM_EVENTS, where).fetchall()
            segments = self._conn.execute(_STREAM_SEGMENTS, where).fetchall()
        rows += [r for g in segments for r in exploded(g) if from_version <= r[2] <= to_version]
        rows.sort(key=lambda r: r[2])
        return rows

    def read_stream(
        self, stream: str, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[Recorded]:
        rows = self._stream_rows(stream, from_version, to_version or 2**62)
        yield from self._decode([(r[0], r[2], r[5], r[6], r[7]) for r in rows])

    def written_rows(
        self, stream: str, after_version: int, count: int
    ) -> list[tuple[int, int, str, str]]:
        rows = self._stream_rows(stream, after_version + 1, after_version + count)
        return [(r[0], r[2], r[3], r[7]) for r in rows]

    def streams(self) -> list[tuple[str, int]]:
        with self._lock, self._errors("list streams"):
            return [(str(s), int(v)) for s, v in self._conn.execute(_STREAMS)]

    def verify(self) -> VerifyReport:
        verifier = ChainVerifier(self._check_blobs())
        next_seq = 1
        while True:
            rows = self._headed(next_seq, 4000)
            if not rows or not verifier.feed(rows):
                break
            next_seq = rows[-1][0] + 1
        return verifier.report()


__all__ = ["SCHEMA", "SegmentStore", "exploded", "insert_ids", "tail", "write_segment"]
