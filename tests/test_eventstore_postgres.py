"""The PostgreSQL store: the backend contract, on a real private server, plus its faults.

Each store lives in a schema of its own (named after the test's path), so tests
share one server (the session fixture ``pg_server`` in conftest.py) without
seeing each other's events. The crash test runs a second server it may kill.
"""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import psycopg
import pytest
from helpers.pg_server import PgServer

from ctxledger.errors import (
    ConcurrencyError,
    InvalidConfig,
    InvalidEvent,
    InvalidInput,
    StoreError,
)
from ctxledger.events import Event
from ctxledger.eventstore import AppendRequest
from ctxledger.eventstore.postgres import ConnectionLost, PostgresEventStore, split_schema
from ctxledger.eventstore.postgres_schema import PG_MIGRATIONS
from ctxledger.testing.eventstore import EventStoreContract, message

HERE = Path(__file__).parent / "helpers"


def schema_for(path: Path) -> str:
    return "t_" + hashlib.sha256(str(path).encode()).hexdigest()[:20]


class TestPostgresStore(EventStoreContract):
    names_streams = True  # (the projector's open checks a fold against these names)

    @pytest.fixture(autouse=True)
    def _server(self, pg_server: PgServer) -> None:
        self.url = pg_server.url

    def make_store(self, path: Path) -> PostgresEventStore:
        return PostgresEventStore(self.url, schema=schema_for(path), index_dir=path.parent)


class TestPostgresStoreOn17(TestPostgresStore):
    """The same contract on the PostgreSQL 17+ server (the wheel's 18 beside Debian's 15),
    so what a newer server does differently (SQL, locks, LISTEN/NOTIFY) is caught. The two
    long property runs are left to the main server: what they exercise is the store's
    own bookkeeping, the same on any version (dropped, not skipped: ``None`` is not
    collected)."""

    test_random_appends_match_an_in_memory_model = None
    test_read_at_returns_exactly_the_records_asked_for = None

    @pytest.fixture(autouse=True)
    def _server(self, pg17_server: PgServer) -> None:
        self.url = pg17_server.url


@pytest.fixture
def url(pg_server: PgServer, tmp_path: Path) -> str:
    return f"{pg_server.url}?schema={schema_for(tmp_path)}"


@pytest.fixture
def store(url: str, tmp_path: Path) -> Iterator[PostgresEventStore]:
    with PostgresEventStore(url, index_dir=tmp_path) as opened:
        yield opened


def raw(store: PostgresEventStore) -> psycopg.Connection[tuple[object, ...]]:
    """A connection that bypasses the store, as an attacker or a broken tool would."""
    conninfo = store._conninfo
    return psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={store.schema}")


# --- opening, schemas and migrations ------------------------------------------------------


def test_schema_comes_from_the_url_and_is_stripped_from_it(pg_server: PgServer) -> None:
    conninfo, schema = split_schema(f"{pg_server.url}?sslmode=disable&schema=team_a")
    assert schema == "team_a" and "schema" not in conninfo and "sslmode=disable" in conninfo
    assert split_schema(pg_server.url) == (pg_server.url, None)


def test_ledgers_in_two_schemas_do_not_see_each_other(url: str, tmp_path: Path) -> None:
    with PostgresEventStore(url) as a, PostgresEventStore(url, schema="other_" + a.schema) as b:
        a.append("ses_a", [message("ses_a")], 0)
        assert b.last_seq() == 0 and b.streams() == []
        assert a.ledger_id != b.ledger_id


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"schema": "Bad-Name"}, InvalidConfig),
        ({"durability": "fast"}, InvalidConfig),
        ({"pool_size": 0}, InvalidConfig),
    ],
)
def test_bad_options_are_rejected(url: str, kwargs: dict[str, object], error: type) -> None:
    with pytest.raises(error):
        PostgresEventStore(url, **kwargs)  # type: ignore[arg-type]


def test_a_url_of_another_scheme_is_rejected() -> None:
    with pytest.raises(InvalidInput, match="PostgreSQL URL"):
        PostgresEventStore("mysql://localhost/db")


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(ConnectionLost, match="could not be reached") as caught:
        PostgresEventStore("postgresql://nobody:secret@127.0.0.1:1/none", connect_timeout=2)
    assert "secret" not in str(caught.value)
    # session 36: an open said "an append that failed this way may or may not be stored"
    assert "append" not in str(caught.value) and str(caught.value).endswith("the URL")


