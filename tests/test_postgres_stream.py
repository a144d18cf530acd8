"""PostgreSQL's streamed append (``postgres_stream``, session 41): an import's events
written a chunk at a time in one transaction, not read whole first. The log it writes
is row for row, hash for hash the one the whole-list path (``append_many``) writes; an
error anywhere, the server killed mid-import included, leaves nothing; appenders
waiting on the append lock meanwhile are sealed after it, the log gapless."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.pg_server import PgServer
from helpers.strategies import STREAM_SHAPES
from hypothesis import HealthCheck, given, settings
from test_append_stream import _events
from test_import_streamed import input_text

from ctxledger.errors import ConcurrencyError, CtxLedgerError, InvalidInput, StoreError
from ctxledger.events import Event
from ctxledger.eventstore import streamed
from ctxledger.eventstore.base import AppendRequest, EventStore, StreamedRequest
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.importers.detect import load_text
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.importing import import_sessions
from ctxledger.testing.eventstore import message


def _url(server: PgServer, tmp_path: Path, tag: str) -> str:
    schema = f"{tag}_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]
    return f"{server.url}?schema={schema}"


def _dump(store: PostgresEventStore) -> list[list[tuple[Any, ...]]]:
    """Every event row (with its stream's name, not its id), stream and blob, in order."""
    with psycopg.connect(
        store._conninfo, autocommit=True, options=f"-c search_path={store.schema}"
    ) as conn:
        return [
            conn.execute(query).fetchall()
            for query in (
                "SELECT e.seq, s.stream, e.version, e.event_id, e.kind, e.schema, e.payload,"
                " e.hash FROM events AS e JOIN streams AS s USING (stream_id) ORDER BY e.seq",
                "SELECT stream FROM streams ORDER BY stream",
                "SELECT ref, size, data FROM blobs ORDER BY ref",
            )
        ]


def _import(url: str, tmp_path: Path, text: str) -> list[list[tuple[Any, ...]]]:
    """`text` imported with counted ids and clock into a new ledger at `url`; its dump."""
    ids, ticks = count(), count()
    store = PostgresEventStore(url, index_dir=tmp_path, blob_threshold=4096)
    ledger = Ledger(
        store, clock=lambda: 1_767_225_600.0 + next(ticks), ids=lambda p: f"{p}_{next(ids):06d}"
    )
    try:
        import_sessions(ledger, load_text(text, "openai"))
        assert store.verify().ok
        return _dump(store)
    finally:
        ledger.close()


@pytest.mark.parametrize("chunk", [None, 7])
def test_a_streamed_import_writes_the_rows_the_whole_list_path_writes(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int | None
) -> None:
    if chunk is not None:  # chunk edges inside sessions, a blob's chunk among them
        monkeypatch.setattr(streamed, "CHUNK", chunk)
    more = [  # more sessions, one long enough for several chunks at the default size
        {
            "id": f"more-{n}",
            "messages": [{"role": "user", "content": f"m{n}.{i}"} for i in range(n)],
        }
        for n in (30, 2500)
    ]
    text = input_text() + "".join(json.dumps(conversation) + "\n" for conversation in more)
    streamed_dump = _import(_url(pg_server, tmp_path, "s"), tmp_path, text)
    # main's way: each request read whole, then append_many (COPY, or the blob path)
    monkeypatch.setattr(PostgresEventStore, "append_stream", EventStore.append_stream)
    whole_dump = _import(_url(pg_server, tmp_path, "w"), tmp_path, text)
    assert len(streamed_dump[0]) > 2900 and streamed_dump[2]  # rows, and a blob
    assert streamed_dump == whole_dump


_EXAMPLES = count()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(**STREAM_SHAPES)
def test_streamed_rows_are_those_append_many_writes(
    pg_server: PgServer, tmp_path: Path, sizes: list[int], chunk: int, before: int, big: int
) -> None:
    """As ``test_append_stream``'s property on SQLite: any sizes, chunk edges, blobs, a
    log holding an earlier append; rows, hashes, streams and blobs alike."""
    streams = [f"ses_{k}" for k in range(len(sizes))]
    dumps = []
    for way in ("many", "stream"):
        url = f"{_url(pg_server, tmp_path, 'p')}{next(_EXAMPLES)}"
        with PostgresEventStore(url, index_dir=tmp_path, blob_threshold=256) as store:
            if before:
                store.append_many([AppendRequest("ses_old", _events("ses_old", before, "o"), 0)])
            if way == "many":
                store.append_many(
                    [
                        AppendRequest(s, _events(s, n, "n", big), 0)
                        for s, n in zip(streams, sizes, strict=True)
                    ]
                )
            else:
                old, streamed.CHUNK = streamed.CHUNK, chunk
                try:
                    versions = store.append_stream(
                        StreamedRequest(s, iter(_events(s, n, "n", big)), 0)
                        for s, n in zip(streams, sizes, strict=True)
                    )
                finally:
                    streamed.CHUNK = old
                assert versions == {s: n + 1 for s, n in zip(streams, sizes, strict=True)}
            assert store.verify().ok
            dumps.append(_dump(store))
    assert dumps[1] == dumps[0]


@pytest.fixture
def store(pg_server: PgServer, tmp_path: Path) -> Iterator[PostgresEventStore]:
    with PostgresEventStore(
        _url(pg_server, tmp_path, "t"), index_dir=tmp_path, blob_threshold=256, pool_size=2
    ) as opened:
        yield opened


def test_the_chain_goes_on_from_the_log_and_blobs_go_with_their_rows(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streamed, "CHUNK", 3)
    store.append_many([AppendRequest("ses_old", _events("ses_old", 3, "o"), 0)])
    versions = store.append_stream(
        [
            StreamedRequest("ses_a", iter(_events("ses_a", 8, "a", big=4)), 0),
            StreamedRequest("ses_empty", iter([]), None),
            StreamedRequest("ses_b", iter(_events("ses_b", 2, "b")), None),
        ]
    )
    assert versions == {"ses_a": 9, "ses_empty": 0, "ses_b": 3}
    assert store.last_seq() == 4 + 9 + 3
    assert store.verify().ok
    (big,) = [r.event for r in store.read_stream("ses_a") if r.version == 6]
    assert big.message["content"].startswith("x" * 300)  # type: ignore[attr-defined]


def test_an_error_late_in_the_stream_leaves_nothing(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streamed, "CHUNK", 4)
    store.append_many([AppendRequest("ses_old", _events("ses_old", 2, "o"), 0)])
    before = _dump(store)

    def failing() -> Iterator[Event]:
        yield from _events("ses_a", 20, "a", big=9)  # a blob in the third chunk
        raise ValueError("a bad line late in the file")

    with pytest.raises(ValueError, match="late in the file"):
        store.append_stream(
            [StreamedRequest("ses_b", iter(_events("ses_b", 5, "b")), 0),
             StreamedRequest("ses_a", failing(), 0)]
        )  # fmt: skip
    # a stale version, found when the stream's first chunk comes
    with pytest.raises(ConcurrencyError):
        store.append_stream(
            [StreamedRequest("ses_b", iter(_events("ses_b", 5, "b")), 0),
             StreamedRequest("ses_old", iter(_events("ses_old", 3, "c")[1:]), 5)]
        )  # fmt: skip
    # an event that is not one the store can hold, in the second chunk
    bad = [*_events("ses_c", 6, "c"), "not an event"]
    with pytest.raises(CtxLedgerError, match="catalogue events"):
        store.append_stream([StreamedRequest("ses_c", iter(bad), 0)])  # type: ignore[list-item]
    assert _dump(store) == before
    # the pool's connection came back out of any transaction: the store still appends
    store.append_stream([StreamedRequest("ses_d", iter(_events("ses_d", 5, "d")), 0)])
    assert store.verify().ok and store.stream_version("ses_d") == 6


def test_a_re_sent_append_is_refused_as_input_as_on_sqlite(store: PostgresEventStore) -> None:
    store.append_stream([StreamedRequest("ses_a", iter(_events("ses_a", 4, "a")), 0)])
    before = _dump(store)
    with pytest.raises(InvalidInput, match="already stored"):
        store.append_stream([StreamedRequest("ses_a", iter(_events("ses_a", 4, "a")), None)])
    assert _dump(store) == before


def test_the_store_reads_the_iterator_a_chunk_at_a_time(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[int] = []
    copied: list[int] = []  # events taken from the iterator when each COPY began

    def events() -> Iterator[Event]:
        for i, event in enumerate(_events("ses_a", 30, "a")):
            taken.append(i)
            yield event

    from ctxledger.eventstore import postgres_stream

    real = postgres_stream.StreamWriter._copy

    def spying(self: Any, chunk: Any, *args: Any) -> int:
        copied.append(len(taken))
        return real(self, chunk, *args)

    monkeypatch.setattr(streamed, "CHUNK", 7)
    monkeypatch.setattr(postgres_stream.StreamWriter, "_copy", spying)
    store.append_stream([StreamedRequest("ses_a", events(), 0)])
    assert copied == [7, 14, 21, 28, 31]  # never more than one chunk ahead


def test_an_appender_waiting_on_the_lock_is_sealed_after_the_import(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append lock is held from the first chunk to the COMMIT: a one-event append
    made meanwhile commits its row unsealed and waits, then comes after every row of
    the import (gapless, verified)."""
    from test_postgres_sealing import unsealed, wait_until

    monkeypatch.setattr(streamed, "CHUNK", 5)
    store.append_many([AppendRequest("ses_x", _events("ses_x", 1, "x"), 0)])
    inside, go_on = threading.Event(), threading.Event()
    done: list[int] = []
    imported: list[dict[str, int]] = []

    def events() -> Iterator[Event]:
        for i, event in enumerate(_events("ses_a", 20, "a")):
            if i == 12:  # two chunks written, the lock held
                inside.set()
                assert go_on.wait(30)
            yield event

    importer = threading.Thread(
        target=lambda: imported.append(store.append_stream([StreamedRequest("ses_a", events(), 0)]))
    )
    other = threading.Thread(
        target=lambda: done.append(store.append("ses_x", [message("ses_x", "during")], None))
    )
    importer.start()
    try:
        assert inside.wait(30)  # the import holds the lock
        other.start()
        wait_until(lambda: unsealed(store) == 1)  # its row committed, unsealed
        other.join(0.5)
        assert other.is_alive() and not done  # waiting for the lock
        assert unsealed(store) == 1
    finally:
        go_on.set()
        importer.join(30)
        if other.ident is not None:  # (started)
            other.join(30)
    assert imported == [{"ses_a": 21}]
    assert done == [3]
    rows = list(store.read_all())
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    assert [r.stream for r in rows[2:23]] == ["ses_a"] * 21  # the import's rows together
    assert rows[-1].stream == "ses_x"
    assert store.verify().ok


def test_the_server_killed_mid_import_leaves_nothing(
    own_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of the open COPY are in the table (sent a row at a time, past the 1,000 rows
    the server's COPY buffers; the import's first row holds its event id against an
    insert from another connection) when the server is killed. The probe waits until
    the server says it has processed 1,000 rows of the COPY (``pg_stat_progress_copy``):
    rows sent are not yet rows inserted, and under load the probe came first."""
    from test_postgres_sealing import wait_until

    from ctxledger.eventstore import postgres_copy

    url = _url(own_server, tmp_path, "k")
    with PostgresEventStore(url, index_dir=tmp_path, connect_timeout=2) as store:
        store.append_many([AppendRequest("ses_old", _events("ses_old", 2, "o"), 0)])
    monkeypatch.setattr(streamed, "CHUNK", 4)
    monkeypatch.setattr(postgres_copy, "_STEP", 1)
    held: list[str] = []

    def copied(store: PostgresEventStore) -> int:
        """The rows the server processed of the open COPY into the events table (-1: none)."""
        with psycopg.connect(store._conninfo, autocommit=True) as conn:
            row = conn.execute(
                "SELECT coalesce(max(tuples_processed), -1) FROM pg_stat_progress_copy"
                " WHERE relid = %s::regclass",
                (f"{store.schema}.events",),
            ).fetchone()
        return int(row[0]) if row is not None else -1

    def probe(store: PostgresEventStore, event_id: str) -> None:
        """An insert of `event_id` from another connection waits for the import's row."""
        wait_until(lambda: copied(store) >= 1000)  # (the first 1,000 rows inserted)
        options = f"-c search_path={store.schema} -c lock_timeout=500"
        with psycopg.connect(store._conninfo, options=options) as conn:
            try:
                conn.execute(
                    "INSERT INTO events (event_id, stream_id, version, kind, schema, payload,"
                    " hash) VALUES (%s, 1, 99, 'probe', 1, '{}', %s)",
                    (event_id, "0" * 64),
                )
            except psycopg.errors.LockNotAvailable:
                held.append(event_id)
            conn.rollback()

    with PostgresEventStore(url, index_dir=tmp_path, connect_timeout=2) as store:

        def events() -> Iterator[Event]:
            for i, event in enumerate(_events("ses_a", 1500, "a")):
                if i == 1400:  # rows sent, uncommitted, past the server's COPY buffer
                    # (libpq sends as its buffer fills; COPY inserts 1,000 rows at a time)
                    probe(store, "evt_a_ses_a_s")
                    own_server.kill()
                yield event

        with pytest.raises(StoreError):
            store.append_stream([StreamedRequest("ses_a", events(), 0)])
    assert held == ["evt_a_ses_a_s"]  # the import's first row was on the server
    own_server.start()  # crash recovery
    with PostgresEventStore(url, index_dir=tmp_path) as store:
        assert store.last_seq() == 3
        assert store.stream_version("ses_a") == 0
        assert store.verify().ok


@pytest.mark.parametrize(
    ("expected", "said"),
    [(0, "'ses_b' is at version 1, not the expected 0"),
     (None, "another appender wrote to stream 'ses_b' while the streamed append held it")],
)  # fmt: skip
def test_a_row_another_appender_slipped_in_is_a_conflict_and_leaves_nothing(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch, expected: int | None, said: str
) -> None:
    """Versions are looked up among sealed rows under the lock; an appender that
    inserted (unsealed, committed, waiting for the lock) a row of the import's second
    stream after the seal clashes with it: a ConcurrencyError, nothing appended; the
    other append is sealed once the lock is free. With no expected version given the
    error says what happened (not a version the caller never named)."""
    from test_postgres_sealing import unsealed, wait_until

    monkeypatch.setattr(streamed, "CHUNK", 4)
    other: list[int] = []

    def events() -> Iterator[Event]:
        for i, event in enumerate(_events("ses_a", 10, "a")):
            if i == 6:  # the lock held, ses_b not looked up yet
                thread = threading.Thread(
                    target=lambda: other.append(store.append("ses_b", [message("ses_b")], 0))
                )
                thread.start()
                wait_until(lambda: unsealed(store) == 1)
                threads.append(thread)
            yield event

    threads: list[threading.Thread] = []
    with pytest.raises(ConcurrencyError, match=re.escape(said) + ".*nothing was"):
        store.append_stream(
            [StreamedRequest("ses_a", events(), 0),
             StreamedRequest("ses_b", iter(_events("ses_b", 3, "b")), expected)]
        )  # fmt: skip
    threads[0].join(30)
    assert other == [1]
    assert [r.stream for r in store.read_all()] == ["ses_b"] and store.verify().ok
