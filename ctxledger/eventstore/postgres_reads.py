"""Reading a PostgreSQL ledger: the log by seq, a stream by version, rows as stored, the
streams and their versions (see :mod:`ctxledger.eventstore.postgres`; moved out of it in
session 45). Every read sees sealed rows only, so what it returns never moves."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg

from ctxledger.events import Recorded
from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore.base import MAX_SEQ, in_versions, of_stream
from ctxledger.eventstore.paging import paged
from ctxledger.eventstore.postgres_append import Appender, stream_ends
from ctxledger.eventstore.rows import HeadRow, StoredRow, decode_rows

__all__ = ["PgReads"]

Conn = psycopg.Connection[tuple[Any, ...]]

#: read_at: the rows at given seqs, a bounded array of them per query
_READ_AT = "SELECT seq, version, schema, payload, hash FROM events WHERE seq = ANY(%s) ORDER BY seq"
_READ_AT_CHUNK = 5000
_STREAM_NAMES = "SELECT stream FROM streams"
_READ_BATCH = 2000
#: rows per page of ``read_rows`` (undecoded payloads: a rebuild reads the whole log)
_ROWS_BATCH = 10_000


class PgReads:
    """The read-only methods of :class:`~ctxledger.eventstore.postgres.PostgresEventStore`
    on its pool (``_run``, ``_fetch``)."""

    _appender: Appender
    _run: Callable[[str, Callable[[Conn], Any]], Any]
    _fetch: Callable[[str, str, Sequence[Any]], list[tuple[Any, ...]]]
    get_blob: Callable[[str], bytes]
    sealed: Callable[[int], bool]

    def read_stored(self, from_seq: int = 1, batch_size: int = 2000) -> Iterator[StoredRow]:
        """Rows as stored, `batch_size` at a time, in seq order (read-only; see EventStore)."""

        def fetch(from_seq: int, limit: int) -> list[StoredRow]:
            rows = self._fetch("read the log", q.VERIFY_EVENTS, (from_seq, limit))
            return [
                (
                    int(seq),
                    str(stream),
                    int(version),
                    str(event_id),
                    str(kind),
                    int(schema),
                    bytes(payload),
                    str(digest),
                )
                for seq, stream, version, event_id, kind, schema, payload, digest in rows
            ]

        return paged(fetch, from_seq, batch_size, lambda row: row[0])

    def stream_version(self, stream: str) -> int:
        """Current version of `stream`, 0 if it has no events (read-only)."""
        if "\x00" in stream:  # no stream holds a NUL (appends refuse it), as on SQLite
            return 0
        rows = self._fetch("read a stream version", q.STREAM_VERSION, (stream,))
        return int(rows[0][0]) if rows else 0

    def last_seq(self) -> int:
        """The highest seq in the log, 0 when empty (read-only)."""
        rows = self._fetch("read the log's end", q.LAST_SEQ, ())
        return int(rows[0][0] or 0)

    def streams(self) -> list[tuple[str, int]]:
        """(stream, version) for every stream, in order of their first event (read-only)."""
        return [(str(s), int(v)) for s, v in self._fetch("list streams", q.STREAMS, ())]

    def stream_names(self) -> set[str] | None:
        """Every stream's name (the open's check of its fold: a streams row renamed or
        removed). One scan of the names only: 0.5 ms for 3,000, ``streams()`` 12 ms."""
        return {str(row[0]) for row in self._fetch("list streams", _STREAM_NAMES, ())}

    def read_rows(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[list[HeadRow]]:
        """Pages of rows (seq, version, schema, payload) in log order: what a rebuild
        decodes itself (``rows.HEAD_DECODER``), skipping message bodies (read-only)."""
        upto = MAX_SEQ if to_seq is None else to_seq
        next_seq = from_seq
        while True:
            rows = self._rows(next_seq, upto, _ROWS_BATCH)
            if rows:
                yield [(r[0], r[1], r[2], r[3]) for r in rows]
            if len(rows) < _ROWS_BATCH:
                return
            next_seq = rows[-1][0] + 1

    def _rows(self, from_seq: int, to_seq: int, limit: int) -> list[tuple[Any, ...]]:
        rows = self._fetch(
            "read the log", q.READ_ALL, (from_seq, max(0, min(limit, to_seq - from_seq + 1)))
        )
        if rows and rows[-1][0] > to_seq:  # only after a gap (a tampered log)
            rows = [row for row in rows if row[0] <= to_seq]
        return rows

    def _read_batch(self, from_seq: int, to_seq: int, limit: int) -> list[Recorded]:
        return decode_rows(self._rows(from_seq, to_seq, limit), self.get_blob, self.sealed)

    def read_at(self, seqs: Sequence[int]) -> list[Recorded]:
        """The records at `seqs`, in seq order: only those rows are fetched and decoded,
        not the other sessions' rows between them (read-only)."""
        wanted = sorted(set(seqs))
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(wanted), _READ_AT_CHUNK):
            chunk = wanted[start : start + _READ_AT_CHUNK]
            rows += self._fetch("read the log", _READ_AT, (chunk,))
        return decode_rows(rows, self.get_blob, self.sealed)

    def read_stream(
        self, stream: str, from_version: int = 1, to_version: int | None = None
    ) -> Iterator[Recorded]:
        """Events of one stream with from_version <= version (<= to_version), in order (read-only)."""
        found = self._run("read a stream", lambda conn: stream_ends(conn, stream, self._appender))
        if found is None:
            return
        stream_id, upto = found[0], MAX_SEQ if to_version is None else to_version
        next_version = from_version
        while next_version <= upto:
            limit = min(_READ_BATCH, upto - next_version + 1)
            rows = self._fetch("read a stream", q.READ_STREAM, (stream_id, next_version, limit))
            last = len(rows) < limit or rows[-1][1] >= upto  # (the ends checked with it)
            kept = [r for r in rows if r[1] <= upto]
            ends = found[1:] if last else ()
            page = decode_rows(
                in_versions(kept, next_version, stream, ends), self.get_blob, self.sealed
            )
            yield from of_stream(page, stream)
            if last:
                return
            next_version = rows[-1][1] + 1
