"""``ctxledger upgrade``: fills the message-head columns an older ledger left empty.

The committed ledger written before migration 0002 (``tests/golden/ledger_pre_heads.db``)
gets a head on every message row; nothing hashed changes (verify gives the same
head); the heads equal those derived from the payloads; a second run fills nothing;
a missing file is a clear error and creates nothing.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from click.testing import CliRunner
from test_head_columns import FACTS, GOLDEN, heads

from ctxledger.cli.main import cli
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.eventstore.rows import NO_HEAD, head_columns


def run(db: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    return result.exit_code, result.output


def derived_heads(path: Path) -> dict[int, tuple[str | None, int | None]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT e.seq, s.stream, e.schema, CAST(e.payload AS BLOB) FROM events AS e"
            " JOIN streams AS s USING (stream_id) ORDER BY e.seq"
        ).fetchall()
    return {seq: head_columns(stream, schema, payload) for seq, stream, schema, payload in rows}


def test_upgrade_fills_every_message_head_of_an_old_ledger_and_keeps_its_hashes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN, path)
    messages = sum(1 for h in derived_heads(path).values() if h != NO_HEAD)
    assert messages > 0

    code, out = run(path, "upgrade", "--json")
    assert code == 0, out
    assert json.loads(out) == {
        "message_heads_filled": messages,
        "derived_values_stored": 0,
        "derived_values_replaced": 0,
        "unreadable_contents_skipped": 0,
    }

    stored = {seq: (mid, tokens) for seq, _kind, mid, tokens in heads(path)}
    assert stored == derived_heads(path)  # messages: their heads; other rows stay NULL
    with SQLiteEventStore(str(path)) as store:
        report = store.verify()
    assert report.ok and (report.head_seq, report.head_hash) == (
        FACTS["head_seq"],
        FACTS["head_hash"],
    )

    code, out = run(path, "upgrade")
    assert code == 0 and out.strip() == "nothing to fill", out


def test_upgrade_says_how_many_rows_it_filled(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN, path)
    code, out = run(path, "upgrade")
    assert code == 0, out
    assert out.startswith("filled the heads of ") and "message rows" in out


def test_upgrade_of_a_missing_file_is_a_clear_error_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.db"
    code, out = run(path, "upgrade")
    assert code != 0
    assert "no ledger file at" in out
    assert not path.exists() and list(tmp_path.iterdir()) == []


def _foreign_database(path: Path) -> bytes:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.close()
    return path.read_bytes()


def test_upgrade_of_another_programs_database_is_refused_and_leaves_it_untouched(
    tmp_path: Path,
) -> None:
    # review (session 26): opening it as a ledger added the log's tables, WAL mode, a
    # side lock file and 0600 permissions, then said "nothing to fill"
    path = tmp_path / "app.db"
    before = _foreign_database(path)
    mode = path.stat().st_mode
    for args in (("upgrade",), ("verify",), ("sessions",)):
        code, out = run(path, *args)
        assert code == 2, out
        assert "not a ctxledger ledger" in out and "'notes'" in out
    assert path.read_bytes() == before and path.stat().st_mode == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_a_ledger_opens_as_before_and_a_new_empty_file_becomes_one(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(GOLDEN, path)
    assert run(path, "verify")[0] == 0
    empty = tmp_path / "empty.db"
    empty.touch()
    code, out = run(empty, "verify")
    assert code == 0, out
    with SQLiteEventStore(str(empty)) as store:
        assert store.last_seq() == 0


def test_upgrade_of_a_url_opens_it(tmp_path: Path) -> None:
    # an unknown scheme is refused, not answered with "nothing to fill"
    result = CliRunner().invoke(cli, ["--db", "mysql://h/db", "upgrade"])
    code, out = result.exit_code, result.output
    assert code == 2 and "unknown ledger URL scheme 'mysql'" in out
    assert list(tmp_path.iterdir()) == []
