"""A read-only open reads the file through one connection (session 33).

The check that the file is no other program's database opened a connection of its
own before the read-only open made another; the open's own connection now checks it.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ctxledger.errors import InvalidInput
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.ledger.facade import Ledger


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(database))
        return real(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    return opened


def test_a_read_only_open_connects_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(str(db)) as ledger:
        sid = ledger.start_session(model="m", context_length=8_000)
    opened = _counting(monkeypatch)
    with Ledger.open(str(db), read_only=True) as ledger:
        assert sid in ledger.transcript.state.sessions
        assert ledger.verify().ok
        assert len(opened) == 1, opened
    # its close removes the -wal/-shm it made as SQLite does: one writable connection,
    # closed last, that reads nothing of the log (session 35)
    assert len(opened) == 2 and opened[1].endswith("?mode=rw"), opened
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(("-wal", "-shm"))]


def test_a_read_only_open_still_refuses_another_programs_database(tmp_path: Path) -> None:
    db = tmp_path / "theirs.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE notes (x)")
    conn.close()
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    # (named by its path, as the writable open names it: the migrations' own check,
    # which would refuse it next, says "this SQLite database")
    named = re.escape(str(db)) + r" is not a ctxledger ledger .* table 'notes'"
    with pytest.raises(InvalidInput, match=named):
        SQLiteEventStore(str(db), read_only=True)
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.iterdir()}
    assert after == before


def test_a_read_only_open_of_an_empty_file_reads_an_empty_ledger(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.write_bytes(b"")
    store = SQLiteEventStore(str(db), read_only=True)
    try:
        assert store.last_seq() == 0
    finally:
        store.close()
    assert db.read_bytes() == b""
