"""A cleanup removes only what it provably made (session 42; session 43's rule: no ledger
file is removed by an ordinary command). What is left to remove: a ``.lock`` a failed
command made beside a ledger (``eventstore/leftovers.py``), and a what-if's ``--out``,
which the what-if made itself with ``O_EXCL`` (``eventstore/files.create_new_file``)."""

from __future__ import annotations

import errno
import fcntl
import importlib
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.analysis.replayids import PresetIds, ReplayClock
from ctxledger.cli import app
from ctxledger.cli.main import cli
from ctxledger.compressor.config import CompressionConfig
from ctxledger.errors import InvalidInput, StoreError
from ctxledger.eventstore import files, leftovers
from ctxledger.eventstore.files import create_new_file
from ctxledger.eventstore.leftovers import lock_to_make, remove_made_lock, remove_new_file

whatif_module = importlib.import_module("ctxledger.analysis.whatif")
_MESSAGES = [{"role": "user", "content": "keep me"}]


def _record(ledger: Ledger) -> int:
    sid = ledger.start_session(model="m", context_length=9000)
    ledger.append_messages(sid, _MESSAGES)
    return ledger.store.last_seq()


def _ledger_without_lock(folder: Path) -> str:
    db = str(folder / "l.db")
    with Ledger.open(db) as ledger:
        _record(ledger)
    os.unlink(db + ".lock")
    return db


def test_no_lock_is_named_for_a_url_or_a_ledger_in_memory() -> None:
    assert lock_to_make(":memory:") is None
    assert lock_to_make("postgresql://localhost/x") is None


def test_no_lock_is_named_on_a_new_path_an_empty_file_or_beside_a_lock(tmp_path: Path) -> None:
    assert lock_to_make(str(tmp_path / "new.db")) is None
    (tmp_path / "empty.db").touch()
    assert lock_to_make(str(tmp_path / "empty.db")) is None
    db = _ledger_without_lock(tmp_path)
    assert lock_to_make(db) == db + ".lock"
    Path(db + ".lock").touch()
    assert lock_to_make(db) is None