@pytest.mark.parametrize(("action", "told"), [("append", True), ("read the log", False)])
def test_only_an_append_cut_off_is_told_to_re_send(action: str, told: bool) -> None:
    where = type("Store", (), {"where": "postgresql://h/db (schema public)"})()
    lost = PostgresEventStore._translate(where, psycopg.OperationalError("gone"), action)  # type: ignore[arg-type]
    assert isinstance(lost, ConnectionLost)
    assert ("re-send the same events (ids make it safe)" in str(lost)) is told
    assert ("re-send" in str(lost)) is told  # (a read said it too, in other words)


def test_migrations_are_recorded_once_and_reopening_applies_none(store: PostgresEventStore) -> None:
    with raw(store) as conn:
        assert PG_MIGRATIONS.applied(conn) == PG_MIGRATIONS.names
        assert PG_MIGRATIONS.apply(conn, store.schema) == []


def test_concurrent_first_opens_apply_each_migration_once(url: str) -> None:
    errors: list[BaseException] = []

    def open_and_append(n: int) -> None:
        try:
            with PostgresEventStore(url) as s:
                s.append(f"ses_{n}", [message(f"ses_{n}")], 0)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_append, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with PostgresEventStore(url) as s:
        assert s.last_seq() == 6 and s.verify().ok


def test_a_newer_ledger_is_refused(store: PostgresEventStore, url: str) -> None:
    with raw(store) as conn:
        conn.execute("INSERT INTO _migrations VALUES ('9999_future', now())")
    with pytest.raises(StoreError, match="newer ctxledger"):
        PostgresEventStore(url)


def test_small_appends_are_hashed_by_the_server_function_exactly_as_in_python(
    store: PostgresEventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Odd characters in streams and ids (quotes, escapes, controls, non-ASCII): the bytes the
    function hashes are chain_header's, and no client-side transaction was needed."""
    from ctxledger.eventstore.postgres_append import Appender

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a small append took the client-side path")

    monkeypatch.setattr(Appender, "transaction", refuse)
    odd = 'ses_é"\\\n\t\x01\x7f\u2028😀'
    store.append_many(
        [
            AppendRequest(odd, [message(odd, event_id='evt_"q"\\é\x02')], 0),
            AppendRequest("ses_b", [message("ses_b"), message("ses_b")], 0),
        ]
    )
    assert store.append(odd, [message(odd)], 1) == 2
    assert [r.stream for r in store.read_all()] == [odd, "ses_b", "ses_b", odd]
    # verify() re-hashes every row in Python (chain_header + stored payload)
    assert store.verify().ok and store.last_seq() == 4


def test_reads_walk_the_index_even_with_stale_statistics(store: PostgresEventStore) -> None:
    """A bulk load the planner has not analyzed yet must not turn each read batch into a
    scan and sort of the rest of the log (the rebuild benchmark was 4x slower that way):
    a batch small beside the log (here 100 of 3,000) is read by walking the index."""
    from ctxledger.eventstore import postgres_sql as q

    store.append("ses_a", [message("ses_a") for _ in range(3000)], 0)
    with raw(store) as conn:
        plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + q.READ_ALL, (1, 100)).fetchall())
    assert "Index Scan" in plan and "Sort" not in plan, plan
    assert [r.seq for r in store.read_all(2990, 3005)] == list(range(2990, 3001))
    assert [r.version for r in store.read_stream("ses_a", 5, 7)] == [5, 6, 7]


# --- tampering is found by verify ----------------------------------------------------------


def test_an_altered_payload_is_named_by_verify(store: PostgresEventStore) -> None:
    store.append("ses_a", [message("ses_a"), message("ses_a", "original")], 0)
    with raw(store) as conn:
        conn.execute(
            "UPDATE events SET payload = convert_to("
            "replace(convert_from(payload, 'UTF8'), 'original', 'forged'), 'UTF8') WHERE seq = 2"
        )
    report = store.verify()
    assert not report.ok and report.first_bad_seq == 2 and "hash mismatch" in (report.problem or "")


def test_a_deleted_row_is_a_gap(store: PostgresEventStore) -> None:
    store.append("ses_a", [message("ses_a") for _ in range(3)], 0)
    with raw(store) as conn:
        conn.execute("DELETE FROM events WHERE seq = 2")
    report = store.verify()
    assert not report.ok and "gap" in (report.problem or "")


def test_a_corrupted_blob_is_named(store: PostgresEventStore) -> None:
    ref = store.put_blob(b"x" * 1000)
    with raw(store) as conn:
        conn.execute("UPDATE blobs SET data = %s WHERE ref = %s", (b"y" * 1000, ref))
    report = store.verify()
    assert not report.ok and "blob" in (report.problem or "")


# --- concurrency: the append lock ---------------------------------------------------------


