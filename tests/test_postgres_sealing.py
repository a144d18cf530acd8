"""The PostgreSQL store's sealed appends: the failure modes of group-committed appends.

An append inserts its rows unsealed (no seq, no hash) and commits; whoever holds the
append lock seals every committed unsealed row (gapless seq, chain hash) in one
transaction. These tests hold that lock from a raw connection to freeze the moments in
between: unsealed rows are invisible to every reader, a sealer killed mid-seal takes
nothing with it, a waiting appender seals in its place, and rows whose writer died
before sealing are sealed by the next append (or by a re-send of them).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from helpers.pg_server import PgServer, schema_at

from ctxledger.eventstore import AppendRequest
from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.postgres_append import Appender
from ctxledger.testing.eventstore import message

Conn = psycopg.Connection[tuple[object, ...]]


@pytest.fixture
def store(pg_server: PgServer, tmp_path: Path) -> Iterator[PostgresEventStore]:
    schema = "s_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]
    with PostgresEventStore(f"{pg_server.url}?schema={schema}", index_dir=tmp_path) as opened:
        yield opened


def connect(store: PostgresEventStore) -> Conn:
    return psycopg.connect(
        store._conninfo, autocommit=True, options=f"-c search_path={store.schema}"
    )


def hold_lock(store: PostgresEventStore, conn: Conn) -> None:
    """Take the append lock in an open transaction: nobody else can seal meanwhile."""
    conn.execute("BEGIN")
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (store._appender.key,))


@pytest.fixture
def sealer(store: PostgresEventStore) -> Iterator[Conn]:
    with connect(store) as conn:
        hold_lock(store, conn)
        yield conn


def unsealed(store: PostgresEventStore) -> int:
    with connect(store) as conn:
        row = conn.execute("SELECT count(*) FROM events WHERE seq IS NULL").fetchone()
    return int(row[0]) if row else -1


def orphan_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends from now on commit their rows and never wait for their seal (a writer
    that dies right after its insert): one-event appends too go through the two-call
    path, whose second call is made a no-op (the one-call procedure of migration 0005
    waits inside the server; ``test_postgres_one_call.py`` kills a writer there)."""
    monkeypatch.setattr(q, "CALL_AWAIT", "SELECT %s, %s, %s::text[]")
    monkeypatch.setattr(Appender, "call_one", lambda self, conn, b: self.call_many(conn, [b]))


def wait_until(check: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_sealer_killed_mid_seal_takes_nothing_and_the_waiter_seals_instead(
    store: PostgresEventStore,
) -> None:
    store_first = message("ses_a", "sealed before")
    assert store.append("ses_a", [store_first], 0) == 1
    sealer = connect(store)
    hold_lock(store, sealer)

    late = message("ses_b", "waits for its seal")
    result: list[int] = []
    appender = threading.Thread(target=lambda: result.append(store.append("ses_b", [late], 0)))
    appender.start()
    wait_until(lambda: unsealed(store) == 1)  # inserted and committed, not sealed

    def readers_see_only_the_first() -> None:
        assert store.last_seq() == 1
        assert [r.event.event_id for r in store.read_all()] == [store_first.event_id]
        assert store.stream_version("ses_b") == 0 and list(store.read_stream("ses_b")) == []
        assert store.streams() == [("ses_a", 1)]
        report = store.verify()
        assert report.ok and report.events_checked == 1

    readers_see_only_the_first()
    # the sealer gets halfway: the row has its seq and hash in the sealer's transaction
    tail = sealer.execute("SELECT * FROM ctxledger_seal(%s)", (store._appender.channel,))
    assert tail.fetchone() is not None
    readers_see_only_the_first()
    assert appender.is_alive()  # not acknowledged: its seal is not committed

    with connect(store) as other:  # the sealer dies before its commit
        pid = sealer.info.backend_pid
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))
    appender.join(20)
    assert not appender.is_alive() and result == [1]  # the waiter sealed its own row
    assert [(r.seq, r.event.event_id) for r in store.read_all()] == [
        (1, store_first.event_id),
        (2, late.event_id),
    ]
    assert store.verify().ok and unsealed(store) == 0
    sealer.close()


