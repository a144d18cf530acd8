"""Importer inputs that used to end in a traceback: now a located ImportFormatError.

Review (session 26): a Codex token count that is text or a list (``int()`` raised, and
``"12"``, ``1.9`` or ``true`` were coerced into made-up counts); JSON nested past the
recursion limit in a ShareGPT ``<tool_call>`` or a Hermes ``tool_calls`` /
``model_config`` column; a Hermes token column holding text. Also ``export --out`` and
``trajectories compress`` into a directory that does not exist (exit 2, not a traceback).

Session 29: a UTF-8 byte-order mark made a file "not JSON", UTF-16 text was "invalid
start byte", and an escaped lone surrogate was "Input data was truncated".
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.import_fixtures import (
    anthropic_conversation,
    claude_code_lines,
    codex_lines,
    cx_tokens,
    jsonl,
    make_hermes_db,
)

from ctxledger import Ledger
from ctxledger.cli.main import cli
from ctxledger.errors import ImportFormatError
from ctxledger.importers.codex import parse_codex
from ctxledger.importers.hermes_db import parse_hermes_db
from ctxledger.importers.sharegpt import parse_sharegpt

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("count", ["abc", [1], "12", 1.9, True])
def test_a_codex_token_count_that_is_not_an_integer_is_a_located_error(count: Any) -> None:
    lines = [*codex_lines(), cx_tokens(5000, input_tokens=0)]
    lines[-1]["payload"]["info"]["last_token_usage"]["input_tokens"] = count
    with pytest.raises(ImportFormatError, match="input_tokens must be an integer"):
        parse_codex(jsonl(lines), path="rollout.jsonl")


@pytest.mark.parametrize("count", [-1, 10**30])
def test_a_codex_token_count_out_of_range_is_a_located_error(count: int) -> None:
    lines = [*codex_lines(), cx_tokens(5000, input_tokens=0)]
    lines[-1]["payload"]["info"]["last_token_usage"]["input_tokens"] = count
    with pytest.raises(ImportFormatError, match=r"last_token_usage\.input_tokens"):
        parse_codex(jsonl(lines), path="rollout.jsonl")


def test_a_sharegpt_call_nested_past_the_recursion_limit_is_a_clear_error() -> None:
    turns = [
        {"from": "human", "value": "go"},
        {"from": "gpt", "value": f"<tool_call>{DEEP}</tool_call>"},
    ]
    with pytest.raises(ImportFormatError, match="not a JSON object"):
        parse_sharegpt(json.dumps([{"conversations": turns}]))


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("UPDATE sessions SET model_config = ? WHERE id = 's1'", "model_config is not valid JSON"),
        (
            "UPDATE messages SET tool_calls = ? WHERE tool_calls IS NOT NULL",
            "tool_calls is not valid JSON",
        ),
        (
            "UPDATE sessions SET output_tokens = 'abc' WHERE id = 's1' AND ? IS NOT NULL",
            "token count",
        ),
        (
            "UPDATE sessions SET input_tokens = -5 WHERE id = 's1' AND ? IS NOT NULL",
            "token count column is out of range: input tokens must not be negative",
        ),
    ],
)
def test_a_hermes_database_with_odd_columns_is_a_clear_error(
    tmp_path: Path, sql: str, says: str
) -> None:
    path = make_hermes_db(tmp_path / "state.db")
    with sqlite3.connect(path) as db:
        db.execute(sql, (DEEP,))
    db.close()
    with pytest.raises(ImportFormatError, match=says):
        parse_hermes_db(path)


def test_writing_into_a_missing_directory_is_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with Ledger.open(db) as ledger:
        sid = ledger.start_session(model="m", context_length=8192)
        ledger.append_messages(sid, [{"role": "user", "content": "hi"}])
    missing = tmp_path / "nowhere" / "x.json"
    result = CliRunner().invoke(cli, ["--db", str(db), "export", sid, "--out", str(missing)])
    assert result.exit_code == 2 and "does not exist" in result.output  # (cli/outpath.py)
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    result = CliRunner().invoke(cli, ["trajectories", "compress", str(source), str(missing)])
    assert result.exit_code == 2 and "does not exist" in result.output
    assert not (tmp_path / "nowhere").exists()


def _import(tmp_path: Path, data: bytes, *args: str) -> tuple[int, str, int]:
    """`ctxledger import` of a file holding `data` (`args`: more options): exit code,
    output, events in the ledger after it."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(data)
    db = tmp_path / "l.db"
    result = CliRunner().invoke(cli, ["--db", str(db), "import", str(source), *args])
    with Ledger.open(db) as ledger:
        return result.exit_code, result.output, ledger.store.last_seq()


LINES = b'{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n'


def test_a_utf8_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    # session 29: a file a Windows editor saved ("\ufeff" first) was "cannot tell the
    # format (not JSON: JSON is malformed: invalid character (byte 0))"
    code, output, seq = _import(tmp_path, b"\xef\xbb\xbf" + LINES)
    assert code == 0, output
    assert seq > 0


def test_utf16_text_is_named(tmp_path: Path) -> None:
    text = LINES.decode().encode("utf-16")
    code, output, seq = _import(tmp_path, text)
    assert code == 2 and "UTF-16 text (it starts with a UTF-16 byte-order mark)" in output
    assert seq == 0


