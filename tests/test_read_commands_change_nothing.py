"""Every command that only reads leaves a file that is no ledger, and an old ledger, as it was.

Session 39 found `verify` writing a whole ledger schema (and a ``.lock``) into a SQLite
database holding no table (a ``PRAGMA journal_mode=WAL`` alone makes one) and `upgrade`
doing it to an empty file; and every read command migrating a ledger an older ctxledger
wrote (which that older ctxledger then refuses: "migrated by a newer ctxledger"). The
commands are listed from the CLI itself, so a new one must say here whether it reads.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from test_head_columns import GOLDEN

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidInput, StoreError
from ctxledger.eventstore.migrations import MIGRATIONS

SID, CMP = "ses_00000001", "cmp_00000146"  # (in the golden ledger of migration 0001 only)

#: the commands that only read the ledger `DB` (or its other end: diff --b-db, migrate --from)
READERS: dict[str, list[str]] = {
    "sessions": ["--db", "DB", "sessions"],
    "show": ["--db", "DB", "show", SID],
    "usage": ["--db", "DB", "usage", SID],
    "chain": ["--db", "DB", "chain", SID],
    "replay": ["--db", "DB", "replay", SID],
    "audit": ["--db", "DB", "audit", SID],
    "diff": ["--db", "DB", "diff", SID, SID],
    "diff-b-db": ["--db", "OTHER", "diff", SID, SID, "--b-db", "DB"],
    "trace": ["--db", "DB", "trace", SID, "src/cache/core.py"],
    "recall": ["--db", "DB", "recall", SID, "cache"],
    "expand": ["--db", "DB", "expand", CMP],
    "export": ["--db", "DB", "export", SID],
    "verify": ["--db", "DB", "verify"],
    "migrate-from": ["migrate", "--from", "DB", "--to", "OUT"],
}
#: the others: they append or fill (tested in test_hostile_ledger_files), open no
#: ledger (config, demo's own), or serve one (test_server_hostile)
NOT_READERS = {"import", "compress", "pin", "undo", "upgrade", "config", "demo", "serve"}
NOT_READERS |= {"trajectories", "whatif"}


def _no_table_wal(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()


def _no_table_vacuumed(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 1024")
    conn.execute("VACUUM")
    conn.close()


#: files that are no ledger: every read refuses them, changing nothing
NO_LEDGER: dict[str, Callable[[Path], None]] = {
    "missing": lambda path: None,
    "no-table-wal": _no_table_wal,
    "no-table-vacuumed": _no_table_vacuumed,
}


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file in `folder`: its bytes and mtime."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _run(
    tmp_path: Path, command: str, make: Callable[[Path], None], where: str = "ledger"
) -> tuple[int, Result, Path]:
    folder = tmp_path / where
    folder.mkdir()
    db = folder / "l.db"
    make(db)
    names = {"DB": db, "OTHER": tmp_path / f"other-{where}.db", "OUT": tmp_path / f"{where}.db"}
    shutil.copyfile(GOLDEN, names["OTHER"])
    before = _state(folder)
    result = CliRunner().invoke(cli, [str(names.get(a, a)) for a in READERS[command]])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    after = _state(folder) if where == "ledger" else before  # (an upgraded copy keeps indexes)
    if command == "verify":  # (a clean verify seals the head anchor beside the ledger)
        after.pop("l.db.head", None)
    assert after == before, (command, sorted(before), sorted(after), result.output[-500:])
    return result.exit_code, result, db


def test_every_command_of_the_cli_is_classed() -> None:
    readers = {name.split("-")[0] for name in READERS}
    assert readers | NOT_READERS >= set(cli.commands), set(cli.commands) - readers - NOT_READERS


@pytest.mark.parametrize("kind", NO_LEDGER)
@pytest.mark.parametrize("command", READERS)
def test_a_read_of_a_file_that_is_no_ledger_is_one_error_and_changes_nothing(
    tmp_path: Path, command: str, kind: str
) -> None:
    code, result, db = _run(tmp_path, command, NO_LEDGER[kind])
    output = result.output
    assert code == 2, output[-500:]
    said = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and ("ledger file" in said[0] or "holding no table" in said[0])
    assert os.path.exists(db) == (kind != "missing")


def _upgraded(path: Path) -> None:
    shutil.copyfile(GOLDEN, path)
    result = CliRunner().invoke(cli, ["--db", str(path), "upgrade"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", READERS)
def test_a_read_of_a_ledger_an_older_ctxledger_wrote_reads_as_its_upgraded_copy_and_says_so(
    tmp_path: Path, command: str
) -> None:
    """Not migrated, nothing changed beside it; what it prints is what the same command
    prints of an upgraded copy, and one note says the ledger is read as it is."""
    code, old, db = _run(tmp_path, command, lambda path: shutil.copyfile(GOLDEN, path))
    assert code == 0, old.output[-1000:]
    code, new, new_db = _run(tmp_path, command, _upgraded, where="upgraded")
    assert code == 0, new.output[-1000:]
    assert old.stdout.replace("ledger", "upgraded") == new.stdout
    notes = [line for line in old.stderr.splitlines() if line.startswith("note:")]
    assert [line for line in notes if str(db) in line] == [
        f"note: {db} was written by an older ctxledger and is read as it is; `ctxledger "
        "upgrade` makes later reads faster, but an older ctxledger still writing it "
        "would then refuse it"
    ]
    assert str(new_db) not in new.stderr


@pytest.mark.parametrize("kind", ["empty", "no-table-wal", "no-table-vacuumed"])
def test_upgrade_of_a_file_that_is_no_ledger_is_refused_not_made_a_ledger(
    tmp_path: Path, kind: str
) -> None:
    db = tmp_path / "l.db"
    (NO_LEDGER | {"empty": lambda path: path.write_bytes(b"")})[kind](db)
    before = _state(tmp_path)
    result = CliRunner().invoke(cli, ["--db", str(db), "upgrade"])
    assert result.exit_code == 2 and "not a ledger; nothing was written" in result.output
    assert _state(tmp_path) == before


def _current_ledger(path: Path) -> None:
    with Ledger.open(str(path)) as ledger:
        ledger.start_session(model="m", context_length=8_192)


def test_a_read_of_a_ledger_lacking_a_migration_with_no_read_shim_is_refused_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration a reader cannot read around (no shim) still refuses the read-only
    open, through the CLI's read commands too, naming it and `ctxledger upgrade`."""
    db = tmp_path / "l.db"
    _current_ledger(db)
    monkeypatch.setattr(MIGRATIONS, "_steps", [*MIGRATIONS._steps, ("0099_probe", print)])
    before = _state(tmp_path)
    with pytest.raises(StoreError, match=r"'0099_probe' is not applied.*ctxledger upgrade"):
        Ledger.open(str(db), read_only=True)
    result = CliRunner().invoke(cli, ["--db", str(db), "sessions"])
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(said) == 1 and "'0099_probe'" in said[0], result.output
    assert _state(tmp_path) == before


def test_a_read_only_open_of_a_database_holding_no_table_says_it_is_no_ledger(
    tmp_path: Path,
) -> None:
    """Not "written by an older ctxledger ... run `ctxledger upgrade`": upgrade refuses
    such a file (review 1 of session 39, F7)."""
    db = tmp_path / "l.db"
    _no_table_wal(db)
    before = _state(tmp_path)
    with pytest.raises(InvalidInput, match="holding no table, not a ledger"):
        Ledger.open(str(db), read_only=True)
    assert _state(tmp_path) == before
