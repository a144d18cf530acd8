"""What a SQLite rebuild reads: message heads from their columns (migration
``0002_message_heads``) or stored rows whole, and the backfill of rows written before
the columns.

``events.message_id`` / ``events.tokens`` are derived from a ``MessageAppended``
payload (its session is the row's stream); they are not hashed, and ``verify``
checks every non-NULL head against its payload. A mixin of
:class:`~ctxledger.eventstore.sqlite.SQLiteEventStore`, kept apart so the store's
module stays about appends, reads by seq and integrity.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager

from ctxledger.events import MessageAppended, Recorded
from ctxledger.eventstore import sqlite_sql as q
from ctxledger.eventstore.base import MAX_SEQ
from ctxledger.eventstore.longscan import SQLiteLongScan
from ctxledger.eventstore.rows import (
    NO_HEAD,
    ColumnRow,
    HeadRow,
    decode_bodies,
    head_columns,
    shown,
    undecodable,
)
from ctxledger.messages import JSON

__all__ = ["HeadColumns"]

#: rows per page of ``read_heads`` / ``read_rows`` (a rebuild reads the whole log)
ROWS_BATCH = 10_000
#: rows examined per backfill transaction
BACKFILL_BATCH = 5000


class HeadColumns(SQLiteLongScan):
    """Reads and backfills the head columns; needs the store's connection, lock and
    error translation (``_conn``, ``_lock``, ``_errors``, ``_writing``). With what
    ``upgrade`` and ``verify`` ask before walking the long contents (:class:`SQLiteLongScan`:
    the store's module is at its size limit)."""

    _conn: sqlite3.Connection
    _lock: threading.RLock
    _errors: Callable[[str], AbstractContextManager[None]]
    _wrote: threading.local
    _writing: Callable[[], AbstractContextManager[None]]
    read_at: Callable[[Sequence[int]], list[Recorded]]

    def read_rows(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[list[HeadRow]]:
        """Pages of rows (seq, version, schema, payload) in log order: what a rebuild
        decodes itself (``rows.HEAD_DECODER``), skipping message bodies (read-only)."""
        upto = MAX_SEQ if to_seq is None else to_seq
        next_seq = from_seq
        while True:
            with self._lock, self._errors("read the log"):
                rows: list[HeadRow] = self._conn.execute(
                    q.READ_HEADS, (next_seq, upto, ROWS_BATCH)
                ).fetchall()
            if rows:
                yield rows
            if len(rows) < ROWS_BATCH:
                return
            next_seq = rows[-1][0] + 1

    def read_heads(
        self, from_seq: int = 1, to_seq: int | None = None
    ) -> Iterator[tuple[Mapping[int, str], list[ColumnRow]]]:
        """Pages of rows with their message heads read from the head columns (read-only):
        ``(names, rows)``, `names` mapping every stream id of `rows` to its stream; a
        row without a head (not a message, or written before migration 0002) has its
        payload, for the fold to decode (see ``rows.ColumnRow``)."""
        upto = MAX_SEQ if to_seq is None else to_seq
        names: dict[int, str] = {}
        top = 0  # the highest stream id in `names`
        next_seq = from_seq
        while True:
            with self._lock, self._errors("read the log"):
                rows: list[ColumnRow] = self._conn.execute(
                    q.READ_HEAD_COLUMNS, (next_seq, upto, ROWS_BATCH)
                ).fetchall()
                # after the rows: a stream is committed with (or before) its first row
                for stream_id, stream in self._conn.execute(q.STREAM_NAMES, (top,)):
                    names[stream_id] = stream
                    top = stream_id
            if rows:
                yield names, rows
            if len(rows) < ROWS_BATCH:
                return
            next_seq = rows[-1][0] + 1

    def read_bodies(self, seqs: Sequence[int]) -> dict[int, JSON]:
        """seq -> the message appended there, for the ``MessageAppended`` rows among `seqs`
        (others left out; read-only). What a lazily folded body needs and no more: the
        payload alone, decoded past its envelope (``rows.decode_bodies``); a row at
        another schema or with its content in a blob goes through ``read_at`` (upcast,
        re-inflated), so the message is the one ``read_at`` would hand out."""
        wanted = sorted(set(seqs))
        rows: list[tuple[int, int, bytes]] = []
        with self._lock, self._errors("read the log"):
            for start in range(0, len(wanted), q.READ_AT_CHUNK):
                chunk = wanted[start : start + q.READ_AT_CHUNK]
                rows += self._conn.execute(q.read_bodies(len(chunk)), chunk).fetchall()
        found, rest = decode_bodies(rows)
        for rec in self.read_at(rest) if rest else ():
            if type(rec.event) is MessageAppended:
                found[rec.seq] = rec.event.message
        return found

    def last_written(self) -> tuple[int, int] | None:
        """(first seq, last seq) of the rows the calling thread's last ``append_many`` on
        this store inserted, or None when it inserted none (a re-send found its events
        stored, or it failed): what tells a ledger's own append from another writer's
        rows with the same ids (``ledger.ownfold``)."""
        span: tuple[int, int] | None = getattr(self._wrote, "span", None)
        return span

    def written_rows(
        self, stream: str, after_version: int, count: int
    ) -> list[tuple[int, int, str, str]]:
        """(seq, version, event id, hash) of at most `count` rows of `stream` after
        `after_version`, in version order (read-only; no payload is read): where an
        append's events landed (``ledger.ownfold``)."""
        with self._lock, self._errors("read the log"):
            rows: list[tuple[int, int, str, str]] = self._conn.execute(
                q.WRITTEN_ROWS, (stream, after_version, count)
            ).fetchall()
        return rows

    def versions_at(self, stream_ids: Iterable[int], seq: int) -> dict[int, int]:
        """stream id -> its version as of `seq` (its events up to `seq`), for each id
        with such events (read-only; ids as ``read_heads`` names them)."""
        out: dict[int, int] = {}
        with self._lock, self._errors("read stream versions"):
            for stream_id in stream_ids:
                rows = self._conn.execute(q.VERSION_AT, (stream_id, seq)).fetchall()
                if rows:
                    out[stream_id] = _version(rows)
        return out

    def backfill_heads(self, batch: int = BACKFILL_BATCH) -> int:
        """Write the head columns of message rows stored without them (written before
        migration 0002); returns how many rows got a head.

        Rows are read and updated `batch` at a time, one write transaction each (other
        writers interleave between batches); the heads are derived from the stored
        payloads (``rows.head_columns``), so running it again, or concurrently, writes
        the same values. The hash chain is untouched (heads are not hashed).
        """
        written, next_seq = 0, 1
        while True:
            with self._lock, self._errors("backfill message heads"), self._writing():
                conn = self._conn
                conn.execute("BEGIN IMMEDIATE")
                try:
                    rows = conn.execute(q.HEADLESS_MESSAGES, (next_seq, batch)).fetchall()
                    heads = [
                        (seq, head_columns(stream, schema, payload))
                        for seq, stream, schema, payload in rows
                    ]
                    updates = [(h[0], h[1], seq) for seq, h in heads if h != NO_HEAD]
                    conn.executemany(q.SET_HEAD, updates)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
            written += len(updates)
            if len(rows) < batch:
                return written
            next_seq = rows[-1][0] + 1


def _version(rows: list[tuple[object, int]]) -> int:
    """The top (version, seq) `rows` (at most two, by version down) of a stream as of a
    seq: its version as a fold keeps it. InvalidEvent naming the row for one that is no
    integer (an edit the NOT NULL or the column's type did not stop: a ValueError
    traceback before) or out of place (not one above the next, or written before it:
    an append built on it without a word)."""
    (version, seq), below = rows[0], rows[1:]
    if type(version) is not int:
        raise undecodable(seq, f"the row's version is {shown(version)}, not an integer")
    if below and (below[0][0] != version - 1 or below[0][1] > seq):
        under = f"the row below it is version {shown(below[0][0])} at seq {below[0][1]}"
    elif not below and version != 1:
        under = "no row below it"
    else:
        return version
    raise undecodable(seq, f"the row's version {version} is out of place: {under}")