def test_rows_a_dead_writer_left_unsealed_are_sealed_by_a_resend_or_the_next_append(
    store: PostgresEventStore, sealer: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the writer "dies" right after its insert committed: it never waits for its seal
    monkeypatch.setattr(q, "CALL_AWAIT", "SELECT %s, %s, %s::text[]")
    orphans = [message("ses_dead", "one"), message("ses_dead", "two")]
    assert store.append("ses_dead", orphans, 0) == 2
    sealer.execute("ROLLBACK")  # the lock is free again, and nobody sealed
    monkeypatch.undo()
    assert unsealed(store) == 2 and store.last_seq() == 0 and store.streams() == []

    # a re-send of the same events is recognised and seals them (the client-side path)
    assert store.append("ses_dead", orphans, 0) == 2
    assert [r.event.event_id for r in store.read_all()] == [e.event_id for e in orphans]

    # rows orphaned again are sealed, first, by the next append of anyone
    hold_lock(store, sealer)
    orphan_writes(monkeypatch)
    third = message("ses_dead", "three")
    assert store.append("ses_dead", [third], 2) == 3
    sealer.execute("ROLLBACK")
    monkeypatch.undo()
    nxt = message("ses_next")
    assert store.append("ses_next", [nxt], 0) == 1
    assert [(r.seq, r.event.event_id) for r in store.read_all()][2:] == [
        (3, third.event_id),
        (4, nxt.event_id),
    ]
    assert store.verify().ok and unsealed(store) == 0
    assert dict(store.streams()) == {"ses_dead": 3, "ses_next": 1}


def test_a_stale_expected_version_counts_unsealed_rows(
    store: PostgresEventStore, sealer: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unsealed row holds its version: a second append at the same expected version
    loses even before the first is sealed (exactly one wins)."""
    from ctxledger.errors import ConcurrencyError

    orphan_writes(monkeypatch)
    assert store.append("ses_a", [message("ses_a", "first")], 0) == 1
    monkeypatch.undo()
    sealer.execute("ROLLBACK")
    with pytest.raises(ConcurrencyError):
        store.append("ses_a", [message("ses_a", "second")], 0)
    assert [r.version for r in store.read_stream("ses_a")] == [1] and store.verify().ok


def test_each_append_is_contiguous_in_the_log_under_concurrency(
    store: PostgresEventStore,
) -> None:
    """Appends of several streams at once, from many threads: each append's rows are
    sealed together and next to each other, streams in version order, one chain."""
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(15):
                store.append_many(
                    [
                        AppendRequest(f"ses_{n}a", [message(f"ses_{n}a", f"{n}:{i}:a")], i),
                        AppendRequest(f"ses_{n}b", [message(f"ses_{n}b", f"{n}:{i}:b")], i),
                    ]
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    log = list(store.read_all())
    assert [r.seq for r in log] == list(range(1, 6 * 15 * 2 + 1))
    for first, second in zip(log[::2], log[1::2], strict=True):
        assert (first.stream[:-1], first.stream[-1], second.stream[-1]) == (
            second.stream[:-1],
            "a",
            "b",
        )
        assert first.version == second.version
    assert store.verify().ok and unsealed(store) == 0


def test_a_ledger_written_before_sealing_is_upgraded_in_place(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """A ledger of migrations 0001-0002 (appends by ``ctxledger_append``, lock held
    through the flush) opens under 0003: same events, same chain, appends go on."""
    from ctxledger.events import BLOB_THRESHOLD
    from ctxledger.eventstore.postgres_append import Appender
    from ctxledger.eventstore.preparing import prepare_append

    schema = "u_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]
    appender = Appender(q.lock_key(schema, "append"), q.notify_channel(schema))
    old = [message("ses_old", "one"), message("ses_old", "two"), message("ses_b", "three")]
    with schema_at(pg_server.url, schema, 2) as (conn, applied):
        assert applied == ["0001_event_log", "0002_append_function"]
        for request in (
            AppendRequest("ses_old", old[:2], 0),
            AppendRequest("ses_b", old[2:], 0),
        ):
            batches, _ = prepare_append([request], None, BLOB_THRESHOLD)
            conn.execute(
                q.CALL_INSERT.replace(
                    "o_versions, o_sealed FROM ctxledger_insert", "ctxledger_append"
                ),
                appender.call_params(batches),
            )
    with PostgresEventStore(f"{pg_server.url}?schema={schema}", index_dir=tmp_path) as store:
        assert [(r.seq, r.event.event_id) for r in store.read_all()] == [
            (n + 1, e.event_id) for n, e in enumerate(old)
        ]
        assert store.verify().ok
        assert store.append("ses_old", [message("ses_old", "four")], 2) == 3
        assert store.append("ses_new", [message("ses_new")], 0) == 1
        assert store.streams() == [("ses_old", 3), ("ses_b", 1), ("ses_new", 1)]
        report = store.verify()
        assert report.ok and report.events_checked == 5


def test_migrate_copies_rows_a_dead_writer_left_unsealed(
    store: PostgresEventStore, sealer: Conn, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Committed but unsealed rows are part of the log: a copy seals them first (under
    the append lock) instead of leaving them behind for the source to seal later."""
    from ctxledger.eventstore import SQLiteEventStore
    from ctxledger.eventstore.transfer import copy_ledger

    # the writer "dies" right after its insert committed (the sealer fixture holds the lock)
    monkeypatch.setattr(q, "CALL_AWAIT", "SELECT %s, %s, %s::text[]")
    orphan = message("ses_a", "orphan")
    assert store.append("ses_a", [message("ses_a", "first"), orphan], 0) == 2
    sealer.execute("ROLLBACK")
    monkeypatch.undo()
    assert unsealed(store) == 2 and store.last_seq() == 0
    with SQLiteEventStore(tmp_path / "copy.db") as dest:
        report = copy_ledger(store, dest)
        assert report.events == 2
        assert [r.event.event_id for r in dest.read_all()][-1] == orphan.event_id
        assert dest.verify().ok
    assert unsealed(store) == 0 and store.verify().ok