def test_threads_appending_at_once_get_a_gapless_chain(url: str) -> None:
    errors: list[BaseException] = []
    with PostgresEventStore(url, pool_size=8) as store:

        def writer(n: int) -> None:
            try:
                for i in range(25):
                    store.append(f"ses_{n}", [message(f"ses_{n}"), message(f"ses_{n}")], 2 * i)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert [r.seq for r in store.read_all()] == list(range(1, 401))
        assert store.verify().ok


def test_two_processes_with_the_same_expected_version_one_wins(url: str) -> None:
    """Both race for each version; the loser gets ConcurrencyError, re-reads and retries."""
    rounds = 10
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "pg_racer.py"), url, name, str(rounds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    outcomes: Counter[str] = Counter()
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for round_ in range(rounds):
        for proc in procs:  # both are told at once; each appends at the same expected version
            assert proc.stdin is not None
            proc.stdin.write(f"{2 * round_}\n")
            proc.stdin.flush()
        results = [proc.stdout.readline().split() for proc in procs if proc.stdout is not None]
        outcomes.update(r[0] for r in results)
        assert sorted(r[0] for r in results) == ["conflict", "won"], results
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert outcomes == {"won": rounds, "conflict": rounds}
    with PostgresEventStore(url) as store:
        events = list(store.read_stream("ses_race"))
        # the loser's retry follows the winner's append: nothing was lost
        assert len(events) == 2 * rounds and store.verify().ok
        writers = Counter(r.event.event_id.split("_")[1] for r in events)
        assert writers == {"a": rounds, "b": rounds}


def test_a_fleet_of_writer_processes_shares_one_gapless_chain(url: str) -> None:
    """Four processes (own connections, own pools) write their own sessions and one shared
    session at once: every event lands exactly once, in each writer's order, one chain."""
    writers, count = ("w0", "w1", "w2", "w3"), 40
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "pg_fleet.py"), url, name, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in writers
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:  # all start together
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.close()
    done = [proc.stdout.readline().split() for proc in procs if proc.stdout is not None]
    assert [d[0] for d in done] == ["done"] * len(writers) and all(p.wait(60) == 0 for p in procs)
    with PostgresEventStore(url) as store:
        log = list(store.read_all())
        assert [r.seq for r in log] == list(range(1, 2 * count * len(writers) + 1))
        assert len({r.event.event_id for r in log}) == len(log)
        assert store.verify().ok
        for name in writers:
            own = [r.event.event_id for r in store.read_stream(f"ses_{name}")]
            assert own == [f"evt_{name}_own_{n:05d}" for n in range(count)]
        shared = [r.event.event_id for r in store.read_stream("ses_shared")]
        assert len(shared) == count * len(writers)
        for name in writers:  # each writer's shared events, in its own order
            mine = [e for e in shared if e.startswith(f"evt_{name}_")]
            assert mine == [f"evt_{name}_shared_{n:05d}" for n in range(count)]
        streams = dict(store.streams())
        assert streams["ses_shared"] == count * len(writers)


def test_concurrency_error_writes_nothing(store: PostgresEventStore) -> None:
    store.append("ses_a", [message("ses_a")], 0)
    with pytest.raises(ConcurrencyError):
        store.append("ses_a", [message("ses_a", "x" * 100_000)], 0)
    assert store.last_seq() == 1
    with raw(store) as conn:
        assert conn.execute("SELECT count(*) FROM blobs").fetchone() == (0,)


# --- faults: a crashed server, a lost listener --------------------------------------------


def _batches(store: PostgresEventStore, half: int) -> Counter[int]:
    """Events per batch number (ids are evt_<k>_...)."""
    return Counter(int(r.event.event_id.split("_")[1]) for r in store.read_all())


