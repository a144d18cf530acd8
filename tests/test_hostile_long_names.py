"""A name over the system's file-name limit, given where a file is read, is one error line.

Session 39's fuzzing of the command line: ``import`` of such a name and
``$CTXLEDGER_CONFIG`` holding one were OSError tracebacks (``File name too long``);
``--db`` had the same fixed in session 31 (test_db_path_not_a_ledger).
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ctxledger.cli.main import cli

LONG = "x" * 5000


def test_import_of_a_name_no_file_can_have_is_one_error_and_nothing_written(
    tmp_path: Path,
) -> None:
    db = tmp_path / "l.db"
    result = CliRunner().invoke(cli, ["--db", str(db), "import", LONG])
    assert result.exit_code == 2, result.output[-500:]
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and "cannot be read" in said[0] and len(said[0]) < 400, said
    assert list(tmp_path.iterdir()) == []


def test_a_config_variable_naming_no_file_any_can_be_is_one_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "l.db"), "config"], env={"CTXLEDGER_CONFIG": LONG}
    )
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit | None)
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and "CTXLEDGER_CONFIG" in said[0] and "too long" in said[0], said
    assert list(tmp_path.iterdir()) == []
