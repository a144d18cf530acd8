"""A command that fails leaves the ledger's folder as it found it (session 42).

Before, an ``import`` refused after the ledger's open (``--model ''``, a repeat) left a
new, empty 48 KB ledger and its ``.lock``; a refused ``show`` made the ``.lock`` of a
ledger that had none; a ``migrate`` into a new file that failed left that file. See
``ctxledger/cli/leftovers.py`` for what is removed and what is kept.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.unicodecheck import not_unicode

_MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def _tree(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every name under `folder`, with its mode and (a file's) bytes."""
    return {
        str(p.relative_to(folder)): (
            stat.S_IMODE(p.lstat().st_mode),
            p.read_bytes() if p.is_file() else None,
        )
        for p in sorted(folder.rglob("*"))
    }


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def _conversation(folder: Path) -> Path:
    path = folder / "in.json"
    path.write_text(json.dumps(_MESSAGES))
    return path


def _ledger_without_lock(folder: Path) -> Path:
    db = folder / "l.db"
    with Ledger.open(db) as ledger:
        sid = ledger.start_session(model="m", context_length=9000)
        ledger.append_messages(sid, _MESSAGES)
    (folder / "l.db.lock").unlink()
    return db


@pytest.mark.parametrize("db", ["l.db", "new/deeper/l.db"])
def test_an_import_refused_after_the_open_leaves_no_ledger(tmp_path: Path, db: str) -> None:
    source = _conversation(tmp_path)
    before = _tree(tmp_path)
    code, out = _run("--db", str(tmp_path / db), "import", "--model", " ", str(source))
    assert code == 2 and "the model to record must be a non-empty string" in out, out
    assert _tree(tmp_path) == before  # no ledger, no .lock, no folder made


def test_an_empty_file_stays_an_empty_file_with_its_mode(tmp_path: Path) -> None:
    source = _conversation(tmp_path)
    empty = tmp_path / "l.db"
    empty.touch()
    empty.chmod(0o644)  # (an open makes a ledger private: given back)
    before = _tree(tmp_path)
    code, out = _run("--db", str(empty), "import", "--model", "", str(source))
    assert code == 2, out
    assert _tree(tmp_path) == before


def test_a_refused_repeat_or_read_makes_no_lock_beside_a_ledger(tmp_path: Path) -> None:
    db = _ledger_without_lock(tmp_path)
    source = _conversation(tmp_path)
    assert _run("--db", str(db), "import", str(source))[0] == 0
    (tmp_path / "l.db.lock").unlink()
    before = _tree(tmp_path)
    code, out = _run("--db", str(db), "import", str(source))
    assert code == 2 and "was imported before" in out, out
    for command in (["show", "nope"], ["recall", "nope", "x"], ["pin", "nope", "0"]):
        code, out = _run("--db", str(db), *command)
        assert code == 2 and "no session 'nope'" in out, (command, out)
    assert _tree(tmp_path) == before


def test_a_ledger_that_holds_events_is_kept_and_a_new_one_that_worked_too(tmp_path: Path) -> None:
    source = _conversation(tmp_path)
    db = tmp_path / "l.db"
    assert _run("--db", str(db), "import", str(source))[0] == 0
    assert {"l.db", "l.db.lock", "l.db.head"} <= set(os.listdir(tmp_path))
    before = _tree(tmp_path)
    code, _out = _run("--db", str(db), "import", "--model", "", "--again", str(source))
    assert code == 2
    assert _tree(tmp_path) == before


def test_a_ledger_another_connection_holds_open_is_kept(tmp_path: Path) -> None:
    """A new ledger another process opened meanwhile (its ``-wal`` outlives this
    command's close) is not removed under it."""
    source = _conversation(tmp_path)
    db = tmp_path / "l.db"
    with Ledger.open(db):  # (made, empty, and held open by "another" connection)
        os.unlink(str(db) + ".lock")  # (as if it had just been made)
        conn = sqlite3.connect(db)
        conn.execute("SELECT count(*) FROM events").fetchone()
        try:
            code, _out = _run("--db", str(db), "import", "--model", "", str(source))
            assert code == 2
            assert db.exists()
        finally:
            conn.close()


def test_a_failed_migrate_into_a_new_file_leaves_none(tmp_path: Path) -> None:
    """The copy's source fails to verify: the new --to is removed, and the source (only
    read) gets no .lock."""
    source = _ledger_without_lock(tmp_path)
    with sqlite3.connect(source) as conn:  # (an event's bytes edited: its hash fails)
        conn.execute("UPDATE events SET payload = CAST('{}' AS BLOB) WHERE seq = 2")
    conn.close()
    before = _tree(tmp_path)
    code, out = _run("migrate", "--from", str(source), "--to", str(tmp_path / "new.db"))
    assert code == 1 and out.startswith("error: "), out
    assert _tree(tmp_path) == before


def test_bytes_that_are_not_utf8_are_named_as_bytes(tmp_path: Path) -> None:
    """``recall S $'caf\\xe9'`` was told of "half of an escaped emoji pair" (session 41)."""
    db = _ledger_without_lock(tmp_path)
    for command in ("recall", "trace"):
        code, out = _run("--db", str(db), command, "s", "caf\udce9\udcff")
        assert code == 2, out
        assert "holds bytes that are not UTF-8 (0xe9 0xff)" in out, out
        assert "emoji" not in out
    try:
        "a\ud83db".encode()
    except UnicodeEncodeError as exc:  # a lone surrogate JSON can spell: still the pair
        assert not_unicode("the query", exc) == (
            "the query holds text that is not valid Unicode ('\\ud83d', half of an escaped "
            "emoji pair)"
        )
