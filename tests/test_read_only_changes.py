"""A lock-free (``immutable``) read-only read checks, after every read it makes, that
the file did not change meanwhile: a change is "run the command again", once.

The reads after the main ledger's own: ``diff --b-db``'s second ledger, ``migrate
--from``'s source, ``verify``'s anchor and ``--expect-head`` reads after its walk.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest
from test_read_only_ledger import nothing_writable, one_session, run

from ctxledger.errors import StoreError
from ctxledger.eventstore import SQLiteEventStore, readonly

CHANGED = "changed while it was read read-only; run the command again"


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "home"))
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(tmp_path / "anchor.key"))
    monkeypatch.delenv("CTXLEDGER_DB", raising=False)
    monkeypatch.delenv("CTXLEDGER_CONFIG", raising=False)


def changes(monkeypatch: pytest.MonkeyPatch, path: Path, after: int = 0) -> None:
    """`path` reads as changed from its (after+1)-th check on after the open (whose own
    look, connect_read_only's, is not counted: a change there is looked at again)."""
    seen: list[int] = []

    def changed(self: readonly.Unchanged) -> bool:
        if self.path != str(path):
            return False
        seen.append(1)
        return len(seen) > after + 1

    monkeypatch.setattr(readonly.Unchanged, "changed", changed)


def test_diff_says_when_its_second_ledger_changed_during_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    sid_a, sid_b = one_session(a), one_session(b, "other")
    nothing_writable(monkeypatch)
    changes(monkeypatch, b)
    code, out = run(a, "diff", sid_a, sid_b, "--b-db", str(b))
    assert code == 1, out
    assert out.splitlines()[-1] == f"error: the ledger {b} {CHANGED}"


def test_migrate_says_when_its_source_changed_during_the_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "archive").mkdir()
    source, dest = tmp_path / "archive" / "s.db", tmp_path / "d.db"
    one_session(source)
    archive, writable = str(tmp_path / "archive"), readonly._writable
    monkeypatch.setattr(  # (the archive only: the copy is written)
        readonly,
        "_writable",
        lambda path, mode=os.W_OK: not path.startswith(archive) and writable(path, mode),
    )
    changes(monkeypatch, source, after=1)  # (its verify before the copy: unchanged)
    code, out = run(dest, "migrate", "--from", str(source), "--to", str(dest))
    assert code == 1, out
    # the copy was written, and a second run needs an empty --to: the error says so
    assert out.splitlines()[-1] == (
        f"error: the ledger {source} {CHANGED}, after emptying --to {dest} (it holds the copy)"
    )


def test_verify_says_run_again_when_the_file_changed_after_its_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The anchor and --expect-head are read after the walk's check: a change then was
    "FAILED … contradicts the anchor", which is no damage."""
    db = tmp_path / "l.db"
    one_session(db)
    head = run(db, "verify")[1].splitlines()[1].split()[-1]
    nothing_writable(monkeypatch)
    changes(monkeypatch, db, after=1)
    code, out = run(db, "verify", "--expect-head", head)
    assert code == 1, out
    assert out.splitlines() == [f"error: the ledger {db} {CHANGED}"]


def test_verify_reads_read_only_when_its_writable_open_finds_the_disk_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "l.db"
    one_session(db)

    def full(path: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr("ctxledger.eventstore.files.create_private_file", full)
    code, out = run(db, "verify")
    assert code == 0 and out.startswith("ok: "), out


def test_a_command_that_failed_keeps_its_one_error_line_and_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`show` of an unknown session (exit 2) on a file that also changed: one line."""
    db = tmp_path / "l.db"
    one_session(db)
    nothing_writable(monkeypatch)
    changes(monkeypatch, db)
    code, out = run(db, "show", "nope")
    assert code == 2, out
    assert out.count("error: ") == 1 and CHANGED not in out, out


