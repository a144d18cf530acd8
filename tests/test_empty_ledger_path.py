"""An empty ledger path is a missing setting: refused with a clear error, nothing created.

SQLite itself takes ``""`` for a private temporary database; a ledger path that is
empty by mistake (an unset variable, a blank config value) must not silently write a
ledger that vanishes on close. The what-if's scratch ledger asks for that database by
name (``space.TEMPORARY``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.errors import InvalidInput
from ctxledger.eventstore import SQLiteEventStore, open_store
from ctxledger.eventstore.space import TEMPORARY


@pytest.mark.parametrize("opener", [SQLiteEventStore, open_store, Ledger.open])
def test_an_empty_path_is_refused_and_creates_nothing(
    opener: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="ledger path is empty"):
        opener("")  # type: ignore[operator]
    assert os.listdir(tmp_path) == []


def test_migrate_to_an_empty_path_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "a.db"
    with Ledger.open(src) as ledger:
        ledger.start_session(model="m", context_length=8000)
    result = CliRunner().invoke(cli, ["migrate", "--from", str(src), "--to", ""])
    assert result.exit_code != 0
    assert "ledger path is empty" in result.output
    assert "copied" not in result.output
    assert all(name.startswith("a.db") for name in os.listdir(tmp_path))  # the source only


def test_the_temporary_ledger_works_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Ledger.open(TEMPORARY) as ledger:
        sid = ledger.start_session(model="m", context_length=8000)
        ledger.append_messages(sid, [{"role": "user", "content": "hi"}])
        assert ledger.api_messages(sid) == [{"role": "user", "content": "hi"}]
        assert ledger.store.verify().ok
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("dest", [":memory:", TEMPORARY])
def test_migrate_to_a_ledger_kept_in_no_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dest: str
) -> None:
    # review (session 26): the copy was made, verified and thrown away, and the command
    # said "copied ... the copy verifies"
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "a.db"
    with Ledger.open(src) as ledger:
        ledger.start_session(model="m", context_length=8000)
    result = CliRunner().invoke(cli, ["migrate", "--from", str(src), "--to", dest])
    assert result.exit_code == 2
    assert "keeps nothing" in result.output and "copied" not in result.output
    assert all(name.startswith("a.db") for name in os.listdir(tmp_path))


def test_the_temporary_ledger_is_not_a_name_a_user_can_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a NUL cannot be in a command-line argument, an environment variable or a file name:
    # a user's --db is always a real file (or a URL), never the what-if's scratch log
    assert "\x00" in TEMPORARY
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(  # a command that writes (a read refuses a missing file)
        cli,
        ["--db", ":temporary:", "import", "-"],
        input='[{"role": "user", "content": "hi"}]',
    )
    assert result.exit_code == 0, result.output
    assert ":temporary:" in os.listdir(tmp_path)  # an ordinary file of that name


def test_derived_indexes_of_a_ledger_kept_in_no_file_stay_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for path in (":memory:", TEMPORARY):
        with SQLiteEventStore(path) as store:
            assert store.local_index_path("search") == ":memory:"
    with SQLiteEventStore(tmp_path / "l.db") as store:
        assert store.local_index_path("search") == str(tmp_path / "l.db")
    assert sorted(os.listdir(tmp_path)) == ["l.db", "l.db.lock"]


@pytest.mark.parametrize(
    "args",
    [
        ["sessions"],
        ["show", "ses_x"],
        ["usage", "ses_x"],
        ["chain", "ses_x"],
        ["replay", "ses_x"],
        ["audit", "ses_x"],
        ["diff", "ses_x", "ses_y"],
        ["trace", "ses_x", "fact"],
        ["recall", "ses_x", "query"],
        ["expand", "cmp_x"],
        ["export", "ses_x"],
        ["undo", "cmp_x"],
        ["pin", "ses_x", "1"],
        ["compress", "ses_x"],
        ["verify"],
        ["upgrade"],
    ],
)
def test_a_command_that_reads_refuses_a_missing_ledger_file_and_creates_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    db = tmp_path / "missing" / "dir" / "x.db"
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    assert result.exit_code == 2, result.output
    assert f"no ledger file at {db}" in result.output
    assert os.listdir(tmp_path) == []


def test_a_command_that_writes_still_creates_the_ledger_file(tmp_path: Path) -> None:
    db = tmp_path / "new" / "x.db"
    src = tmp_path / "a.json"
    src.write_text('[{"role": "user", "content": "hi"}]')
    result = CliRunner().invoke(cli, ["--db", str(db), "import", str(src)])
    assert result.exit_code == 0, result.output
    assert db.is_file()


@pytest.mark.parametrize("path", [" ", "\t", " \n ", Path(" "), b"  "])
@pytest.mark.parametrize("opener", [SQLiteEventStore, open_store, Ledger.open])
def test_a_blank_path_is_refused_and_creates_nothing(
    opener: object, path: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # session 29 left it: " " made a ledger file named by a blank (and its lock file)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match="is only blank characters"):
        opener(path)  # type: ignore[operator]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "args",
    [["sessions"], ["import", "-"], ["verify"], ["demo", "--turns", "1"]],
)
def test_a_blank_ctxledger_db_is_named_and_creates_nothing(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXLEDGER_DB", "  ")
    result = CliRunner().invoke(cli, args, input='[{"role": "user", "content": "hi"}]')
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "error: CTXLEDGER_DB is only blank characters ('  '): set it to a file path or a "
        "postgresql:// URL, or unset it"
    )
    assert os.listdir(tmp_path) == []


def test_a_blank_ctxledger_db_leaves_help_and_an_explicit_ledger_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXLEDGER_DB", " ")
    assert CliRunner().invoke(cli, ["sessions", "--help"]).exit_code == 0
    result = CliRunner().invoke(
        cli, ["--db", "x.db", "import", "-"], input='[{"role": "user", "content": "hi"}]'
    )
    assert result.exit_code == 0, result.output
    assert all(name.startswith("x.db") for name in os.listdir(tmp_path))


@pytest.mark.parametrize("args", [["--db", " ", "sessions"], ["serve", "--db", "\t"]])
def test_a_blank_db_flag_is_refused(args: list[str], tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "the ledger path is empty" in result.output
