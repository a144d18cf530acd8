"""Batched PostgreSQL appends in two round trips (``postgres_copy``, issue 13, session 24).

An append of more than ``CALL_ROWS`` events without new blobs is one simple-query
message (lock, seal, missing streams, versions, notify, ``COPY``) whose implicit
transaction commits when the ``COPY`` ends. These tests check that it writes the same
rows and chain as the client-side transaction, that a stale version, a re-send, a
clash and a client that stops mid-``COPY`` leave nothing behind, that rows a dead
writer left unsealed are sealed before the batch, and that it interleaves with
one-event appends into a gapless, verified log.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.pg_server import PgServer

from ctxledger.errors import ConcurrencyError, DuplicateEventError, InvalidEvent
from ctxledger.events import BLOB_THRESHOLD, MessageAppended
from ctxledger.eventstore import AppendRequest, postgres_copy
from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.preparing import prepare_append
from ctxledger.eventstore.rows import GENESIS_HASH, chain_hash
from ctxledger.testing.eventstore import message

Conn = psycopg.Connection[tuple[object, ...]]


@pytest.fixture
def store(pg_server: PgServer, tmp_path: Path) -> Iterator[PostgresEventStore]:
    schema = "c_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]
    with PostgresEventStore(
        f"{pg_server.url}?schema={schema}", index_dir=tmp_path, pool_size=2
    ) as opened:
        yield opened


def connect(store: PostgresEventStore) -> Conn:
    return psycopg.connect(
        store._conninfo, autocommit=True, options=f"-c search_path={store.schema}"
    )


def count(store: PostgresEventStore, where: str = "TRUE") -> int:
    with connect(store) as conn:
        found = conn.execute(f"SELECT count(*) FROM events WHERE {where}").fetchone()
    assert found is not None
    return int(str(found[0]))


def batch(session: str, n: int, text: str = "m") -> list[MessageAppended]:
    return [message(session, f"{text} {i}") for i in range(n)]


def spy_copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the row count of every append that took the two-round-trip path."""
    seen: list[int] = []
    real = postgres_copy.copy_append

    def spy(conn: Any, appender: Any, heads: Any, prepare: Any) -> dict[str, int] | None:
        seen.append(sum(n for _, n in heads))
        return real(conn, appender, heads, prepare)

    monkeypatch.setattr("ctxledger.eventstore.postgres.copy_append", spy)
    return seen