def _start_writer(url: str, half: int) -> subprocess.Popen[str]:
    writer = subprocess.Popen(
        [sys.executable, str(HERE / "pg_writer.py"), url, str(half)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    return writer


def _acked(writer: subprocess.Popen[str], count: int) -> list[int]:
    assert writer.stdout is not None
    return [int(writer.stdout.readline().split()[1]) for _ in range(count)]


def test_server_killed_mid_batch_leaves_only_whole_batches(own_server: PgServer) -> None:
    half, rng = 100, random.Random(20261124)
    url = own_server.url
    acked: list[int] = []
    for _ in range(4):
        writer = _start_writer(url, half)
        acked += _acked(writer, 1)
        time.sleep(rng.uniform(0.05, 0.3))
        own_server.kill()  # mid-batch: the writer is always inside an append
        writer.kill()
        writer.wait()
        own_server.start()  # crash recovery
        with PostgresEventStore(url) as store:
            counts = _batches(store, half)
            assert set(counts.values()) <= {2 * half}, counts  # whole batches only
            assert all(counts[k] == 2 * half for k in acked)  # nothing acknowledged is lost
            assert store.verify().ok
    # a writer that lives through a crash reconnects and re-sends its batch (ids make that safe)
    writer = _start_writer(url, half)
    acked += _acked(writer, 1)
    own_server.kill()
    own_server.start()
    acked += _acked(writer, 2)
    writer.kill()
    writer.wait()
    with PostgresEventStore(url) as store:
        counts = _batches(store, half)
        assert set(counts.values()) <= {2 * half} and all(counts[k] == 2 * half for k in acked)
        assert store.verify().ok and store.last_seq() == 2 * half * len(counts)


def _terminate(url: str, application: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (application,),
        ).fetchone()
    return int(row[0]) if row else 0


def test_follow_survives_a_lost_connection_without_skipping_or_repeating(
    store: PostgresEventStore, pg_server: PgServer
) -> None:
    total = 60
    seen: list[int] = []
    killed: list[int] = []

    def produce() -> None:
        for n in range(total):
            store.append("ses_a", [message("ses_a", f"event {n}")], None)
            if n in (15, 35):
                time.sleep(0.3)  # the follower is waiting on its LISTEN connection now
                killed.append(_terminate(pg_server.url, "ctxledger-follow"))
            if n == 45:
                killed.append(_terminate(pg_server.url, "ctxledger"))  # the pool's, too
            time.sleep(0.005)

    async def main() -> None:
        async def consume() -> None:
            async for recorded in store.follow(1):
                seen.append(recorded.seq)
                if len(seen) == total:
                    tg.cancel_scope.cancel()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                await anyio.to_thread.run_sync(produce)

    anyio.run(main)
    assert killed[:2] == [1, 1] and killed[2] >= 1  # the listener really was cut, twice
    assert seen == list(range(1, total + 1))


def test_follow_is_woken_by_notify_not_by_polling(store: PostgresEventStore) -> None:
    """With a poll interval of a minute, only the notification can deliver the event in time."""
    got: list[Event] = []
    late = message("ses_a", "late")

    async def main() -> None:
        async def consume() -> None:
            async for recorded in store.follow(1, poll_interval=60):
                got.append(recorded.event)
                tg.cancel_scope.cancel()

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                await anyio.sleep(0.5)
                await anyio.to_thread.run_sync(store.append, "ses_a", [late], 0)

    anyio.run(main)
    assert got == [late]


@pytest.mark.parametrize(
    "edit",
    [
        "ALTER TABLE events ALTER COLUMN stream_id DROP NOT NULL;"
        " UPDATE events SET stream_id = NULL WHERE seq = 2",
        "ALTER TABLE events ALTER COLUMN version DROP NOT NULL;"
        " UPDATE events SET version = NULL WHERE seq = 2",
        "UPDATE events SET version = 99 WHERE seq = 2",
    ],
)
def test_a_read_by_stream_names_a_row_edited_out_of_it(
    store: PostgresEventStore, edit: str
) -> None:
    """(Session 35: such a row was left out of ``read_stream``, or read out of order.)"""
    store.append("ses_a", [message("ses_a", f"m{i}") for i in range(3)], expected_version=None)
    with raw(store) as conn:
        for statement in edit.split(";"):
            conn.execute(statement)
    assert [r.seq for r in store.read_all()] == [1, 2, 3]
    with pytest.raises(InvalidEvent, match=r"no event at version 2 \(the event at seq 3 has"):
        list(store.read_stream("ses_a"))


# --- derived values (session 39) -----------------------------------------------------------


def test_writers_creating_the_derived_table_at_once_all_store(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """The derived table is not a migration: the first put creates it. Several stores
    putting at the same moment into a schema without it all succeed (a concurrent
    creator's duplicate error is retried), and an older schema's read finds nothing."""
    for attempt in range(3):
        schema = schema_for(tmp_path / str(attempt))
        stores = [
            PostgresEventStore(pg_server.url, schema=schema, index_dir=tmp_path) for _ in range(4)
        ]
        try:
            assert stores[0].get_derived("ab" * 32, "facts/x", "v") is None  # (no table)
            start = threading.Barrier(len(stores))

            def put(n: int, store: PostgresEventStore, start: threading.Barrier) -> None:
                start.wait()
                store.put_derived(f"{n:02d}" * 32, "facts/x", "v", bytes([n]))

            threads = [
                threading.Thread(target=put, args=(n, s, start)) for n, s in enumerate(stores)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            found = [stores[0].get_derived(f"{n:02d}" * 32, "facts/x", "v") for n in range(4)]
            assert found == [bytes([n]) for n in range(4)]
        finally:
            for store in stores:
                store.close()
