"""SQLite's ``follow()`` outlasts a read another connection holds up (session 44).

A read cut by SQLite's lock (``StoreBusy``: held past the store's ``busy_timeout_ms``)
ended ``follow()`` and the server's event feed with the error; PostgreSQL's follow
already retried its cancelled reads. Now both back off and read again from the same seq.

Made busy for real: in WAL mode (every ledger ctxledger writes) readers do not wait
for writers, so the ledger read here is a copy made with ``VACUUM INTO`` (a usual way
to snapshot a live SQLite file), which SQLite leaves in rollback-journal mode and the
store opens read-only as it is. Another connection's ``BEGIN EXCLUSIVE`` there keeps
every reader out until it ends.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers.following import follow_beside
from test_append_stream import _events

from ctxledger.errors import StoreBusy
from ctxledger.eventstore import AppendRequest
from ctxledger.eventstore.sqlite import SQLiteEventStore


def _rollback_mode_copy(tmp_path: Path) -> tuple[Path, int]:
    """A ledger of two sessions copied with ``VACUUM INTO``, and its last seq."""
    live, copy = tmp_path / "live.db", tmp_path / "copy.db"
    with SQLiteEventStore(live) as store:
        store.append_many(
            [
                AppendRequest("ses_a", _events("ses_a", 3, "a"), 0),
                AppendRequest("ses_b", _events("ses_b", 2, "b"), 0),
            ]
        )
        last = store.last_seq()
    with sqlite3.connect(live) as conn:
        conn.execute("VACUUM INTO ?", (str(copy),))
    conn.close()
    with sqlite3.connect(copy) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()
    return copy, last


def test_follow_retries_a_read_another_connection_holds_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batch is read; then another connection takes an exclusive lock before
    the second read, which waits its 50 ms and is cut (a real ``StoreBusy``, recorded
    on its way out). The follower backs off, reads that batch again once the lock is
    gone, and yields every seq once, in order."""
    path, last = _rollback_mode_copy(tmp_path)
    store = SQLiteEventStore(path, read_only=True, busy_timeout_ms=50)
    second, locked, cut_seen = threading.Event(), threading.Event(), threading.Event()
    reads: list[int] = []
    cut: list[StoreBusy] = []
    read = store._read_batch

    def reading(from_seq: int, *args: Any) -> Any:
        reads.append(from_seq)
        if len(reads) == 2:  # the second read begins only once the lock is held
            second.set()
            assert locked.wait(20)
        try:
            return read(from_seq, *args)
        except StoreBusy as exc:
            cut.append(exc)
            cut_seen.set()
            raise

    monkeypatch.setattr(store, "_read_batch", reading)

    def locker() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            assert second.wait(20)
            conn.execute("BEGIN EXCLUSIVE")
            locked.set()
            cut_seen.wait(20)
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    seqs: list[int] = []
    try:
        follow_beside(store, seqs, last, locker, batch_size=2)
    finally:
        store.close()
    assert cut and "another writer held the lock for more than 50 ms" in str(cut[0])
    assert seqs == list(range(1, last + 1))
    assert reads[:3] == [1, 3, 3]  # the cut read, then the same seq again


def test_a_busy_read_outside_follow_is_still_an_error(tmp_path: Path) -> None:
    """Only follow() retries: a plain read held up past ``busy_timeout_ms`` raises
    ``StoreBusy`` naming the wait, as before."""
    path, _ = _rollback_mode_copy(tmp_path)
    with SQLiteEventStore(path, read_only=True, busy_timeout_ms=50) as store:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("BEGIN EXCLUSIVE")
            with pytest.raises(StoreBusy, match="more than 50 ms"):
                list(store.read_all())
        finally:
            conn.close()
        assert [r.seq for r in store.read_all()] == [1, 2, 3, 4, 5, 6, 7]
