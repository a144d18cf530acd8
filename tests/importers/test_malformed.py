"""Malformed input names its line and imports nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers.import_fixtures import (
    claude_code_lines,
    codex_lines,
    jsonl,
    make_hermes_db,
    openai_conversation,
    sharegpt_record,
)

from ctxledger.errors import ImportFormatError
from ctxledger.importers.anthropic import parse_anthropic
from ctxledger.importers.claude_code import parse_claude_code
from ctxledger.importers.codex import parse_codex
from ctxledger.importers.common import locate_line
from ctxledger.importers.detect import detect_format
from ctxledger.importers.hermes_db import parse_hermes_db
from ctxledger.importers.openai import parse_openai
from ctxledger.importers.sharegpt import parse_sharegpt


def _lines_with(records: list[Any], at: int, bad: str) -> str:
    lines = [json.dumps(r) for r in records]
    lines.insert(at, bad)
    return "\n".join(lines) + "\n"


MALFORMED = [
    (
        "openai bad json",
        parse_openai,
        lambda: _lines_with(openai_conversation()["messages"], 3, '{"role": "user", '),
        4,
        "invalid JSON",
    ),
    (
        "openai wrong record",
        parse_openai,
        lambda: _lines_with(openai_conversation()["messages"], 2, "42"),
        3,
        "got int",
    ),
    (
        "openai orphan tool result",
        parse_openai,
        lambda: json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "tool", "tool_call_id": "nope", "content": "r"},
                ]
            },
            indent=2,
        ),
        7,
        "no earlier assistant",
    ),
    (
        "openai mixed kinds",
        parse_openai,
        lambda: jsonl([{"role": "user", "content": "x"}, {"messages": []}]),
        2,
        "whole conversation",
    ),
    (
        "anthropic orphan tool_result",
        parse_anthropic,
        lambda: jsonl(
            [
                {"role": "user", "content": "a"},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "r"}],
                },
            ]
        ),
        2,
        "no earlier assistant",
    ),
    (
        "anthropic system role",
        parse_anthropic,
        lambda: jsonl([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]),
        2,
        "unknown role",
    ),
    (
        "anthropic pretty bad json",
        parse_anthropic,
        lambda: '{\n  "messages": [\n    {"role": "user",, "content": "a"}\n  ]\n}',
        3,
        "invalid JSON",
    ),
    (
        "sharegpt unknown from",
        parse_sharegpt,
        lambda: jsonl([sharegpt_record(), {"conversations": [{"from": "narrator", "value": "x"}]}]),
        2,
        "unknown 'from'",
    ),
    (
        "sharegpt orphan tool turn",
        parse_sharegpt,
        lambda: json.dumps(
            {"conversations": [{"from": "human", "value": "x"}, {"from": "tool", "value": "r"}]},
            indent=2,
        ),
        7,
        "no pending",
    ),
    (
        "sharegpt bad tool_call",
        parse_sharegpt,
        lambda: jsonl(
            [{"conversations": [{"from": "gpt", "value": "<tool_call>{oops</tool_call>"}]}]
        ),
        1,
        "<tool_call>",
    ),
    (
        "claude code no type",
        parse_claude_code,
        lambda: _lines_with(claude_code_lines(), 4, '{"uuid": "q"}'),
        5,
        "string 'type'",
    ),
    (
        "claude code bad json",
        parse_claude_code,
        lambda: _lines_with(claude_code_lines(), 6, "{nope"),
        7,
        "invalid JSON",
    ),
    (
        "codex payload not object",
        parse_codex,
        lambda: _lines_with(codex_lines(), 5, '{"type": "response_item", "payload": 3}'),
        6,
        "payload must be an object",
    ),
    (
        "codex orphan output",
        parse_codex,
        lambda: jsonl(
            [
                *codex_lines()[:3],
                {
                    "type": "response_item",
                    "payload": {"type": "function_call_output", "call_id": "zz", "output": "x"},
                },
            ]
        ),
        4,
        "no earlier assistant",
    ),
]


@pytest.mark.parametrize(
    ("name", "parse", "text", "line", "message"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_input_names_its_line(
    name: str, parse: Any, text: Any, line: int, message: str
) -> None:
    with pytest.raises(ImportFormatError, match=message) as info:
        parse(text(), path="bad.file")
    assert info.value.line == line
    assert info.value.path == "bad.file"
    assert str(info.value).startswith(f"bad.file:{line}:")


def test_malformed_hermes_rows_are_rejected(tmp_path: Path) -> None:
    path = make_hermes_db(tmp_path / "state.db")
    db = sqlite3.connect(path)
    db.execute(
        "UPDATE messages SET tool_calls = '[{broken' WHERE tool_calls IS NOT NULL AND session_id = 's2'"
    )
    db.commit()
    db.close()
    with pytest.raises(
        ImportFormatError, match="'s2', messages row 6: tool_calls is not valid JSON"
    ):
        parse_hermes_db(path)
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 10)
    with pytest.raises(ImportFormatError, match="SQLite"):
        parse_hermes_db(tmp_path / "junk.db")


def test_detection_prefers_openai_markers_over_a_top_level_system_key() -> None:
    conv = {
        "system": "s",
        "messages": [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        ],
    }
    assert detect_format(json.dumps(conv)) == "openai"
    assert (
        detect_format(json.dumps({"system": "s", "messages": [{"role": "user", "content": "x"}]}))
        == "anthropic"
    )
    assert parse_openai(json.dumps(conv))[0].system_prompt == "s"


def test_empty_and_unrecognisable_inputs() -> None:
    with pytest.raises(ImportFormatError, match="empty"):
        parse_openai("  \n")
    with pytest.raises(ImportFormatError, match="cannot tell the format"):
        detect_format('{"hello": "world"}')


def test_locate_line_finds_nested_values() -> None:
    text = '{\n "a": [\n  1,\n  {"b":\n   "x"}\n ],\n "c": 2\n}'
    assert locate_line(text, ("a", 1)) == 4
    assert locate_line(text, ("a", 1, "b")) == 5
    assert locate_line(text, ("c",)) == 7
    assert locate_line(text, ("missing",)) is None


def test_one_record_after_blank_lines_is_named_by_its_line() -> None:
    """A JSON document read as one JSONL record is told by its first non-blank line (s41:
    found without a list of every line), also when it spans several lines."""
    from ctxledger.importers.common import read_json_lines

    record = {"type": "x"}
    assert list(read_json_lines("\n \n" + json.dumps(record) + "\n\n", None, "records")) == [
        (3, record)
    ]
    with pytest.raises(ImportFormatError, match="one multi-line JSON document") as err:
        read_json_lines("\n\n" + json.dumps(record, indent=1), None, "records")
    assert err.value.line == 3
    bad = {"messages": [{"role": "user", "content": "a"}, {"role": "bogus", "content": "x"}]}
    with pytest.raises(ImportFormatError, match="unknown role") as err:
        parse_openai("\n \n" + json.dumps(bad) + "\n")
    assert err.value.line == 3
