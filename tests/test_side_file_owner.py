"""Root writing another user's ledger leaves its lock and lease files to that user.

Session 32 removed a hand-over that followed a link by path. Session 33: the files
beside a ledger are opened relative to its folder's descriptor, never through a link
(a link is refused), and what root makes there is ``fchown``-ed (the open descriptor)
to the ledger's owner where that user owns the folder too. Only what that very call
made (``O_CREAT|O_EXCL``, a ``mkdir``) is handed over: the folder's owner chooses what
lies under the side files' names (a rename of any of root's files in their folders).
"""

from __future__ import annotations

import os
import shutil
import stat
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


def _give_to_nobody(path: Path) -> None:
    os.chown(path, NOBODY, NOBODY)


def test_roots_files_renamed_to_the_side_files_are_not_handed_over(theirs: Path) -> None:
    """The review's attack: the owner renames root's private file and folder, which root
    keeps in their folder, to ``l.db.lock`` and ``l.db.leases`` (they need only write
    access to the folder); root's next write used to hand both over."""
    secret, private = theirs / "roots-secret", theirs / "roots-dir"
    secret.write_text("root's")
    secret.chmod(0o600)
    private.mkdir(mode=0o700)
    (private / "inner").write_text("root's too")

    def owners_renames() -> bool:
        os.rename(secret, theirs / "l.db.lock")
        os.rename(private, theirs / "l.db.leases")
        return True

    assert unprivileged(owners_renames) is True
    _roots_write(theirs / "l.db")
    for name in ("l.db.lock", "l.db.leases", "l.db.leases/inner"):
        assert (theirs / name).stat().st_uid == 0, name
    made = [p for p in (theirs / "l.db.leases").iterdir() if p.name != "inner"]
    assert [p.stat().st_uid for p in made] == [0]  # (a lease file made in root's folder)
    assert (theirs / "l.db.lock").read_text() == "root's"


def test_a_lease_file_found_in_the_owners_lease_folder_keeps_its_owner(theirs: Path) -> None:
    """A file of root's (or of a third user's) found under a lease file's name, in the
    owner's own ``.leases``, is not theirs to be given."""
    from ctxledger.eventstore.leases import lease_file

    leases = theirs / "l.db.leases"
    leases.mkdir(mode=0o700)
    _give_to_nobody(leases)
    found = Path(lease_file(str(theirs / "l.db"), "compaction:x"))
    found.write_text("root's")
    found.chmod(0o600)
    third = theirs / "l.db.lock"
    third.write_bytes(b"")
    third.chmod(0o600)
    os.chown(third, NOBODY - 1, NOBODY - 1)
    _roots_write(theirs / "l.db")
    assert found.stat().st_uid == 0 and found.read_text() == "root's"
    assert third.stat().st_uid == NOBODY - 1


