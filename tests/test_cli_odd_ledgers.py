"""Every command on odd but valid ledgers (session 42): an empty one, a session of one
message, session ids with blanks, accents and an emoji, markup, or 1,000 characters.
``--json`` is one JSON document with no terminal markup; plain output reads right."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxledger import Ledger
from ctxledger.cli.main import cli

ODD_IDS = ["a b c", "sëssiön—ünï 😀", "x" * 1000, "[bold]red[/bold] :smile:", "me@host"]


def _run(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def odd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("odd") / "l.db"
    with Ledger.open(db) as ledger:
        for sid in ODD_IDS:
            ledger.start_session(model="m", context_length=9000, session_id=sid)
            ledger.append_messages(
                sid,
                [
                    {"role": "user", "content": f"hello from {sid[:20]}"},
                    {"role": "assistant", "content": "ok [red]x[/red] \x1b[31m"},
                ],
            )
    return db


def _one_document(out: str) -> object:
    assert "\x1b" not in out and "\x9b" not in out, out[:200]
    return json.loads(out)  # (one document: a second one is "Extra data")


@pytest.mark.parametrize("sid", ODD_IDS, ids=["blanks", "unicode", "long", "markup", "at"])
def test_every_json_output_is_one_document_for_an_odd_id(odd: Path, sid: str) -> None:
    for args in (
        ["show", sid],
        ["usage", sid],
        ["chain", sid],
        ["audit", sid],
        ["recall", sid, "hello"],
        ["trace", sid, "hello"],
        ["replay", sid],
        ["compress", sid, "--dry-run"],
    ):
        code, out, err = _run(odd, *args, "--json")
        assert code == 0, (args, err)
        _one_document(out)
    rows = _one_document(_run(odd, "sessions", "--json")[1])
    assert [r["session_id"] for r in rows] == ODD_IDS  # type: ignore[union-attr]


def test_an_empty_ledger_says_so_once_and_prints_no_empty_table(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    Ledger.open(db).close()
    code, out, err = _run(db, "sessions")
    assert code == 0 and out == "", out  # (it printed a header row over nothing)
    assert "no sessions in" in err
    assert _one_document(_run(db, "sessions", "--json")[1]) == []
    code, out, _err = _run(db, "verify", "--json")
    assert code == 0 and _one_document(out)


def test_an_audit_of_a_chain_with_no_compaction_says_so(odd: Path) -> None:
    """It printed an empty table and "retention 100%; mean per compaction 100%"."""
    code, out, _err = _run(odd, "audit", "a b c")
    assert code == 0
    assert out == (
        "no compaction in the chain of a b c: nothing was summarized, so no fact could be lost\n"
    )


def test_the_sessions_table_groups_the_message_count_as_it_groups_tokens(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        sid = ledger.start_session(model="m", context_length=1_000_000)
        ledger.append_messages(sid, [{"role": "user", "content": "q"}] * 1200)
    code, out, _err = _run(db, "sessions")
    assert code == 0 and "1,200" in out and "1200" not in out, out
