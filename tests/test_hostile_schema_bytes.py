"""A SQLite file whose schema text holds bytes that are not UTF-8 is a damaged file.

Session 39's fuzzing: SQLite's message about such a schema ("malformed database
schema ... near ...") quotes those bytes, Python's sqlite3 decodes the message as UTF-8
and raised UnicodeDecodeError: every command on such a ledger, and ``import`` of such a
Hermes ``state.db``, was a traceback. Now a ledger is "damaged" (exit 1) and a Hermes
store "not a readable SQLite session store", one line each, nothing written.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.import_fixtures import make_hermes_db

from ctxledger import Ledger
from ctxledger.cli.main import cli


def _damage_schema(path: Path, at: bytes = b"CREATE TABLE", offset: int = 10) -> None:
    """Two bytes `offset` into the first `at` of the file replaced by a byte sequence no
    UTF-8 has."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    found = data.find(at)
    assert found >= 0
    data[found + offset : found + offset + 2] = b"\xdd\x39"
    path.write_bytes(bytes(data))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize(
    "command", [["sessions"], ["verify"], ["show", "x"], ["upgrade"], ["import", "IN"]]
)
def test_a_ledger_whose_schema_is_not_utf8_is_damaged_on_one_line(
    tmp_path: Path, command: list[str]
) -> None:
    (tmp_path / "ledger").mkdir()
    db = tmp_path / "ledger" / "l.db"
    with Ledger.open(str(db)) as ledger:
        ledger.start_session(model="m", context_length=8_192)
    _damage_schema(db)
    (tmp_path / "in.json").write_text('[{"role": "user", "content": "hi"}]')
    args = [str(tmp_path / "in.json") if a == "IN" else a for a in command]
    before = _files(db.parent)
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    assert result.exit_code == 1, result.output
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and "damaged" in said[0], result.output
    assert _files(db.parent) == before


def test_a_hermes_store_whose_schema_is_not_utf8_is_refused_on_one_line(tmp_path: Path) -> None:
    store = make_hermes_db(tmp_path / "state.db")
    _damage_schema(store)
    db = tmp_path / "l.db"
    result = CliRunner().invoke(
        cli, ["--db", str(db), "import", str(store), "--format", "hermes-db"]
    )
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code != 0 and len(said) == 1, result.output
    assert "not a readable SQLite session store" in said[0]
    assert not db.exists() or db.stat().st_size == 0 or _events(db) == 0


def _events(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    finally:
        conn.close()


def test_an_import_onto_a_log_whose_seq_is_no_longer_the_row_id_writes_nothing(
    tmp_path: Path,
) -> None:
    """Bytes of ``"seq" INTEGER PRIMARY KEY`` changed so the schema still parses: seq is
    no longer the row id and reads NULL. An append there was a TypeError traceback."""
    db = tmp_path / "l.db"
    with Ledger.open(str(db)) as ledger:
        ledger.start_session(model="m", context_length=8_192)
    _damage_schema(db, at=b'"seq" INTEGER', offset=13)
    (tmp_path / "in.json").write_text('[{"role": "user", "content": "hi"}]')
    before = db.read_bytes()
    result = CliRunner().invoke(cli, ["--db", str(db), "import", str(tmp_path / "in.json")])
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(said) == 1, result.output
    assert "damaged" in said[0] and "nothing was written" in said[0]
    assert db.read_bytes() == before


def test_verify_of_a_log_whose_seq_is_no_longer_the_row_id_fails_with_no_anchor(
    tmp_path: Path,
) -> None:
    """The same damage with no head anchor beside the ledger: the walk by seq read no
    row and `verify` said "ok: 0 events" (review 1 of session 39, F3; on main too)."""
    db = tmp_path / "l.db"
    with Ledger.open(str(db)) as ledger:
        ledger.start_session(model="m", context_length=8_192)
    _damage_schema(db, at=b'"seq" INTEGER', offset=13)
    for side in tmp_path.glob("l.db.head*"):
        side.unlink()
    result = CliRunner().invoke(cli, ["--db", str(db), "verify"])
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    assert result.exit_code == 1, result.output
    assert "seq is not a number" in result.output and "damaged" in result.output


@pytest.mark.parametrize("argv", [["sessions"], ["sessions", "--json"], ["usage", "ses_x"]])
def test_a_read_of_a_log_whose_seq_is_no_longer_the_row_id_says_it_is_damaged(
    tmp_path: Path, argv: list[str]
) -> None:
    """Not "no sessions" or `[]`: every read by seq found an empty log (stop-check read of
    session 39; only append and verify noticed). The check is made once, at opening."""
    db = tmp_path / "l.db"
    with Ledger.open(str(db)) as ledger:
        ledger.start_session(model="m", context_length=8_192)
    _damage_schema(db, at=b'"seq" INTEGER', offset=13)
    before = db.read_bytes()
    result = CliRunner().invoke(cli, ["--db", str(db), *argv])
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(said) == 1, result.output
    assert "damaged" in said[0] and "seq is not a number" in said[0]
    assert db.read_bytes() == before
