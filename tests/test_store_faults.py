"""Faults of the medium under an event store, each on a real filesystem or server
(session 45), with ``verify`` after each:

* SQLite, a filesystem that runs out of space during appends (a tiny tmpfs: a real
  ``ENOSPC``, where ``test_faults`` uses ``ulimit -f`` and the contract suite SQLite's
  ``max_page_count``): ``StorageFullError``, earlier events intact, nothing of the cut
  append stored; once there is room the next append succeeds.
* SQLite, the ledger's filesystem mounted read-only before it is opened again: a
  writable open is refused and writes nothing; a read-only open reads and verifies it.
* PostgreSQL, a server restart between two appends of a pooled store: every pooled
  connection is dead; the next append (one event, a few, a ``COPY``-sized batch)
  reconnects and succeeds once, nothing duplicated.

The tmpfs runs in a private mount namespace (``unshare``: as root, or as a user where
user namespaces are allowed), so nothing is mounted outside the test's subprocess.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.frameworks import REQUIRE, required
from helpers.pg_server import PgServer
from test_postgres_cancelled import paths_taken

from ctxledger.eventstore.base import AppendRequest
from ctxledger.eventstore.postgres import PostgresEventStore
from ctxledger.testing.eventstore import message

ROOT = Path(__file__).resolve().parents[1]

#: run in the namespace: fills a 512 KiB tmpfs, then remounts it read-only
_SCRIPT = textwrap.dedent(
    """
    import os, subprocess, sys
    from ctxledger.errors import CtxLedgerError, StorageFullError
    from ctxledger.eventstore import SQLiteEventStore
    from ctxledger.testing.eventstore import message

    where = sys.argv[1]
    db = os.path.join(where, "ledger.db")
    filler = os.path.join(where, "filler")
    with open(filler, "wb") as f:  # (freed later: the room the next append finds)
        f.write(b"\\0" * 128 * 1024)
    written = 0
    with SQLiteEventStore(db) as store:
        try:
            for i in range(1000):
                store.append("ses_a", [message("ses_a", f"{i} " + "x" * 3000)], written)
                written += 1
        except StorageFullError as exc:
            print("full", written, " ".join(str(exc).split()))
        report = store.verify()
        print("after", store.stream_version("ses_a"), store.last_seq(), report.ok)
        ids = [r.event.event_id for r in store.read_all()]
        print("ids", len(ids), len(set(ids)))
        os.remove(filler)
        store.append("ses_a", [message("ses_a", "room again")], written)
        print("more", store.stream_version("ses_a"), store.verify().ok)
    subprocess.run(["mount", "-o", "remount,ro", where], check=True)
    try:
        SQLiteEventStore(db).close()
        print("opened", "writable")
    except CtxLedgerError as exc:
        print("refused", type(exc).__name__, " ".join(str(exc).split()))
    with SQLiteEventStore(db, read_only=True) as store:
        print("read", store.stream_version("ses_a"), store.last_seq(), store.verify().ok)
    """
)


def _in_namespace(probe_at: Path) -> list[str] | None:
    """The ``unshare`` command that gives a private mount namespace here, or None: tried
    by mounting a small tmpfs on `probe_at` (a fresh directory of the test's own), with
    the namespace's mounts made private explicitly, so nothing reaches the host's."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return None
    probe_at.mkdir()
    for flags in ("-m", "-rm"):
        cmd = ["unshare", flags, "--propagation", "private"]
        mount = 'mount -t tmpfs -o size=64k tmpfs "$1" 2>/dev/null || exit 9'
        probe = [*cmd, "sh", "-c", mount, "sh", str(probe_at)]
        if subprocess.run(probe, capture_output=True, timeout=60).returncode == 0:
            return cmd
    return None


def test_sqlite_out_of_space_then_read_only_keeps_the_ledger_whole(tmp_path: Path) -> None:
    """Skips only where no private mount namespace can be made, and never in CI or under
    ``make test`` (``CI`` / ``CTXLEDGER_REQUIRE_INTEGRATIONS`` set): there it runs as
    root and must run for real, so a refused ``unshare`` fails it."""
    unshare = _in_namespace(tmp_path / "probe")
    if unshare is None:
        why = "no private mount namespace here (unshare -m / -rm refused)"
        if os.environ.get("CI") or required():
            pytest.fail(f"{why}; CI and {REQUIRE} need this test to run", pytrace=False)
        pytest.skip(why)
    where = tmp_path / "mnt"
    where.mkdir()
    shell = f'mount -t tmpfs -o size=512k tmpfs "$1" && exec "{sys.executable}" -c "$2" "$1"'
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [*unshare, "sh", "-c", shell, "sh", str(where), _SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()}
    full = said["full"]
    written = int(full[0])
    assert written > 0
    assert "disk is full" in " ".join(
        full
    ) and "nothing from this operation was written" in " ".join(full)
    assert said["after"] == [str(written), str(written), "True"]  # nothing of the cut one
    assert said["ids"] == [str(written), str(written)]
    assert said["more"] == [str(written + 1), "True"]
    refused = " ".join(said["refused"])
    assert refused.startswith("StoreError") and "cannot be written" in refused, refused
    assert "read-only" in refused and "nothing was written" in refused
    assert said["read"] == [str(written + 1), str(written + 1), "True"]  # nothing written


def test_a_pooled_store_appends_after_the_server_restarts(
    own_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every connection of the pool is warm before the restart (three held at once: the
    pool grows to its size), so each is dead after it; the appends that follow reconnect
    (the store drops the dead ones and retries once) and land once each, on the paths
    they are sized for (the one-event ``CALL``, ``ctxledger_insert``, ``COPY``)."""
    with PostgresEventStore(own_server.url, pool_size=3) as store:
        store.append("ses_a", [message("ses_a", "before")], 0)
        batch = [message("ses_a", f"batch {i}") for i in range(3)]
        store.append("ses_a", batch, 1)
        with contextlib.ExitStack() as held:
            warm = [held.enter_context(store._pool.connection()) for _ in range(3)]
            assert len({id(conn) for conn in warm}) == 3
        assert store._pool.get_stats()["pool_size"] == 3
        own_server.stop()
        own_server.start()
        taken = paths_taken(monkeypatch)
        assert store.append("ses_a", [message("ses_a", "after")], 4) == 5  # one event
        assert store.append("ses_a", [message("ses_a", f"few {i}") for i in range(4)], 5) == 9
        assert "copy_append" not in taken
        copied = [message("ses_b", f"many {i}") for i in range(40)]  # COPY-sized
        assert store.append_many([AppendRequest("ses_b", copied, 0)]) == {"ses_b": 40}
        assert taken["copy_append"] >= 1 and taken["call_many"] >= 1
        assert "transaction" not in taken  # (each on its own path, no fallback)
        assert store.append("ses_a", batch, 1) == 9  # a re-send from before: a no-op
        records = list(store.read_all())
        ids = [r.event.event_id for r in records]
        assert len(ids) == len(set(ids)) == 49 == store.last_seq()
        assert [r.seq for r in records] == list(range(1, 50))
        report = store.verify()
        assert report.ok and report.events_checked == 49
