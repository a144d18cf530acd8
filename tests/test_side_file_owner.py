"""Root writing another user's ledger leaves its lock and lease files to that user.

Session 32 removed a hand-over that followed a link by path. Session 33: the files
beside a ledger are opened relative to its folder's descriptor, never through a link
(a link is refused), and what root makes there is ``fchown``-ed (the open descriptor)
to the ledger's owner where that user owns the folder too; a file with another name
(a hard link) is never handed over.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_read_only_ledger import NOBODY, unprivileged

from ctxledger.errors import StoreError
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.ledger.facade import Ledger


@pytest.fixture
def theirs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder of uid 65534 (an unprivileged child can walk to it) holding its ledger."""
    if os.geteuid() != 0:
        pytest.skip("needs root: only root can write another user's ledger")
    base = Path(tempfile.mkdtemp(prefix="ctxledger-side-"))
    base.chmod(0o755)
    for name in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(base / "home"))
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(base / "key" / "anchor.key"))
    folder = base / "theirs"
    folder.mkdir()
    SQLiteEventStore(str(folder / "l.db")).close()
    (folder / "l.db.lock").unlink()  # (root's write below makes it)
    for path in (folder, *folder.iterdir()):
        try:
            os.chown(path, NOBODY, NOBODY)
        except OSError as exc:  # (uid 65534 is not mapped in this user namespace)
            pytest.skip(f"root here cannot give files to uid {NOBODY}: {exc!r}")
    try:
        yield folder
    finally:
        shutil.rmtree(base)


def _roots_write(db: Path) -> None:
    with Ledger.open(str(db)) as ledger:
        ledger.start_session(model="m", context_length=8_000)
        release = ledger.store.try_lease("compaction:x")
        assert release is not None
        release()


def test_roots_write_leaves_the_owner_able_to_write(theirs: Path) -> None:
    db = theirs / "l.db"
    _roots_write(db)
    owners = {p.name: p.lstat().st_uid for p in theirs.rglob("*")}
    assert "l.db.lock" in owners and "l.db.leases" in owners, owners
    assert set(owners.values()) == {NOBODY}, owners

    def owners_write() -> int:
        with Ledger.open(str(db)) as ledger:
            ledger.start_session(model="m", context_length=8_000)
            release = ledger.store.try_lease("compaction:x")
            assert release is not None
            release()
            return len(ledger.transcript.state.sessions)

    assert unprivileged(owners_write) == 2


def test_a_hard_link_beside_the_ledger_is_not_handed_over(theirs: Path) -> None:
    secret = theirs.parent / "roots-file"
    secret.write_text("root's")
    os.link(secret, theirs / "l.db.lock")
    _roots_write(theirs / "l.db")
    assert secret.stat().st_uid == 0 and secret.read_text() == "root's"


def test_in_a_folder_of_roots_nothing_is_handed_over(theirs: Path) -> None:
    os.chown(theirs, 0, 0)
    _roots_write(theirs / "l.db")
    assert (theirs / "l.db.lock").stat().st_uid == 0


def test_a_linked_lock_file_is_refused(tmp_path: Path) -> None:
    """(As any user.) The lock was opened through the link (a dangling one is refused
    as unwritable before: ``O_CREAT`` would make its target)."""
    db = tmp_path / "l.db"
    SQLiteEventStore(str(db)).close()
    (tmp_path / "l.db.lock").unlink()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    (tmp_path / "l.db.lock").symlink_to(target)
    with pytest.raises(StoreError, match=r"l\.db\.lock beside the ledger is a symbolic link"):
        SQLiteEventStore(str(db))
    (tmp_path / "l.db.lock").unlink()
    (tmp_path / "l.db.lock").symlink_to(tmp_path / "made")
    with pytest.raises(StoreError):
        SQLiteEventStore(str(db))
    assert not (tmp_path / "made").exists()


def test_a_linked_lease_folder_is_refused_and_nothing_made_there(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with Ledger.open(str(db)) as ledger:
        (tmp_path / "l.db.leases").symlink_to(elsewhere)
        with pytest.raises(StoreError, match=r"l\.db\.leases beside the ledger is a symbolic"):
            ledger.store.try_lease("compaction:x")
    assert list(elsewhere.iterdir()) == []


def test_a_folder_its_owner_cannot_list_still_gets_the_lock_file(theirs: Path) -> None:
    """The lock was opened by path; a folder descriptor opened for reading would fail
    in a folder of mode 0311 (``O_PATH`` does not)."""
    from ctxledger.eventstore.files import open_side_lock

    theirs.chmod(0o311)

    def owners_lock() -> bool:
        fd = open_side_lock(str(theirs / "l.db"))
        if fd is not None:
            os.close(fd)
        return fd is not None

    assert unprivileged(owners_lock) is True


def test_a_read_command_reads_past_a_linked_lock_file_and_a_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from ctxledger.cli.main import cli

    for name in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "home"))
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(tmp_path / "anchor.key"))
    db = tmp_path / "l.db"
    with Ledger.open(str(db)) as ledger:
        sid = ledger.start_session(model="m", context_length=8_000)
    (tmp_path / "l.db.lock").unlink()
    (tmp_path / "target").write_bytes(b"")
    (tmp_path / "l.db.lock").symlink_to(tmp_path / "target")
    listed = CliRunner().invoke(cli, ["--db", str(db), "sessions", "--json"])
    assert listed.exit_code == 0 and sid in listed.output, listed.output
    source = tmp_path / "chat.json"
    source.write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    imported = CliRunner().invoke(cli, ["--db", str(db), "import", str(source)])
    assert imported.exit_code == 1, imported.output
    assert "l.db.lock beside the ledger is a symbolic link" in imported.output
