"""The leaner one-event append (PostgreSQL migration ``0006``, issue 13, session 23).

``CALL ctxledger_append_one`` is prepared once per pool connection (libpq, binary
``bytea`` arguments) and its procedure reads less: the stream's id and version in one
statement, and with the append lock free it calls ``ctxledger_seal`` only when a row
waits. These tests upgrade a ledger written by migrations 0001-0005 (today's format
before this change), check the error mapping of the prepared call, that a pool
connection keeps its prepared statement through the client-side transaction's
ROLLBACKs, and (a hypothesis property) that concurrent writers always leave a gapless,
verified log with every acknowledged event in it exactly once.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from helpers.pg_server import PgServer, schema_at
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxledger.errors import ConcurrencyError, DuplicateEventError
from ctxledger.events import BLOB_THRESHOLD, MessageAppended
from ctxledger.eventstore import AppendRequest
from ctxledger.eventstore import postgres_sql as q
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.eventstore.postgres_append import Appender
from ctxledger.eventstore.preparing import prepare_append
from ctxledger.testing.eventstore import message

Conn = psycopg.Connection[tuple[object, ...]]


def schema_for(tmp_path: Path, prefix: str, extra: str = "") -> str:
    return prefix + hashlib.sha256(f"{tmp_path}{extra}".encode()).hexdigest()[:20]


@pytest.fixture
def store(pg_server: PgServer, tmp_path: Path) -> Iterator[PostgresEventStore]:
    url = f"{pg_server.url}?schema={schema_for(tmp_path, 'l_')}"
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=1) as opened:
        yield opened


def connect(store: PostgresEventStore) -> Conn:
    return psycopg.connect(
        store._conninfo, autocommit=True, options=f"-c search_path={store.schema}"
    )


def unsealed(store: PostgresEventStore) -> int:
    with connect(store) as conn:
        found = conn.execute("SELECT count(*) FROM events WHERE seq IS NULL").fetchone()
    assert found is not None
    return int(str(found[0]))


def one_call_args(
    appender: Appender, stream: str, event: MessageAppended, expected: int
) -> tuple[object, ...]:
    """The arguments main's ``Appender.call_one`` passes to the 0005 procedure."""
    batches, _ = prepare_append([AppendRequest(stream, [event], expected)], None, BLOB_THRESHOLD)
    p = appender.call_params(batches)
    return (p[0], p[1], stream, expected, *(p[i][0] for i in range(5, 11)))