@pytest.mark.parametrize(
    ("mode", "uid", "inner"),
    [(0o700, 0, True), (0o777, 0, False), (0o700, NOBODY - 1, False)],
    ids=["roots-holding-a-file", "roots-open-to-all", "a-third-users"],
)
def test_a_lease_folder_swapped_after_roots_mkdir_is_not_handed_over(
    theirs: Path, monkeypatch: pytest.MonkeyPatch, mode: int, uid: int, inner: bool
) -> None:
    """Between root's ``mkdir`` of ``l.db.leases`` and its open, the owner puts another
    folder under the name: one holding something, one others may write, or another
    user's; none is handed over (only an empty private folder of root's could be the one
    made, and the owner could remove such a folder and make their own anyway)."""
    from ctxledger.eventstore import files

    other = theirs / "other-dir"
    other.mkdir()
    other.chmod(mode)
    if inner:
        (other / "inner").write_text("root's")
    os.chown(other, uid, uid)
    real_mkdir = os.mkdir

    def mkdir_then_swap(name: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real_mkdir(name, mode, dir_fd=dir_fd)
        if name.endswith(".leases"):
            os.rmdir(theirs / name)
            os.rename(other, theirs / name)

    monkeypatch.setattr(files.os, "mkdir", mkdir_then_swap)
    _roots_write(theirs / "l.db")
    assert (theirs / "l.db.leases").stat().st_uid == uid


def test_an_empty_private_lease_folder_of_roots_found_in_place_keeps_its_owner(
    theirs: Path,
) -> None:
    """Only a folder that root's own ``mkdir`` made is handed over: one found under the
    name (left by an older version, or put there) stays root's, empty and private too."""
    found = theirs / "l.db.leases"
    found.mkdir(mode=0o700)
    _roots_write(theirs / "l.db")
    assert found.stat().st_uid == 0
    assert (theirs / "l.db.lock").stat().st_uid == NOBODY


def test_a_file_system_where_root_cannot_chown_leaves_roots_write_working(
    theirs: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """vfat mounted with ``uid=``, some FUSE or NFS mounts: ``fchown`` fails with EPERM.
    Root's write and lease go on (the hand-over is a warning), and each descriptor opened
    beside the ledger is closed once (a second close could close another thread's)."""
    import errno

    from ctxledger.eventstore import files

    def no_chown(fd: int, uid: int, gid: int) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(files.os, "fchown", no_chown)
    _roots_write(theirs / "l.db")
    assert {p.name: p.stat().st_uid for p in theirs.iterdir()}["l.db.leases"] == 0
    real_close, closed = os.close, []
    monkeypatch.setattr(files.os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    with files.side_folder(str(theirs / "m.db")) as (folder, _, _):
        fd = files.open_side_folder(folder, "m.db.leases", (NOBODY, NOBODY))
        assert closed == [] and stat.S_ISDIR(os.fstat(fd).st_mode)
        real_close(fd)
    assert "could not be handed to uid" in caplog.text


def test_in_a_folder_of_roots_nothing_is_handed_over(theirs: Path) -> None:
    os.chown(theirs, 0, 0)
    _roots_write(theirs / "l.db")
    assert (theirs / "l.db.lock").stat().st_uid == 0


def test_roots_own_ledger_of_another_group_keeps_its_side_files_roots(theirs: Path) -> None:
    os.chown(theirs, 0, 0)
    os.chown(theirs / "l.db", 0, NOBODY)
    _roots_write(theirs / "l.db")
    for name in ("l.db.lock", "l.db.leases"):
        st = (theirs / name).stat()
        assert (st.st_uid, st.st_gid) == (0, 0), name


def test_a_lease_file_root_left_is_named_when_the_owner_leases_per_process(
    theirs: Path,
) -> None:
    """A lease file an older version left root's in the owner's ``.leases`` (never handed
    over now) stops the owner's file leases: the warning names it and what to do."""
    import logging

    from ctxledger.eventstore.leases import FileLeases, lease_file

    leases = theirs / "l.db.leases"
    leases.mkdir(mode=0o700)
    _give_to_nobody(leases)
    left = Path(lease_file(str(theirs / "l.db"), "compaction:B"))
    left.write_bytes(b"")
    left.chmod(0o600)

    def owners_lease() -> list[str]:
        said: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("ctxledger.eventstore.leases").addHandler(handler)
        release = FileLeases(str(theirs / "l.db"), lambda key: lambda: None).try_lease(
            "compaction:B"
        )
        assert release is not None
        return said

    said = unprivileged(owners_lease)
    assert isinstance(said, list) and len(said) == 1, said
    assert f"{left} belongs to root; remove it" in said[0], said


def test_the_owner_locked_out_by_roots_lease_folder_is_told_which_and_what_to_do(
    theirs: Path,
) -> None:
    """A ledger of the user's in a shared folder of root's (mode 1777): root's lease
    folder stays root's (nothing is handed over in a folder of root's); the owner's next
    write names it (it said "a read-only file, folder or medium")."""
    os.chown(theirs, 0, 0)
    theirs.chmod(0o1777)

    def owners_write() -> str:
        try:
            with Ledger.open(str(theirs / "l.db")) as ledger:
                ledger.start_session(model="m", context_length=8_000)
        except StoreError as exc:
            return str(exc)
        return "written"

    assert unprivileged(owners_write) == "written"
    _roots_write(theirs / "l.db")
    said = unprivileged(owners_write)
    assert isinstance(said, str)
    assert f"{theirs / 'l.db.leases'} beside it belongs to root" in said, said
    assert "remove it as its owner or root (it holds only locks, no data)" in said, said


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
