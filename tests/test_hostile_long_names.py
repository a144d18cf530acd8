"""A name over the system's file-name limit, given where a file is read, is one error line.

Session 39's fuzzing of the command line: ``import`` of such a name and
``$CTXLEDGER_CONFIG`` holding one were OSError tracebacks (``File name too long``);
``--db`` had the same fixed in session 31 (test_db_path_not_a_ledger).
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli.app import LedgerTargetType
from ctxledger.cli.main import cli

LONG = "x" * 5000


#: every option and argument naming a file or a ledger, given the long name (LONG);
#: DB is a ledger holding a session SES, TOML a config, t.jsonl one trajectory
PATHS: dict[str, list[str]] = {
    "--db": ["--db", LONG, "sessions"],
    "import FILE": ["--db", "DB", "import", LONG],
    "export --out": ["--db", "DB", "export", "SES", "--out", LONG],
    "replay --out": ["--db", "DB", "replay", "SES", "--out", LONG],
    "replay --out (after --config)": [
        "--db",
        "DB",
        "replay",
        "SES",
        "--config",
        "TOML",
        "--out",
        LONG,
    ],
    "replay --config": ["--db", "DB", "replay", "SES", "--config", LONG],
    "diff --config": ["--db", "DB", "diff", "SES", "SES", "--config", LONG],
    "diff --b-db": ["--db", "DB", "diff", "SES", "SES", "--b-db", LONG],
    "compress --config": ["--db", "DB", "compress", "SES", "--config", LONG],
    "config --config": ["config", "--config", LONG],
    "trajectories compress IN_PATH": ["trajectories", "compress", LONG, "out.jsonl"],
    "trajectories compress OUT_PATH": ["trajectories", "compress", "t.jsonl", LONG],
    "migrate --from": ["migrate", "--from", LONG, "--to", "out.db"],
    "migrate --to": ["migrate", "--from", "DB", "--to", LONG],
    "serve --db": ["serve", "--db", LONG],
    "serve --config": ["--db", "DB", "serve", "--config", LONG],
    "serve --token-file": ["--db", "DB", "serve", "--token-file", LONG],
}


def _path_parameters() -> set[str]:
    """Every parameter of the CLI taking a file or a ledger, named as PATHS names it."""
    found = {"--db"}
    commands: list[tuple[str, click.Command]] = list(cli.commands.items())
    while commands:
        name, command = commands.pop()
        if isinstance(command, click.Group):
            commands += [(f"{name} {sub}", c) for sub, c in command.commands.items()]
            continue
        for param in command.params:
            if isinstance(param.type, click.Path | LedgerTargetType):
                shown = (
                    param.opts[0] if param.opts[0].startswith("-") else param.human_readable_name
                )
                found.add(f"{name} {shown}")
    return found


def test_every_path_parameter_is_swept() -> None:
    assert _path_parameters() <= {key.split(" (")[0] for key in PATHS}


@pytest.mark.parametrize("where", PATHS)
def test_a_name_no_file_can_have_is_one_short_error_and_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """No OSError traceback (``import FILE``, ``replay --out`` were), the name cut in
    the message, nothing written (session 39)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.json").write_text('[{"role": "user", "content": "hi"}]')
    (tmp_path / "c.toml").write_text("threshold = 0.6\n")
    (tmp_path / "t.jsonl").write_text('{"conversations": [{"from": "human", "value": "hi"}]}\n')
    db = tmp_path / "l.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", str(db), "import", "in.json"]).exit_code == 0
    sid = Ledger.open(str(db), read_only=True).sessions()[0].session_id
    names = {"DB": str(db), "SES": sid, "TOML": "c.toml"}
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = runner.invoke(cli, [names.get(a, a) for a in PATHS[where]])
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    assert result.exit_code in (1, 2), result.output[-500:]
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and len(said[0]) < 400, said
    assert "too long" in said[0] or "does not exist" in said[0], said
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_config_variable_naming_no_file_any_can_be_is_one_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "l.db"), "config"], env={"CTXLEDGER_CONFIG": LONG}
    )
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit | None)
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and "CTXLEDGER_CONFIG" in said[0] and "too long" in said[0], said
    assert list(tmp_path.iterdir()) == []


#: a long name a file could have (components under the system's limit) holding a
#: backslash, which click's messages quote doubled (final review of session 39)
NESTED = "/".join(["d\\" + "y" * 200] * 14)


@pytest.mark.parametrize(
    "argv",
    [
        ["--db", NESTED, "sessions"],
        ["--db", "DB", "import", NESTED],
        ["config", "--config", NESTED],
        ["--db", "DB", "diff", "SES", "SES", "--b-db", NESTED],
    ],
    ids=["--db", "import FILE", "config --config", "diff --b-db"],
)
def test_a_long_missing_name_is_shown_cut(tmp_path: Path, argv: list[str]) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(str(db)) as ledger:
        sid = ledger.start_session(model="m", context_length=8_192)
    result = CliRunner().invoke(cli, [{"DB": str(db), "SES": sid}.get(a, a) for a in argv])
    said = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code in (1, 2) and len(said) == 1, result.output[-500:]
    assert len(said[0]) < 500 and "…" in said[0], said[0][:600]