def test_a_ledger_of_migrations_0001_to_0005_is_upgraded_in_place(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """A ledger as today's main writes it (0001-0005): sealed rows by the 0005 procedure,
    a batch by ``ctxledger_insert`` and one row a writer left unsealed. After 0006 the
    store opens, verifies, seals the orphan before its own row, and keeps appending."""
    schema = schema_for(tmp_path, "u5_")
    appender = Appender(q.lock_key(schema, "append"), q.notify_channel(schema))
    first = [message("ses_a", "one"), message("ses_a", "two")]
    batch = [message("ses_b", "three"), message("ses_b", "four")]
    orphan = message("ses_c", "left unsealed")
    with schema_at(pg_server.url, schema, 5) as (conn, applied):
        assert applied[-1] == "0005_one_call_appends"
        for version, event in enumerate(first):  # the 0005 procedure, as main calls it
            conn.execute(q.CALL_ONE, one_call_args(appender, "ses_a", event, version))
        batches, _ = prepare_append([AppendRequest("ses_b", batch, 0)], None, BLOB_THRESHOLD)
        conn.execute(q.CALL_INSERT, appender.call_params(batches))
        batches, _ = prepare_append([AppendRequest("ses_c", [orphan], 0)], None, BLOB_THRESHOLD)
        with psycopg.connect(pg_server.url, autocommit=True) as holder:  # its writer dies
            holder.execute("SELECT pg_advisory_lock(%s)", (appender.key,))
            found = conn.execute(q.CALL_INSERT, appender.call_params(batches)).fetchone()
            assert found == ([1], False)
    with PostgresEventStore(f"{pg_server.url}?schema={schema}", index_dir=tmp_path) as store:
        assert store.verify().ok
        assert [r.event.event_id for r in store.read_all()] == [
            e.event_id for e in [*first, *batch]
        ]
        new = message("ses_new")
        assert store.append("ses_new", [new], 0) == 1  # lock free, a row waits: sealed first
        assert [(r.seq, r.event.event_id) for r in store.read_all()] == [
            (n + 1, e.event_id) for n, e in enumerate([*first, *batch, orphan, new])
        ]
        assert store.append("ses_a", [message("ses_a", "five")], 2) == 3  # nothing waits
        assert store.append("ses_new", [new], 0) == 1  # a re-send: stored once
        report = store.verify()
        assert report.ok and report.events_checked == 7 and unsealed(store) == 0
        with connect(store) as conn:
            applied = [str(r[0]) for r in conn.execute("SELECT name FROM _migrations")]
            assert applied[-1] == "0006_lean_one_call"
            insert = conn.execute(
                "SELECT pg_get_functiondef('ctxledger_insert'::regproc)"
            ).fetchone()
            assert insert is not None and "IF NOT o_sealed THEN" in str(insert[0])
            config = conn.execute(
                "SELECT proconfig FROM pg_proc WHERE proname = 'ctxledger_seal'"
                " AND pronamespace = %s::regnamespace",
                (schema,),
            ).fetchone()
            assert config is not None
            assert {"enable_bitmapscan=off", "plan_cache_mode=force_generic_plan"} <= set(config[0])


def test_the_prepared_call_maps_conflicts_re_sends_and_clashes(
    store: PostgresEventStore,
) -> None:
    event = message("ses_a", "one")
    assert store.append("ses_a", [event], 0) == 1
    assert store.append("ses_a", [event], 0) == 1  # a re-send: no-op, same version
    with pytest.raises(ConcurrencyError):
        store.append("ses_a", [message("ses_a", "stale")], 0)
    with pytest.raises(DuplicateEventError):
        store.append("ses_b", [message("ses_b", "clash", event_id=event.event_id)], 0)
    assert store.append("ses_a", [message("ses_a", "two")], None) == 2
    # odd text travels as text, bytes as bytes: the server hashes what Python hashes
    odd = message('ses_ünï "q" \\', "é\u2028\U0001f600 '; DROP TABLE events; --")
    assert store.append(odd.session_id, [odd], 0) == 1
    assert [r.event for r in store.read_stream(odd.session_id)] == [odd]
    report = store.verify()
    assert report.ok and report.events_checked == 3 and unsealed(store) == 0


def test_a_pool_connection_keeps_its_prepared_call_through_rollbacks(
    store: PostgresEventStore,
) -> None:
    """With one pool connection, stale versions and blob appends (the client-side
    transaction, which ROLLs BACK on a conflict) interleave with one-event calls."""
    for n in range(3):
        assert store.append("ses_a", [message("ses_a", f"call {n}")], 2 * n) == 2 * n + 1
        with pytest.raises(ConcurrencyError):
            store.append("ses_a", [message("ses_a", "stale"), message("ses_a", "x")], 0)
        big = message("ses_a", "b" * (BLOB_THRESHOLD + 10))
        assert store.append("ses_a", [big], 2 * n + 1) == 2 * n + 2
    with connect(store) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ctxledger'"
            " AND backend_type = 'client backend'"
        ).fetchone()
    assert found is not None and int(str(found[0])) >= 1
    assert store.verify().ok and store.stream_version("ses_a") == 6


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    plans=st.lists(
        st.lists(st.sampled_from(["own", "shared", "batch"]), min_size=1, max_size=8),
        min_size=2,
        max_size=5,
    )
)
def test_concurrent_writers_leave_a_gapless_verified_log(
    pg_server: PgServer, tmp_path: Path, plans: list[list[str]]
) -> None:
    """Each thread runs its plan: one-event appends to its own stream, one-event appends
    racing on a shared stream at read versions (a loser retries), or a three-event
    batch. Whatever the interleaving: seq is 1..n without a gap, every stream's
    versions are 1..k, every acknowledged event is in the log once, nothing stays
    unsealed, and verify passes."""
    url = f"{pg_server.url}?schema={schema_for(tmp_path, 'h_', repr(plans))}"
    acked: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    with PostgresEventStore(url, index_dir=tmp_path, pool_size=len(plans)) as store:

        def run(n: int, plan: list[str]) -> None:
            try:
                for i, step in enumerate(plan):
                    stream = "ses_shared" if step == "shared" else f"ses_{n}"
                    events = [
                        message(stream, f"{n}.{i}.{k}") for k in range(3 if step == "batch" else 1)
                    ]
                    while True:
                        try:
                            store.append(stream, events, store.stream_version(stream))
                            break
                        except ConcurrencyError:
                            continue
                    with lock:
                        acked.extend(e.event_id for e in events)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(n, p)) for n, p in enumerate(plans)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        log = list(store.read_all())
        assert [r.seq for r in log] == list(range(1, len(log) + 1))
        assert sorted(r.event.event_id for r in log) == sorted(acked)
        by_stream: dict[str, list[int]] = {}
        for r in log:
            by_stream.setdefault(r.stream, []).append(r.version)
        assert all(v == list(range(1, len(v) + 1)) for v in by_stream.values())
        report = store.verify()
        assert report.ok and report.events_checked == len(acked) and unsealed(store) == 0


