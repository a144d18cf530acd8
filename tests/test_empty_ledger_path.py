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
