"""One-event appends in one round trip (PostgreSQL migration ``0005``, issue 13).

``CALL ctxledger_append_one`` checks the version and, when the append lock is free,
seals what waits and writes its row sealed (written once); otherwise it inserts the
row unsealed, commits, and waits for its seal inside the same call. These tests hold
the append lock from a raw connection to catch each moment, kill a writer while it
waits, and upgrade a ledger written with migrations 0001-0004.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from helpers.pg_server import PgServer, schema_at

from ctxledger.events import BLOB_THRESHOLD
from ctxledger.eventstore import AppendRequest
from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.postgres_append import Appender
from ctxledger.eventstore.preparing import prepare_append
from ctxledger.testing.eventstore import message

Conn = psycopg.Connection[tuple[object, ...]]


def schema_for(tmp_path: Path, prefix: str) -> str:
    return prefix + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]


@pytest.fixture
def store(pg_server: PgServer, tmp_path: Path) -> Iterator[PostgresEventStore]:
    url = f"{pg_server.url}?schema={schema_for(tmp_path, 'o_')}"
    with PostgresEventStore(url, index_dir=tmp_path) as opened:
        yield opened


def connect(store: PostgresEventStore) -> Conn:
    return psycopg.connect(
        store._conninfo, autocommit=True, options=f"-c search_path={store.schema}"
    )


def rows(store: PostgresEventStore) -> list[tuple[object, ...]]:
    """(seq, pid, event_id) of every row, sealed or not, in insertion order."""
    with connect(store) as conn:
        return conn.execute(
            "SELECT seq, pid, event_id FROM events ORDER BY coalesce(seq, 1e18), pid"
        ).fetchall()


def wait_until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def waiting_appender(store: PostgresEventStore) -> int | None:
    """The backend pid of a one-event append waiting for the append lock, if any."""
    with connect(store) as conn:
        found = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE 'CALL ctxledger_append_one%%'"
        ).fetchone()
    return int(str(found[0])) if found else None


def in_thread(fn: Callable[[], int]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # reported by the test
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_a_one_event_append_with_the_lock_free_writes_its_row_sealed_once(
    store: PostgresEventStore,
) -> None:
    first, second = message("ses_a", "one"), message("ses_b", "two")
    assert store.append("ses_a", [first], 0) == 1
    assert store.append("ses_b", [second], 0) == 1
    # no pid: never inserted unsealed, so never rewritten by a seal
    assert rows(store) == [(1, None, first.event_id), (2, None, second.event_id)]
    assert store.streams() == [("ses_a", 1), ("ses_b", 1)]
    report = store.verify()
    assert report.ok and report.events_checked == 2


def test_a_one_event_append_waits_for_its_seal_inside_the_call(
    store: PostgresEventStore,
) -> None:
    assert store.append("ses_a", [message("ses_a", "first")], 0) == 1
    late = message("ses_b", "waits")
    with connect(store) as sealer:
        sealer.execute("BEGIN")
        sealer.execute("SELECT pg_advisory_xact_lock(%s)", (store._appender.key,))
        thread, out = in_thread(lambda: store.append("ses_b", [late], 0))
        wait_until(lambda: waiting_appender(store) is not None)
        # committed (durable), unsealed, invisible; the caller is not answered yet
        assert [r[0] for r in rows(store)] == [1, None]
        assert store.last_seq() == 1 and store.stream_version("ses_b") == 0
        assert thread.is_alive()
        sealer.execute("ROLLBACK")
    thread.join(20)
    assert out == [1]
    assert [(r[0], r[2]) for r in rows(store)][1:] == [(2, late.event_id)]
    assert store.verify().ok


def test_a_writer_killed_while_waiting_for_its_seal_is_retried_and_sealed_once(
    store: PostgresEventStore,
) -> None:
    """The writer's connection dies after its insert committed: the store retries on a
    fresh connection, sees the stored event (a re-send), seals it and returns its
    version; the event is in the log exactly once."""
    event = message("ses_k", "survives")
    with connect(store) as sealer:
        sealer.execute("BEGIN")
        sealer.execute("SELECT pg_advisory_xact_lock(%s)", (store._appender.key,))
        thread, out = in_thread(lambda: store.append("ses_k", [event], 0))
        wait_until(lambda: waiting_appender(store) is not None)
        victim = waiting_appender(store)
        with connect(store) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (victim,))
        wait_until(lambda: waiting_appender(store) != victim)
        assert thread.is_alive()  # the retry waits for the lock too
        sealer.execute("ROLLBACK")
    thread.join(20)
    assert out == [1]
    assert [(r[0], r[2]) for r in rows(store)] == [(1, event.event_id)]
    assert store.verify().ok and store.streams() == [("ses_k", 1)]


def test_one_event_appends_race_on_one_stream_and_fill_the_log_without_gaps(
    store: PostgresEventStore,
) -> None:
    """Six threads: four on their own streams, two racing at expected versions on one
    shared stream (each round exactly one wins, the loser re-reads and retries)."""
    from ctxledger.errors import ConcurrencyError

    errors: list[BaseException] = []
    lost: list[int] = []

    def own(n: int) -> None:
        try:
            for i in range(20):
                store.append(f"ses_{n}", [message(f"ses_{n}", f"{n}:{i}")], i)
        except BaseException as exc:
            errors.append(exc)

    def shared(n: int) -> None:
        try:
            done = 0
            while done < 10:
                version = store.stream_version("ses_shared")
                try:
                    store.append("ses_shared", [message("ses_shared", f"s{n}:{done}")], version)
                    done += 1
                except ConcurrencyError:
                    lost.append(n)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=own, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=shared, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    log = list(store.read_all())
    assert [r.seq for r in log] == list(range(1, 4 * 20 + 20 + 1))
    assert [r.version for r in log if r.stream == "ses_shared"] == list(range(1, 21))
    assert all(r[0] is not None for r in rows(store))
    assert store.verify().ok


def test_a_ledger_of_migrations_0001_to_0004_is_upgraded_in_place(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """Rows written by ``ctxledger_insert`` (0003), one of them left unsealed by a writer
    that never waited: after 0005 the next one-event append seals it first, then its
    own row; the chain verifies and the seal walks the unsealed rows by index."""
    schema = schema_for(tmp_path, "u_")
    appender = Appender(q.lock_key(schema, "append"), q.notify_channel(schema))
    old = [message("ses_old", "one"), message("ses_old", "two"), message("ses_b", "three")]
    with schema_at(pg_server.url, schema, 4) as (conn, applied):
        assert applied[-1] == "0004_seal_after_linked_rows"
        for request in (AppendRequest("ses_old", old[:2], 0), AppendRequest("ses_b", old[2:], 0)):
            batches, _ = prepare_append([request], None, BLOB_THRESHOLD)
            if request.stream == "ses_b":  # its writer dies before sealing
                with psycopg.connect(pg_server.url, autocommit=True) as holder:
                    holder.execute("SELECT pg_advisory_lock(%s)", (appender.key,))
                    found = conn.execute(q.CALL_INSERT, appender.call_params(batches))
                    assert found.fetchone() == ([1], False)
            else:
                conn.execute(q.CALL_INSERT, appender.call_params(batches))
    with PostgresEventStore(f"{pg_server.url}?schema={schema}", index_dir=tmp_path) as store:
        assert [r.event.event_id for r in store.read_all()] == [e.event_id for e in old[:2]]
        new = message("ses_new")
        assert store.append("ses_new", [new], 0) == 1
        assert [(r.seq, r.event.event_id) for r in store.read_all()] == [
            (n + 1, e.event_id) for n, e in enumerate([*old, new])
        ]
        assert store.append("ses_old", [message("ses_old", "four")], 2) == 3
        report = store.verify()
        assert report.ok and report.events_checked == 5
        with connect(store) as conn:
            applied = [str(r[0]) for r in conn.execute("SELECT name FROM _migrations")]
            assert "0005_one_call_appends" in applied
            found = conn.execute(
                "SELECT proconfig FROM pg_proc WHERE proname = 'ctxledger_seal'"
                " AND pronamespace = %s::regnamespace",
                (schema,),
            ).fetchone()
            assert found is not None and "enable_bitmapscan=off" in list(found[0])


@pytest.mark.parametrize("schema", ["user", "order"])
def test_a_ledger_in_a_schema_named_by_a_reserved_word_opens_and_appends(
    pg_server: PgServer, tmp_path: Path, schema: str
) -> None:
    # the one-call procedure names its tables with the schema: it must quote it
    url = f"{pg_server.url}?schema={schema}"
    for _ in range(2):  # created, then reopened (migrations already applied)
        with PostgresEventStore(url, index_dir=tmp_path) as opened:
            stream = f"s-{opened.last_seq()}"
            for version in range(3):
                opened.append(stream, [message(stream, f"turn {version}")], version)
            assert opened.verify().ok
    with PostgresEventStore(url, index_dir=tmp_path) as opened:
        assert opened.last_seq() == 6
