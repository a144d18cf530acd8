"""A file name no file system can hold, given to a CLI path option or argument: one plain
error line, exit 2, nothing appended (session 45's sweep).

What it found: ``--config`` with a NUL (``compress``, ``config``, ``serve`` read it
through click's ``Path(exists=True)``) was a ``ValueError`` traceback out of
``os.stat``; every ``FilePath`` now refuses a NUL or a lone surrogate by name first.
The library's own reader (``resolve_config``, ``read_config_file``) said "is not valid
TOML: embedded null byte"; it now says what ``load_config`` says.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.ledger_helpers import make_ledger

from ctxledger.cli.main import cli
from ctxledger.compressor.config import read_config_file
from ctxledger.compressor.settings import resolve_config
from ctxledger.errors import InvalidConfig

#: (the command's arguments with {} where the bad name goes, the parameter click names)
CASES = [
    (["compress", "s", "--config", "{}"], "'--config'"),
    (["config", "--config", "{}"], "'--config'"),
    (["import", "{}"], "'FILE'"),
    (["export", "s", "--out", "{}"], "'--out'"),
    (["replay", "s", "--summarizer", "offline", "--out", "{}"], "'--out'"),
    (["trajectories", "compress", "{}", "out.jsonl"], "'IN_PATH'"),
    (["trajectories", "compress", "in.jsonl", "{}"], "'OUT_PATH'"),
    (["serve", "--token-file", "{}"], "'--token-file'"),
]
NAMES = [("a\x00b", "a\\x00b holds a NUL character"), ("\ud800", "\\ud800 holds a lone surrogate")]


@pytest.mark.parametrize(("args", "param"), CASES, ids=[" ".join(c[0][:2]) for c in CASES])
@pytest.mark.parametrize(("name", "says"), NAMES, ids=["nul", "surrogate"])
def test_a_path_no_file_can_have_is_one_plain_error_line(
    tmp_path: Path, args: list[str], param: str, name: str, says: str
) -> None:
    db = tmp_path / "l.db"
    with make_ledger(db) as ledger:
        ledger.start_session(model="m", session_id="s")
        before = ledger.store.last_seq()
    (tmp_path / "in.jsonl").write_text('{"conversations": []}\n')
    near = {"{}": name, "in.jsonl": str(tmp_path / "in.jsonl"), "out.jsonl": str(tmp_path / "o")}
    result = CliRunner().invoke(cli, ["--db", str(db), *[near.get(a, a) for a in args]])
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1, result.output
    assert f"Invalid value for {param}: the path {says}" in result.output, result.output
    with make_ledger(db) as ledger:
        assert ledger.store.last_seq() == before


@pytest.mark.parametrize("read", [read_config_file, resolve_config])
def test_the_librarys_config_reader_names_a_nul_in_the_file_name(read: object) -> None:
    with pytest.raises(InvalidConfig, match=r"the config file 'a\\x00b' holds a NUL character"):
        read("a\x00b")  # type: ignore[operator]