def test_a_batch_is_one_copy_with_the_chain_python_computes(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = spy_copies(monkeypatch)
    odd = 'ses_ünï "q" \\ \u2028'
    first = batch("ses_a", 40)
    assert store.append("ses_a", first, 0) == 40  # a new stream, made by the head
    assert store.append("ses_a", [message("ses_a", "one")], 40) == 41  # the one-event call
    more = [message(odd, f"é\U0001f600 '; DROP TABLE events; -- {i}") for i in range(20)]
    versions = store.append_many(
        [
            AppendRequest(odd, more, 0),
            AppendRequest("ses_a", batch("ses_a", 5), 41),
            AppendRequest("ses_empty", [], None),  # no rows: no stream, version 0
        ]
    )
    assert versions == {odd: 20, "ses_a": 46, "ses_empty": 0}
    assert seen == [40, 25]
    rows = list(store.read_stored())
    assert [r[0] for r in rows] == list(range(1, 67))  # gapless
    prev = GENESIS_HASH
    for seq, stream, version, event_id, kind, schema, payload, digest in rows:
        prev = chain_hash(prev, seq, stream, version, event_id, kind, schema, payload)
        assert digest == prev  # per-event rows, the bytes ctxledger_seal hashes
    assert [r.event for r in store.read_stream(odd)] == more
    assert store.streams() == [("ses_a", 46), (odd, 20)]
    assert store.verify().ok
    assert store.append("ses_a", batch("ses_a", 30), 46) == 76  # an existing stream
    assert store.verify().events_checked == 96


def test_stale_versions_re_sends_and_clashes_write_nothing(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = spy_copies(monkeypatch)
    first = batch("ses_a", 30)
    assert store.append("ses_a", first, 0) == 30
    with pytest.raises(ConcurrencyError):  # aborted COPY, then the client-side look
        store.append("ses_a", batch("ses_a", 30), 10)
    assert store.append("ses_a", first, 0) == 30  # a re-send: stored once
    with pytest.raises(DuplicateEventError):  # half stored, half new
        store.append("ses_a", [*first[:10], *batch("ses_a", 10)], 30)
    with pytest.raises(DuplicateEventError):  # ids stored in another stream
        clash = [message("ses_b", "x", event_id=e.event_id) for e in first[:20]]
        store.append("ses_b", clash, 0)
    # each refused batch: one COPY (its head sent before the batch was prepared), then
    # the client-side look that tells a re-send from a conflict (review, session 26: it
    # was streamed a second time by the usual way's try first)
    assert seen == [30, 30, 30, 20, 20]
    assert count(store) == 30 and store.stream_version("ses_b") == 0
    assert store.append("ses_a", batch("ses_a", 20), 30) == 50
    assert store.verify().events_checked == 50


def test_a_client_stopping_mid_copy_leaves_nothing_and_the_connection_works(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.append("ses_a", batch("ses_a", 20), 0) == 20
    real = postgres_copy.send_rows
    sent: list[int] = []

    def stop_after_one_step(conn: Any, parts: list[bytes]) -> None:
        if sent:
            raise KeyboardInterrupt  # e.g. Ctrl-C while the rows stream
        sent.append(len(parts))
        real(conn, parts)

    monkeypatch.setattr(postgres_copy, "send_rows", stop_after_one_step)
    step = postgres_copy._STEP
    with pytest.raises(KeyboardInterrupt):
        store.append("ses_a", batch("ses_a", step + 10), 20)
    assert sent == [1 + 4 * step]  # the signature and one step of rows (4 parts each)
    sent.clear()
    with pytest.raises(KeyboardInterrupt):
        store.append("ses_new", batch("ses_new", step + 10), 0)
    monkeypatch.setattr(postgres_copy, "send_rows", real)
    assert count(store) == 20 and store.stream_version("ses_new") == 0
    assert store.append("ses_a", batch("ses_a", step + 10), 20) == step + 30  # same pool
    assert store.append("ses_new", batch("ses_new", 17), 0) == 17
    report = store.verify()
    assert report.ok and report.events_checked == step + 47


def test_rows_a_dead_writer_left_unsealed_are_sealed_before_the_batch(
    store: PostgresEventStore,
) -> None:
    assert store.append("ses_a", batch("ses_a", 20), 0) == 20
    orphan = message("ses_o", "left unsealed")
    batches, _ = prepare_append([AppendRequest("ses_o", [orphan], 0)], None, BLOB_THRESHOLD)
    appender = store._appender
    with connect(store) as conn, connect(store) as holder:  # its writer dies before sealing
        holder.execute("SELECT pg_advisory_lock(%s)", (appender.key,))
        found = conn.execute(q.CALL_INSERT, appender.call_params(batches)).fetchone()
        assert found == ([1], False)
    assert count(store, "seq IS NULL") == 1
    big = batch("ses_b", 50)
    assert store.append("ses_b", big, 0) == 50
    order = [r.event.event_id for r in store.read_all()]
    assert order[20] == orphan.event_id and order[21:] == [e.event_id for e in big]
    assert count(store, "seq IS NULL") == 0 and store.verify().events_checked == 71


def test_batches_and_one_event_appends_from_threads_interleave_gaplessly(
    store: PostgresEventStore,
) -> None:
    errors: list[BaseException] = []

    def big(n: int) -> None:
        try:
            version = 0
            for _ in range(4):
                version = store.append(f"ses_big{n}", batch(f"ses_big{n}", 60), version)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def small(n: int) -> None:
        try:
            for version in range(25):
                store.append(f"ses_one{n}", [message(f"ses_one{n}")], version)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=big, args=(n,)) for n in range(2)]
    threads += [threading.Thread(target=small, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seqs = [r.seq for r in store.read_all()]
    assert seqs == list(range(1, 531))
    assert dict(store.streams()) == {
        "ses_big0": 240,
        "ses_big1": 240,
        "ses_one0": 25,
        "ses_one1": 25,
    }
    report = store.verify()
    assert report.ok and report.events_checked == 530 and count(store, "seq IS NULL") == 0


def test_a_batch_refused_or_declined_while_its_head_is_out(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head leaves before the batch is validated and encoded: a bad event aborts the
    ``COPY`` (nothing written, no stream made); a large content (a blob to store first)
    makes it decline, and the client-side transaction stores the blob and the rows."""
    seen = spy_copies(monkeypatch)
    bad = [*batch("ses_a", 19), message("ses_other", "not this session's")]
    with pytest.raises(InvalidEvent):
        store.append("ses_a", bad, 0)
    assert count(store) == 0 and store.streams() == [] and store.stream_version("ses_a") == 0
    big = [*batch("ses_a", 19), message("ses_a", "x" * (BLOB_THRESHOLD + 1))]
    assert store.append("ses_a", big, 0) == 20
    assert seen == [20, 20]  # the refused one, the declined one (blobs go the usual way)
    assert [r.event for r in store.read_stream("ses_a")][-1] == big[-1]
    assert store.append("ses_a", batch("ses_a", 20), 20) == 40
    report = store.verify()
    assert report.ok and report.events_checked == 40 and count(store, "seq IS NULL") == 0