def test_a_held_lock_is_kept_and_a_free_one_removed(tmp_path: Path) -> None:
    db = _ledger_without_lock(tmp_path)
    lock = lock_to_make(db)
    Ledger.open(db).close()  # (the open makes it)
    fd = os.open(db + ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # (a writer of the ledger, in another process)
        remove_made_lock(lock)
        assert os.path.exists(db + ".lock")
    finally:
        os.close(fd)
    remove_made_lock(lock)
    assert not os.path.exists(db + ".lock") and os.path.getsize(db) > 0


def test_a_lock_that_is_a_link_is_kept(tmp_path: Path) -> None:
    db = _ledger_without_lock(tmp_path)
    lock = lock_to_make(db)
    target = tmp_path / "elsewhere"
    target.write_text("not ours\n")
    os.symlink(target, db + ".lock")
    remove_made_lock(lock)
    assert os.path.islink(db + ".lock") and target.read_text() == "not ours\n"


def _made_by_another_process(lock: str) -> None:
    os.close(os.open(lock, os.O_RDWR | os.O_CREAT, 0o600))  # (as its open makes one)


def test_a_lock_another_process_made_before_the_open_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer (``serve``, an agent) opening the ledger between :func:`lock_to_make` and
    the failed command's open made the lock: the command's open found it, and keeps it."""
    db = _ledger_without_lock(tmp_path)

    def then_a_writer_opens(target: str) -> str | None:
        lock = lock_to_make(target)
        _made_by_another_process(db + ".lock")
        return lock

    monkeypatch.setattr(app, "lock_to_make", then_a_writer_opens)
    result = CliRunner().invoke(cli, ["--db", db, "show", "ses_nope"])
    assert result.exit_code != 0 and os.path.exists(db + ".lock")
    monkeypatch.undo()
    os.unlink(db + ".lock")
    result = CliRunner().invoke(cli, ["--db", db, "show", "ses_nope"])  # (the control)
    assert result.exit_code != 0 and not os.path.exists(db + ".lock")


def test_a_lock_made_again_by_another_process_is_kept(tmp_path: Path) -> None:
    db = _ledger_without_lock(tmp_path)
    lock = lock_to_make(db)
    Ledger.open(db).close()  # (this process's open made it)
    os.unlink(db + ".lock")
    _made_by_another_process(db + ".lock")  # (on the same inode, or not)
    remove_made_lock(lock)
    assert os.path.exists(db + ".lock")


def _scratch(out: Path) -> object:
    return whatif_module.scratch_ledger(
        out, config=CompressionConfig(), ids=PresetIds(), clock=ReplayClock()
    )


def test_a_whatif_out_that_appears_after_the_check_is_refused_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "o.db"
    with Ledger.open(out) as someone_elses:
        recorded = _record(someone_elses)
    monkeypatch.setattr(whatif_module, "path_exists", lambda *_a: False)  # (made just after it)
    with pytest.raises(InvalidInput, match="already exists"), _scratch(out):  # type: ignore[attr-defined]
        pass
    with Ledger.open(out) as again:
        assert again.store.last_seq() == recorded


def test_a_whatif_cut_short_after_writing_leaves_no_out_and_no_folder(tmp_path: Path) -> None:
    """OUT was made by the what-if (``O_EXCL``): removed whatever it holds (a partial
    what-if was kept before, and a second run refused it as "already exists")."""
    out = tmp_path / "new" / "dir" / "o.db"
    with pytest.raises(RuntimeError), _scratch(out) as scratch:  # type: ignore[attr-defined]
        assert _record(scratch) > 0
        raise RuntimeError("cut short")
    assert os.listdir(tmp_path) == []


def test_a_whatif_cut_short_keeps_side_files_that_were_there(tmp_path: Path) -> None:
    out = tmp_path / "o.db"
    stray = tmp_path / "o.db.head"
    stray.write_text("someone's\n")
    with pytest.raises(RuntimeError), _scratch(out):  # type: ignore[attr-defined]
        raise RuntimeError("cut short")
    assert sorted(os.listdir(tmp_path)) == ["o.db.head"] and stray.read_text() == "someone's\n"


def test_a_whatif_out_cut_short_in_its_open_leaves_no_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C inside the scratch ledger's open, before its ``.lock`` existed."""
    out = tmp_path / "o.db"

    def cut(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(whatif_module.Ledger, "open", cut)
    with pytest.raises(KeyboardInterrupt), _scratch(out):  # type: ignore[attr-defined]
        pass
    assert os.listdir(tmp_path) == []


def _theirs_at(out: str) -> None:
    """Another process's ledger put at `out` (OUT renamed away), with its own side files."""
    os.rename(out, out + ".moved")
    Path(out).write_text("theirs\n")
    Path(out + "-wal").write_text("their committed frames\n")
    os.mkdir(out + ".leases")
    Path(out + ".leases", "k").write_text("their lease\n")


def test_a_swapped_out_keeps_its_side_files(tmp_path: Path) -> None:
    """OUT is checked before anything is removed: the side files of a file swapped in
    are that file's (they were removed first, and only OUT itself was checked)."""
    made = create_new_file(str(tmp_path / "new" / "o.db"))
    _theirs_at(made.path)
    remove_new_file(made)
    assert Path(made.path).read_text() == "theirs\n"
    assert Path(made.path + "-wal").read_text() == "their committed frames\n"
    assert Path(made.path + ".leases", "k").read_text() == "their lease\n"
    assert os.path.exists(made.path + ".moved")


def test_out_swapped_while_its_side_files_go_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = create_new_file(str(tmp_path / "o.db"))
    os.mkdir(made.path + ".leases")  # (the what-if's own)
    real = leftovers.shutil.rmtree

    def swapping(path: str, **kwargs: bool) -> None:
        real(path, **kwargs)
        _theirs_at(made.path)  # (swapped just after)

    monkeypatch.setattr(leftovers.shutil, "rmtree", swapping)
    remove_new_file(made)
    assert Path(made.path).read_text() == "theirs\n"


def _mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("how", ["whatif out", "open"])
def test_folders_are_made_as_main_made_them(tmp_path: Path, how: str) -> None:
    """``os.makedirs(folder, 0o700)``, what main called: the ledger's own folder 0700,
    those on the way 0777 less the umask (a shared ``projects/`` stays listable)."""
    path = tmp_path / "a" / "b" / "o.db"
    old = os.umask(0o022)
    try:
        if how == "open":
            Ledger.open(path).close()
        else:
            made = create_new_file(str(path))
            assert made.folders == (str(tmp_path / "a" / "b"), str(tmp_path / "a"))
    finally:
        os.umask(old)
    assert (_mode(tmp_path / "a"), _mode(tmp_path / "a" / "b"), _mode(path)) == (
        0o755,
        0o700,
        0o600,
    )


def test_a_file_that_cannot_be_made_is_one_store_error_and_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite runs as root: an unwritable folder is simulated (``os.open`` EACCES)."""
    real = os.open

    def refused(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_EXCL:
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files.os, "open", refused)
    with pytest.raises(StoreError) as caught:
        create_new_file(str(tmp_path / "new" / "o.db"))
    assert str(caught.value).startswith("cannot create the ledger ")
    assert "o.db: Permission denied; check the directory exists and is writable" in str(
        caught.value
    )
    assert os.listdir(tmp_path) == []


def test_a_folder_on_the_way_that_is_a_file_is_named(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    for out in (notes / "o.db", notes / "deeper" / "o.db"):
        with pytest.raises(StoreError, match=r"notes\.txt is a file, not a folder"):
            create_new_file(str(out))
    assert notes.read_text() == "mine\n" and os.listdir(tmp_path) == ["notes.txt"]


def test_a_whatif_out_in_a_folder_that_is_a_file_says_so(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    with (
        pytest.raises(StoreError, match=r"notes\.txt is a file, not a folder"),
        _scratch(  # type: ignore[attr-defined]
            notes / "o.db"
        ),
    ):
        pass
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_a_path_through_dotdot_makes_the_folders_the_kernel_walks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``new/../x/o.db``: the kernel needs ``new`` to reach ``x`` (an absolute path
    made only ``x``, and the open then failed: "No such file or directory")."""
    monkeypatch.chdir(tmp_path)
    made = create_new_file("new/../x/o.db")
    assert (tmp_path / "x" / "o.db").is_file()
    assert {os.path.realpath(f) for f in made.folders} == {
        str(tmp_path / "new"),
        str(tmp_path / "x"),
    }
    os.unlink(made.path)
    for folder in made.folders:
        os.rmdir(folder)
    assert os.listdir(tmp_path) == []