def test_a_server_killed_under_waiting_writers_keeps_every_acknowledged_append(
    own_server: PgServer, tmp_path: Path
) -> None:
    """Six threads append one- and two-event turns (most of them wait for a seal, their
    rows committed without a flush of their own) while the server is SIGKILLed, twice: after
    recovery every acknowledged event is in the log exactly once, seq is gapless, a
    re-send of the last event of each writer is a no-op or an append, and verify passes."""
    url = f"{own_server.url}?schema=crash"
    acked: list[str] = []
    sent: dict[int, list[list[MessageAppended]]] = {}
    lock = threading.Lock()

    def writer(n: int, store: PostgresEventStore, stop: threading.Event) -> None:
        stream = f"ses_{n}"
        while not stop.is_set():  # one-event calls and two-event ctxledger_insert calls
            events = [message(stream, f"{n}") for _ in range(1 + len(sent.get(n, [])) % 2)]
            sent.setdefault(n, []).append(events)
            try:
                store.append(stream, events, None)
            except Exception:  # the server went away: this append is unacknowledged
                return
            with lock:
                acked.extend(e.event_id for e in events)

    for _ in range(2):
        stop = threading.Event()
        with PostgresEventStore(url, index_dir=tmp_path, pool_size=6) as store:
            threads = [threading.Thread(target=writer, args=(n, store, stop)) for n in range(6)]
            for t in threads:
                t.start()
            deadline = len(acked) + 60
            while len(acked) < deadline and any(t.is_alive() for t in threads):
                threading.Event().wait(0.01)
            own_server.kill()
            stop.set()
            for t in threads:
                t.join(30)
            own_server.start()
        with PostgresEventStore(url, index_dir=tmp_path) as store:
            for n, tries in sent.items():  # a re-send of the last try: stored once
                store.append(f"ses_{n}", tries[-1], None)
            log = [r.event.event_id for r in store.read_all()]
            assert set(acked) <= set(log) and len(log) == len(set(log))
            assert store.last_seq() == len(log) and unsealed(store) == 0
            assert store.verify().ok


def test_a_seal_made_by_a_normal_durability_session_is_still_flushed(
    store: PostgresEventStore, pg_server: PgServer
) -> None:
    """Rows that waited were committed without their own flush; whoever seals them, even a
    ``durability="normal"`` process (``synchronous_commit=off``), commits the seal flushed,
    and a seal that found nothing waiting leaves the session's setting alone."""
    appender = Appender(q.lock_key(store.schema, "append"), q.notify_channel(store.schema))
    store.append("ses_a", [message("ses_a", "first")], 0)
    batches, _ = prepare_append(
        [AppendRequest("ses_w", [message("ses_w", "waits")], 0)], None, BLOB_THRESHOLD
    )
    normal = psycopg.connect(
        pg_server.url, options=f"-c search_path={store.schema} -c synchronous_commit=off"
    )
    with normal, psycopg.connect(pg_server.url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (appender.key,))
        normal.autocommit = True
        assert normal.execute(q.CALL_INSERT, appender.call_params(batches)).fetchone() == (
            [1],
            False,
        )
        holder.execute("SELECT pg_advisory_unlock(%s)", (appender.key,))
        assert unsealed(store) == 1
        normal.autocommit = False
        for waiting, setting in ((1, "on"), (0, "off")):
            normal.execute("SELECT pg_advisory_xact_lock(%s)", (appender.key,))
            normal.execute("SELECT ctxledger_seal(%s)", (appender.channel,))
            assert unsealed(store) == waiting  # not committed yet
            found = normal.execute("SHOW synchronous_commit").fetchone()
            assert found is not None and found[0] == setting
            normal.commit()
    assert unsealed(store) == 0 and store.verify().ok
    assert [r.stream for r in store.read_all()] == ["ses_a", "ses_w"]
