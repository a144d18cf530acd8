"""The event store's leases: one holder per key across processes, on every backend.

* The lease contract on a SQLite file, an in-memory log and a real PostgreSQL server:
  one holder per key, keys independent, release frees, a timed wait gives up, a waiter
  cancelled while waiting holds nothing, two stores on one ledger exclude each other.
* A holder process killed with SIGKILL releases its lease (the flock goes with its file
  descriptors; PostgreSQL drops the session lock with the connection).
* Two processes compacting one chain of a ``postgresql://`` ledger make one
  continuation and one summarizer call (the compaction lease is the store's).
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from helpers.pg_server import PgServer
from test_faults import start_session, workers

from ctxledger import Ledger
from ctxledger.events import SessionSwitched
from ctxledger.eventstore import EventStore, SQLiteEventStore, open_store


def schema_for(path: Path) -> str:
    return "l_" + hashlib.sha256(str(path).encode()).hexdigest()[:20]


def _target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "leases.db")
    if request.param == "memory":
        return ":memory:"
    pg: PgServer = request.getfixturevalue("pg_server")
    return f"{pg.url}?schema={schema_for(tmp_path)}"


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Every backend's target."""
    return _target(request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A ledger other processes can open too (the same target opened twice is one ledger)."""
    return _target(request, tmp_path)


def test_one_holder_per_key_and_release_frees_it(backend: str) -> None:
    with open_store(backend) as store:
        release = store.try_lease("a")
        assert release is not None
        assert store.try_lease("a") is None  # held, even for the same process
        other = store.try_lease("b")  # another key is independent
        assert other is not None
        other()
        with store.lease("a", wait=0.05) as held:
            assert not held  # the timed wait gave up
        release()
        release()  # idempotent
        with store.lease("a", wait=0) as held:
            assert held
            assert store.try_lease("a") is None
        again = store.try_lease("a")
        assert again is not None
        again()


def test_two_stores_on_one_ledger_exclude_each_other(shared: str) -> None:
    with open_store(shared) as a, open_store(shared) as b:
        with a.lease("chain", wait=0) as held:
            assert held and b.try_lease("chain") is None
        release = b.try_lease("chain")
        assert release is not None
        release()


def test_a_process_may_hold_many_leases_at_once(shared: str) -> None:
    """A server proxying many sessions holds a lease per turn: no pool size caps them
    (PostgreSQL leases share one connection), and another store still sees each held."""
    with open_store(shared) as a, open_store(shared) as b:
        releases = [a.try_lease(f"proxy:family-{i}") for i in range(40)]
        assert all(r is not None for r in releases)
        assert all(b.try_lease(f"proxy:family-{i}") is None for i in range(40))
        for r in releases:
            assert r is not None
            r()
        taken = [b.try_lease(f"proxy:family-{i}") for i in range(40)]
        assert all(r is not None for r in taken)
        for r in taken:
            assert r is not None
            r()


def test_a_waiter_cancelled_while_waiting_holds_nothing(backend: str) -> None:
    async def main(store: EventStore) -> None:
        async with store.alease("k", wait=0) as held:
            assert held
            with anyio.move_on_after(0.2) as scope:
                async with store.alease("k"):  # waits until cancelled
                    raise AssertionError("the lease is held by the outer block")
            assert scope.cancelled_caught
        async with store.alease("k", wait=1) as held:
            assert held  # the cancelled waiter left nothing behind

    with open_store(backend) as store:
        anyio.run(main, store)


HOLDER = """
import sys
from ctxledger.eventstore import open_store
store = open_store(sys.argv[1])
release = store.try_lease("chain")
print("held" if release else "busy", flush=True)
sys.stdin.readline()
"""


def test_a_killed_holder_releases_its_lease(shared: str) -> None:
    target = shared
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, target],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with open_store(target) as store:
            assert store.try_lease("chain") is None
            holder.send_signal(signal.SIGKILL)
            holder.wait(30)
            # the server notices the closed connection on its own; wait for it, bounded
            with store.lease("chain", wait=30) as held:
                assert held
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_lease_file_that_cannot_be_made_falls_back_to_a_process_lock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "x.db"
    blocker = tmp_path / "x.db.leases"
    blocker.write_text("not a directory")  # (chmod would not stop root)
    with SQLiteEventStore(db) as store:
        with caplog.at_level("WARNING", logger="ctxledger.eventstore.leases"):
            release = store.try_lease("k")
        assert release is not None and store.try_lease("k") is None
        assert "per process from now on" in caplog.text
        # the lease directory becomes possible while the key is held: the store stays on
        # its process locks, so the holder is still the only one
        blocker.unlink()
        assert store.try_lease("k") is None
        release()
        again = store.try_lease("k")
        assert again is not None and store.try_lease("k") is None
        again()
    assert not blocker.exists()  # no lease file was made after the fallback


def test_two_processes_compacting_one_postgres_chain_make_one_continuation_with_one_call(
    pg_server: PgServer, tmp_path: Path
) -> None:
    url, calls = f"{pg_server.url}?schema={schema_for(tmp_path)}", tmp_path / "calls"
    sid = start_session(url, turns=12)  # type: ignore[arg-type]
    outputs = workers("compact", url, sid, 2, 1, calls)  # type: ignore[arg-type]
    results = sorted(out.split() for out in outputs)
    with Ledger.open(url) as ledger:
        switches = [
            r.event for r in ledger.store.read_stream(sid) if isinstance(r.event, SessionSwitched)
        ]
        (switch,) = switches
        assert ledger.tip(sid) == switch.new_session_id
        assert ledger.verify().ok
    assert results == [["compressed", switch.new_session_id], ["continued", switch.new_session_id]]
    assert calls.read_text().count("call") == 1  # the second waited instead of summarizing


def test_a_passing_failure_to_make_a_lease_file_is_not_held_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import ctxledger.eventstore.leases as leases_module

    real = leases_module.try_file_lease

    def out_of_descriptors(path: str, key: str) -> object:
        raise OSError(errno.EMFILE, "Too many open files")

    with SQLiteEventStore(tmp_path / "x.db") as store:
        monkeypatch.setattr(leases_module, "try_file_lease", out_of_descriptors)
        assert store.try_lease("k") is None  # not held this time: a waiter tries again
        monkeypatch.setattr(leases_module, "try_file_lease", real)
        release = store.try_lease("k")
        assert release is not None
        assert (tmp_path / "x.db.leases").is_dir()  # still file leases, shared with processes
        release()
