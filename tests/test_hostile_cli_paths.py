"""A file name no file system can hold, given to a CLI path option or argument: one plain
error line, exit 2, nothing appended (session 45's sweep).

What it found: every ``FilePath`` parameter crashed on main with a traceback (``import``'s
FILE, ``export``/``replay`` ``--out``, ``trajectories compress`` IN_PATH/OUT_PATH,
``serve --token-file``, ``--config`` of ``compress``/``config``): a NUL was a
``ValueError`` ("embedded null byte"), a lone surrogate a ``UnicodeEncodeError``. Each
now refuses such a name by name first. A ledger target starting with ``~`` (``--db``,
``migrate --from``/``--to``) was expanded before any check: ``~\x00`` was
``expanduser``'s ``ValueError``; it is now checked, then expanded
(:func:`~ctxledger.eventstore.opening.target_text`). The library's own reader
(``resolve_config``, ``read_config_file``) said "is not valid TOML: embedded null byte";
it now says what ``load_config`` says.
"""

from __future__ import annotations

from collections.abc import Callable
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
NAMES = [
    ("a\x00b", "'a\\x00b' holds a NUL character"),
    ("\ud800", "'\\ud800' holds a lone surrogate"),
]


@pytest.mark.parametrize(("args", "param"), CASES, ids=[" ".join(c[0][:2]) for c in CASES])
@pytest.mark.parametrize(("name", "says"), NAMES, ids=["nul", "surrogate"])
def test_a_path_no_file_can_have_is_one_plain_error_line(
    tmp_path: Path, args: list[str], param: str, name: str, says: str
) -> None:
    db = tmp_path / "l.db"
    (tmp_path / "in.jsonl").write_text('{"conversations": []}\n')
    near = {"{}": name, "in.jsonl": str(tmp_path / "in.jsonl"), "out.jsonl": str(tmp_path / "o")}
    args = ["--db", str(db), *[near.get(a, a) for a in args]]
    _one_plain_refusal(db, args, f"Invalid value for {param}: the path {says}")


def _one_plain_refusal(db: Path, args: list[str], says: str) -> None:
    """The CLI run with `args` beside the ledger `db` (one session started): exit 2, one
    line holding `says`, nothing appended to `db`."""
    with make_ledger(db) as ledger:
        ledger.start_session(model="m", session_id="s")
        before = ledger.store.last_seq()
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1, result.output
    assert says in result.output, result.output
    with make_ledger(db) as ledger:
        assert ledger.store.last_seq() == before


@pytest.mark.parametrize("read", [read_config_file, resolve_config])
def test_the_librarys_config_reader_names_a_nul_in_the_file_name(
    read: Callable[[str], object],
) -> None:
    with pytest.raises(InvalidConfig, match=r"the config file 'a\\x00b' holds a NUL character"):
        read("a\x00b")


#: (the arguments with {} where the ledger target goes, the option click names)
TILDE_CASES = [
    (["--db", "{}", "sessions"], "'--db'"),
    (["migrate", "--from", "{}", "--to", "out.db"], "'--from'"),
    (["migrate", "--from", "l.db", "--to", "{}"], "'--to'"),
]
TILDE_NAMES = [
    ("~\x00", "'~\\x00' holds a NUL character"),
    ("~\ud800/x.db", "'~\\ud800/x.db' holds a lone surrogate"),
    ("~a\x00/x.db", "'~a\\x00/x.db' holds a NUL character"),
]


@pytest.mark.parametrize(("args", "param"), TILDE_CASES, ids=["db", "from", "to"])
@pytest.mark.parametrize(("name", "says"), TILDE_NAMES, ids=["nul", "surrogate", "user-nul"])
def test_a_ledger_target_under_tilde_is_checked_before_it_is_expanded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    param: str,
    name: str,
    says: str,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    db = tmp_path / "l.db"
    near = {"{}": name, "l.db": str(db), "out.db": str(tmp_path / "out.db")}
    args = [near.get(a, a) for a in args]
    _one_plain_refusal(db, args, f"Invalid value for {param}: the ledger path {says}")
    assert not (tmp_path / "out.db").exists()
    assert not any(home.iterdir())  # (nor anything made under the home folder)