@pytest.mark.parametrize("data", [b"[]", b" [ ]\n"])
def test_an_empty_json_list_is_called_empty_not_not_json(tmp_path: Path, data: bytes) -> None:
    # session 36: `[]` was "cannot tell the format (not a JSON document or JSON lines)",
    # which it is; --format openai said "no messages found"
    code, output, seq = _import(tmp_path, data)
    assert code == 2 and "(an empty JSON list: no messages to import)" in output, output
    assert "not a JSON document" not in output
    assert seq == 0


@pytest.mark.parametrize("fmt", [[], ["--format", "openai"]])
def test_an_escaped_lone_surrogate_is_named_not_called_truncated(
    tmp_path: Path, fmt: list[str]
) -> None:
    # msgspec reports a lone "\ud800" escape as "Input data was truncated"
    data = LINES + b'{"role": "user", "content": "half \\ud83d of an emoji"}\n'
    code, output, seq = _import(tmp_path, data, *fmt)
    assert code == 2 and "truncated" not in output, output
    assert "the escape \\ud83d is half of an escaped emoji pair, not valid Unicode" in output
    assert seq == 0


def _anthropic_block_type_list() -> str:
    doc = anthropic_conversation()
    doc["messages"][0]["content"] = [{"type": ["tool_use"], "text": "x"}]
    return json.dumps(doc)


def _codex_record_type(at: int, kind: Any) -> str:
    lines = codex_lines()
    lines.insert(at, {"type": kind, "payload": {}})
    return jsonl(lines)


def _claude_code_first_type(kind: Any) -> str:
    lines = claude_code_lines()
    lines.insert(0, {"type": kind, "summary": "s", "leafUuid": "u9"})
    return jsonl(lines)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (_anthropic_block_type_list(), "1: content block 0 must be an object with a string 'type'"),
        (_codex_record_type(2, {"x": 1}), "3: not a Codex rollout record (no text 'type')"),
        (_codex_record_type(0, ["session_meta"]), "1: cannot tell the format"),
        (_claude_code_first_type({"a": 1}), "1: expected a record object with a string 'type'"),
    ],
    ids=["anthropic-block", "codex-record", "codex-first", "claude-code-first"],
)
def test_a_record_type_that_is_a_list_or_an_object_is_a_located_error(
    tmp_path: Path, text: str, says: str
) -> None:
    # format detection and the Codex reader asked `type in <a set>`: a list or an object
    # is unhashable, and the import was a TypeError traceback
    db = tmp_path / "l.db"
    result = CliRunner().invoke(cli, ["--db", str(db), "import", "-"], input=text)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: stdin:") and says in result.output, result.output
    assert not db.exists() or Ledger.open(db).store.last_seq() == 0


def test_a_codex_reasoning_text_that_is_not_text_is_kept_raw_not_a_traceback() -> None:
    # a summary part {"type": "text", "text": 5}: "\n\n".join raised TypeError
    lines = codex_lines()
    (reasoning,) = [r for r in lines if r["payload"].get("type") == "reasoning"]
    reasoning["payload"]["summary"] = [{"type": "text", "text": 5}]
    sessions = parse_codex(jsonl(lines), path="rollout.jsonl")
    kept = [m for s in sessions for m in s.messages if "codex_reasoning_items" in m]
    assert kept and kept[0]["codex_reasoning_items"][0]["summary"] == [{"type": "text", "text": 5}]


def test_an_imported_usage_reports_model_is_checked_as_every_model(tmp_path: Path) -> None:
    """An assistant message's own model (an OpenAI-format file) became a usage report's
    model unchecked, though report_usage refuses the same one: now the import is
    refused naming it, and nothing is appended."""
    bad = "gpt\n\u202e" + "m" * 5_000
    chat = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yo", "model": bad, "usage": {"prompt_tokens": 5}},
        ],
    }
    code, output, seq = _import(tmp_path, json.dumps(chat).encode())
    assert code == 2 and "a usage report's model is too long" in output, output
    assert seq == 0


def test_an_imported_hermes_end_reason_is_checked_as_every_end_reason(tmp_path: Path) -> None:
    path = make_hermes_db(tmp_path / "state.db")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE sessions SET end_reason = ? WHERE id = 's3'", ("bye\n" + "r" * 50,))
    db.close()
    led = tmp_path / "l.db"
    result = CliRunner().invoke(cli, ["--db", str(led), "import", str(path)])
    assert result.exit_code == 2, result.output
    assert "end reason holds the control character U+000A" in result.output
    with Ledger.open(led) as ledger:
        assert ledger.store.last_seq() == 0


def test_an_imported_hermes_end_reason_that_is_no_string_is_refused(tmp_path: Path) -> None:
    """A state.db whose end_reason column has no type can hold a number: the import
    crashed with ``TypeError: object of type 'int' has no len()`` (session 33); now it is
    refused naming the end reason, and nothing is appended."""
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE sessions (id TEXT, end_reason);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT,"
        " content TEXT);"
    )
    db.execute("INSERT INTO sessions VALUES ('s', 5)")
    db.execute("INSERT INTO messages (session_id, role, content) VALUES ('s', 'user', 'hi')")
    db.commit()
    db.close()
    led = tmp_path / "l.db"
    result = CliRunner().invoke(cli, ["--db", str(led), "import", str(path)])
    assert result.exit_code == 2, result.output
    assert "end reason must be a string, got int" in result.output
    with Ledger.open(led) as ledger:
        assert ledger.store.last_seq() == 0
