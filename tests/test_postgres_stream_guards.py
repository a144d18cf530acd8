"""PostgreSQL's streamed append (an import) against other writers and the server's
timeouts (session 42): an appender that inserted the same blob before waiting for the
append lock cannot deadlock with it (one lock order: the blob lock, then the append
lock), and a server's ``statement_timeout`` / ``idle_in_transaction_session_timeout``
do not cut an import whose input is slow between chunks."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.pg_server import PgServer
from test_append_stream import _events
from test_postgres_cancelled import role_url, waiting
from test_postgres_sealing import wait_until

from ctxledger.events import Event
from ctxledger.eventstore import streamed
from ctxledger.eventstore.base import AppendRequest, StreamedRequest
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.postgres_append import Appender


def _schema(tmp_path: Path, tag: str) -> str:
    return f"{tag}_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]


def _seqs(store: PostgresEventStore) -> list[int]:
    return [r.seq for r in store.read_all()]


def test_an_appender_holding_the_same_blob_cannot_deadlock_the_import(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import holds the append lock; another appender inserts a blob (before it waits
    for that lock, as it does) that a later chunk of the import carries too. Before,
    the two waited on each other and deadlock detection aborted the import whenever its
    wait began first (this order): the import failed whole. Now the other appender waits
    for the blob lock before its blobs, so it inserts nothing the import waits on."""
    monkeypatch.setattr(streamed, "CHUNK", 5)
    url = f"{pg_server.url}?schema={_schema(tmp_path, 'dl')}"
    locked, go_on, blobbed, go_lock = (threading.Event() for _ in range(4))
    real_blobs = Appender._store_blobs

    def blobs_then_pause(self: Appender, conn: Any, new_blobs: dict[str, bytes]) -> None:
        real_blobs(self, conn, new_blobs)
        blobbed.set()  # its blob inserted, uncommitted; the append lock not asked for yet
        go_lock.wait(10)

    monkeypatch.setattr(Appender, "_store_blobs", blobs_then_pause)

    def imported() -> Iterator[Event]:
        for i, event in enumerate(_events("ses_i", 12, "i", big=7)):
            if i == 6:  # the first chunk is in, the locks held; the blob's chunk is next
                locked.set()
                go_on.wait(10)
            yield event

    outcome: dict[str, Any] = {}

    def run(name: str, fn: Any) -> threading.Thread:
        def body() -> None:
            try:
                outcome[name] = fn()
            except Exception as exc:  # reported by the asserts below
                outcome[name] = exc

        thread = threading.Thread(target=body)
        thread.start()
        return thread

    with (
        PostgresEventStore(url, index_dir=tmp_path, blob_threshold=256) as store,
        PostgresEventStore(url, index_dir=tmp_path, blob_threshold=256) as other,
    ):
        importer = run(
            "import", lambda: store.append_stream([StreamedRequest("ses_i", imported(), 0)])
        )
        assert locked.wait(10)
        writer = run(
            "other",
            lambda: other.append_many([AppendRequest("ses_w", _events("ses_w", 9, "w", big=7), 0)]),
        )
        # before: it inserts its blob; now it waits for the blob lock instead
        wait_until(lambda: blobbed.is_set() or waiting(pg_server, "advisory"))
        go_on.set()  # the import inserts the same blob
        # before: the import waits for the other's transaction; now it goes on to its end
        wait_until(lambda: not importer.is_alive() or waiting(pg_server))
        go_lock.set()  # the other appender asks for the append lock
        importer.join(30)
        writer.join(30)
        assert outcome["import"] == {"ses_i": 13}, outcome
        assert outcome["other"] == {"ses_w": 10}, outcome
        assert store.verify().ok
        assert _seqs(store) == list(range(1, 24))  # gapless
        by_stream: dict[str, list[int]] = {}
        for recorded in store.read_all():
            by_stream.setdefault(recorded.stream, []).append(recorded.seq)
        for seqs in by_stream.values():  # each append contiguous
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), by_stream
        assert store.stream_version("ses_i") == 13 and store.stream_version("ses_w") == 10


def test_a_slow_import_outlasts_the_servers_timeouts(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role whose sessions end a statement after 300 ms and a transaction idle for
    300 ms: the import's ``COPY`` stays open while its input makes the next chunk, so
    either would cut it; it sets both off for its own transaction (``SET LOCAL``). The
    one pooled connection the import used keeps the role's settings after it (a
    session-wide ``SET`` would leave them off there)."""
    monkeypatch.setattr(streamed, "CHUNK", 5)

    def slow() -> Iterator[Event]:
        for i, event in enumerate(_events("ses_s", 20, "s", big=12)):
            if i % 5 == 4:
                time.sleep(0.45)  # longer than either timeout, inside the transaction
            yield event

    timeouts = {"statement_timeout": 300, "idle_in_transaction_session_timeout": 300}
    with (
        role_url(pg_server, tmp_path, "slow", **timeouts) as url,
        PostgresEventStore(url, index_dir=tmp_path, blob_threshold=256, pool_size=1) as store,
    ):
        with store._pool.connection() as conn:
            used = conn.info.backend_pid
        assert store.append_stream([StreamedRequest("ses_s", slow(), 0)]) == {"ses_s": 21}
        assert store.verify().ok
        with store._pool.connection() as conn:  # the import's own connection, still open
            assert conn.info.backend_pid == used
            for name in timeouts:
                assert conn.execute(f"SHOW {name}").fetchone() == ("300ms",)
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute("SELECT pg_sleep(1)")


@pytest.mark.parametrize("server", ["pg_server", "pg17_server"])
def test_an_import_outlasts_postgresql_17s_transaction_timeout(
    server: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From PostgreSQL 17 a role's ``transaction_timeout`` would end the import's
    transaction: it is set off for that transaction too (only there: an older server
    knows no such setting, and every import on one runs the guarded statement). Run on
    both servers `make test` has (Debian's 15 and the wheel's 18): on the older one the
    same slow import runs the guard, which must neither fail nor set anything; on 17+
    the role's timeout must not end it."""
    pg_server: PgServer = request.getfixturevalue(server)
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        version = conn.info.server_version
    has_it = version >= 170000
    if server == "pg17_server":  # the fixture's promise: this case runs the 17+ branch
        assert has_it, f"pg17_server is PostgreSQL {version}"
    monkeypatch.setattr(streamed, "CHUNK", 5)

    def slow() -> Iterator[Event]:
        for i, event in enumerate(_events("ses_t", 20, "t")):
            if i % 5 == 4:  # the first chunk is read before the transaction begins:
                time.sleep(0.25)  # 0.75 s inside it, more than the 300 ms timeout
            yield event

    role = {"transaction_timeout": 300} if has_it else {"statement_timeout": 300}
    with (
        role_url(pg_server, tmp_path, "tt", **role) as url,
        PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as store,
    ):
        assert store.append_stream([StreamedRequest("ses_t", slow(), 0)]) == {"ses_t": 21}
        assert store.verify().ok
        with store._pool.connection() as conn:
            if has_it:
                assert conn.execute("SHOW transaction_timeout").fetchone() == ("300ms",)
            else:  # the guard set nothing a server of this version does not know
                held = conn.execute("SELECT current_setting('transaction_timeout', true)")
                assert held.fetchone() == (None,)
