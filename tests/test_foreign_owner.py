"""A ledger owned by another user: root (or anyone) reading it leaves it usable by its
owner, and an anchor sealed under the owner's key is not "tampering" to the reader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_read_only_ledger import one_session, run

from ctxledger.eventstore import SQLiteEventStore, opens_read_only
from ctxledger.ledger.facade import Ledger

OWNER = 1000


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "home"))
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(tmp_path / "anchor.key"))
    monkeypatch.delenv("CTXLEDGER_DB", raising=False)
    monkeypatch.delenv("CTXLEDGER_CONFIG", raising=False)


def give_to_owner(folder: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only root can give a ledger to another user")
    for path in (folder, *folder.iterdir()):
        os.chown(path, OWNER, OWNER)


def owners(folder: Path) -> dict[str, int]:
    return {p.name: p.lstat().st_uid for p in folder.rglob("*")}


def test_roots_read_of_another_users_ledger_leaves_no_file_of_root_beside_it(
    tmp_path: Path,
) -> None:
    """A read opened writable made a root-owned 0600 ``.lock``: the owner's next open
    failed "cannot be written by this user"."""
    folder = tmp_path / "theirs"
    folder.mkdir()
    db = folder / "l.db"
    sid = one_session(db)
    for name in ("l.db.lock", "l.db.head"):
        (folder / name).unlink(missing_ok=True)
    give_to_owner(folder)
    assert opens_read_only(str(db))
    for args in (["sessions"], ["show", sid], ["verify"], ["export", sid]):
        code, out = run(db, *args)
        assert code == 0, (args, out)
    assert set(owners(folder).values()) == {OWNER}, owners(folder)


def test_roots_lease_through_a_linked_folder_gives_no_file_to_anyone(tmp_path: Path) -> None:
    """Review of session 32: root's side files were handed to the ledger's owner, so a
    user who linked ``<ledger>.leases`` to a folder of root's got a file of their own
    there (one a run-parts folder would run). Session 33: a link in place of a file
    beside the ledger is refused (StoreError naming it); nothing is made through it."""
    from ctxledger.errors import StoreError

    folder, roots = tmp_path / "theirs", tmp_path / "roots"
    folder.mkdir()
    roots.mkdir()
    db = folder / "l.db"
    SQLiteEventStore(str(db)).close()
    give_to_owner(folder)
    (folder / "l.db.leases").symlink_to(roots)
    os.lchown(folder / "l.db.leases", OWNER, OWNER)
    with Ledger.open(str(db)) as ledger, pytest.raises(StoreError, match="symbolic link"):
        ledger.store.try_lease("compaction:x")
    assert list(roots.iterdir()) == []
    assert roots.stat().st_uid == 0


def test_roots_write_to_another_users_ledger_leaves_their_anchor_theirs(tmp_path: Path) -> None:
    """Root's write sealed the head under root's key in a root-only file: the owner's
    verify then said FAILED (the anchor cannot be read). Another user's anchor is theirs
    to seal: root's write leaves it as it was, and the owner's anchor still verifies."""
    folder = tmp_path / "theirs"
    folder.mkdir()
    db = folder / "l.db"
    one_session(db)
    head = folder / "l.db.head"
    before = head.read_bytes() if head.exists() else None
    give_to_owner(folder)
    with Ledger.open(str(db)) as ledger:  # (root, writing)
        ledger.start_session(model="m", context_length=8_000)
    assert (head.read_bytes() if head.exists() else None) == before
    if head.exists():
        assert head.stat().st_uid == OWNER
    with Ledger.open(str(db)) as ledger:
        assert ledger.verify().ok


def test_verify_of_another_users_intact_ledger_under_a_key_of_ones_own_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their anchor is sealed under their key: not "FAILED … edited" to a reader who
    has a key of their own; --strict makes the warning exit 1."""
    folder = tmp_path / "theirs"
    folder.mkdir()
    db = folder / "l.db"
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(tmp_path / "their.key"))
    one_session(db)
    assert (folder / "l.db.head").exists()
    give_to_owner(folder)
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(tmp_path / "my.key"))
    (tmp_path / "my.key").write_bytes(b"k" * 32)
    code, out = run(db, "verify")
    assert code == 0, out
    assert out.splitlines()[0].startswith("ok: ")
    assert out.splitlines()[-1] == (
        "warning: anchor sealed under a key this user does not hold: not checked (the hash "
        "chain was checked)"
    )
    assert run(db, "verify", "--strict")[0] == 1


def test_verify_of_ones_own_ledger_sealed_under_another_key_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "l.db"
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(tmp_path / "old.key"))
    one_session(db)
    monkeypatch.setenv("CTXLEDGER_ANCHOR_KEY_FILE", str(tmp_path / "my.key"))
    (tmp_path / "my.key").write_bytes(b"k" * 32)
    code, out = run(db, "verify")
    assert code == 1 and "does not carry a valid seal" in out, out


def test_another_users_unmerged_log_is_refused_with_what_the_reader_can_do(
    tmp_path: Path,
) -> None:
    """Not `ctxledger upgrade` (the reader cannot write it), nor a copy while it runs."""
    from ctxledger.errors import StoreError

    folder = tmp_path / "theirs"
    folder.mkdir()
    db = folder / "l.db"
    one_session(db)
    (folder / "l.db-wal").write_bytes(b"\x00" * 64)  # frames the main file lacks
    (folder / "l.db-shm").unlink(missing_ok=True)
    give_to_owner(folder)
    with pytest.raises(StoreError) as caught:
        SQLiteEventStore(str(db), read_only=True)
    assert str(caught.value).endswith(
        f"ask the owner to make {db}-shm readable, or to stop its writers; or copy the "
        "ledger with its -wal while no writer runs"
    ), caught.value