def test_a_rewrite_that_kept_size_and_mtime_is_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that restored the modification time: the status change time moved."""
    db = tmp_path / "l.db"
    one_session(db)
    nothing_writable(monkeypatch)
    store = SQLiteEventStore(str(db), read_only=True)
    try:
        store.verify()
        st = os.stat(db)
        while os.stat(db).st_ctime_ns == st.st_ctime_ns:  # (a coarse clock: a tick)
            time.sleep(0.005)
            db.write_bytes(db.read_bytes())
            os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert (os.stat(db).st_size, os.stat(db).st_mtime_ns) == (st.st_size, st.st_mtime_ns)
        with pytest.raises(StoreError, match=CHANGED):
            store.verify()
    finally:
        store.close()


def test_strict_verify_fails_when_the_anchor_could_not_be_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner's archived (read-only) ledger whose anchor key was deleted: ok with a
    warning, which --strict makes exit 1 for a script."""
    db = tmp_path / "l.db"
    one_session(db)
    (tmp_path / "anchor.key").unlink()
    nothing_writable(monkeypatch)
    code, out = run(db, "verify")
    assert code == 0 and out.splitlines()[-1].startswith("warning: anchor not checked"), out
    code, out = run(db, "verify", "--json")
    assert code == 0 and json.loads(out)["warning"].startswith("anchor not checked"), out
    code, out = run(db, "verify", "--strict")
    assert code == 1 and out.startswith("ok: "), out
    assert json.loads(run(db, "verify", "--strict", "--json")[1])["ok"] is True


def test_a_change_is_its_own_store_error(tmp_path: Path) -> None:
    """A library caller tells "read again" from damage by its class (a StoreError still)."""
    from ctxledger import LedgerChanged

    db = tmp_path / "l.db"
    one_session(db)
    seen = readonly.Unchanged(str(db), str(db))
    assert not seen.changed()
    os.utime(db, ns=(0, 0))
    with pytest.raises(LedgerChanged, match=CHANGED) as caught:
        seen.check()
    assert isinstance(caught.value, StoreError)


def test_an_empty_log_there_at_the_open_that_a_writer_fills_is_a_change(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    one_session(db)
    wal = tmp_path / "l.db-wal"
    wal.write_bytes(b"")
    seen = readonly.Unchanged(str(db), str(db))
    assert not seen.changed()
    wal.write_bytes(b"\x00" * 4096)  # (the main file untouched)
    assert seen.changed()


def test_migrate_names_no_copy_to_empty_when_the_change_was_caught_before_copying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, dest = tmp_path / "s.db", tmp_path / "d.db"
    one_session(source)
    nothing_writable(monkeypatch)
    changes(monkeypatch, source)  # (its verify before the copy sees it)
    code, out = run(dest, "migrate", "--from", str(source), "--to", str(dest))
    assert code == 1, out
    assert out.splitlines()[-1] == f"error: the ledger {source} {CHANGED}"


def test_an_error_of_a_torn_read_outside_sqlite_is_the_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hash that did not compare (IntegrityError), not from sqlite3: the file changed
    under the read, so it is "run it again", in the main ledger and in --b-db's."""
    from ctxledger.errors import IntegrityError
    from ctxledger.ledger.facade import Ledger

    a, b = tmp_path / "a.db", tmp_path / "b.db"
    sid_a, sid_b = one_session(a), one_session(b, "other")
    nothing_writable(monkeypatch)

    def torn(*args: object, **kwargs: object) -> None:
        raise IntegrityError("the event at seq 2 does not hash to its recorded hash")

    monkeypatch.setattr(Ledger, "sessions", torn)
    changes(monkeypatch, a)
    code, out = run(a, "sessions")
    assert (code, out.splitlines()[-1]) == (1, f"error: the ledger {a} {CHANGED}"), out
    monkeypatch.setattr("ctxledger.cli.analysis.diff", torn)
    changes(monkeypatch, b)
    code, out = run(a, "diff", sid_a, sid_b, "--b-db", str(b))
    assert (code, out.splitlines()[-1]) == (1, f"error: the ledger {b} {CHANGED}"), out
