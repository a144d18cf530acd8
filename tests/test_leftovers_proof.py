"""A cleanup never deletes or empties what it cannot prove it made and holds no event
(session 42, review of ``eventstore/leftovers.py``). Each case is a path on which the
first version of the tidy lost data or removed a file it had not made."""

from __future__ import annotations

import importlib
import os
import sqlite3
from pathlib import Path

import pytest

from ctxledger import Ledger
from ctxledger.analysis.replayids import PresetIds, ReplayClock
from ctxledger.compressor.config import CompressionConfig
from ctxledger.errors import InvalidInput
from ctxledger.eventstore.leftovers import opened, taken, tidy

whatif_module = importlib.import_module("ctxledger.analysis.whatif")
_MESSAGES = [{"role": "user", "content": "keep me"}]


def _record(ledger: Ledger) -> int:
    sid = ledger.start_session(model="m", context_length=9000)
    ledger.append_messages(sid, _MESSAGES)
    return ledger.store.last_seq()


def test_events_another_process_committed_before_our_close_are_kept(tmp_path: Path) -> None:
    """A made the ledger and failed; B committed and closed before A's close (which then
    removed the ``-wal``): the events are counted after A's close, under the lock."""
    db = str(tmp_path / "l.db")
    before = taken(db)
    assert before is not None
    a = Ledger.open(db)
    before = opened(before)
    b = Ledger.open(db)
    recorded = _record(b)
    b.close()
    a.close()
    tidy(before)
    with Ledger.open(db) as again:
        assert again.store.last_seq() == recorded


def test_an_open_that_failed_empties_and_removes_nothing(tmp_path: Path) -> None:
    """An empty file that gained data before the open (a log just rotated), and a
    non-ledger file made at a path that was free: the open fails, both are kept."""
    grown = tmp_path / "app.log"
    grown.touch()
    made_later = tmp_path / "notes.txt"
    for path in (grown, made_later):
        before = taken(str(path))
        assert before is not None and before.new
        path.write_text("a line written meanwhile\n")
        with pytest.raises(Exception):  # noqa: B017  (refused: not a ledger)
            Ledger.open(path)
        tidy(before)  # (the open failed: nothing recorded)
        assert path.read_text() == "a line written meanwhile\n"


def test_a_held_lock_keeps_everything(tmp_path: Path) -> None:
    import fcntl

    db = str(tmp_path / "l.db")
    before = taken(db)
    ledger = Ledger.open(db)
    before = opened(before)
    ledger.close()
    assert before is not None and before.made is not None
    fd = os.open(db + ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # (a writer of the ledger, in another process)
        tidy(before)
        assert os.path.exists(db) and os.path.exists(db + ".lock")
    finally:
        os.close(fd)
    tidy(before)  # free now, and provably ours and empty: removed
    assert sorted(os.listdir(tmp_path)) == []


def test_a_symlinked_ledger_another_connection_holds_is_kept(tmp_path: Path) -> None:
    """SQLite puts the ``-wal`` beside the real path: a guard looking beside the link
    saw none. Through a link nothing is tidied at all."""
    real = tmp_path / "real.db"
    real.touch()
    link = tmp_path / "link.db"
    link.symlink_to(real)
    before = taken(str(link))
    ledger = Ledger.open(link)
    before = opened(before)
    assert before is not None and before.made is None  # (a link: not proven)
    other = sqlite3.connect(real)
    try:
        other.execute("SELECT count(*) FROM events").fetchone()
        ledger.close()
        tidy(before)
        assert real.stat().st_size > 0 and link.is_symlink()
    finally:
        other.close()


def test_a_new_ledger_in_new_folders_through_dotdot_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = taken("new/../x/l.db")
    assert before is not None and set(before.folders) == {
        str(tmp_path / "new"),
        str(tmp_path / "x"),
    }
    os.makedirs("new/../x")  # (as the open makes them: both)
    tidy(before)  # (the open failed: only empty folders go)
    assert os.listdir(tmp_path) == []


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


def test_a_whatif_cut_short_leaves_no_out_and_no_folder(tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir" / "o.db"
    with pytest.raises(RuntimeError), _scratch(out):  # type: ignore[attr-defined]
        raise RuntimeError("cut short")
    assert os.listdir(tmp_path) == []


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
