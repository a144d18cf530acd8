"""Claude Code session JSONL, with its compaction boundaries."""

from __future__ import annotations

import json

from helpers.import_fixtures import assert_valid, claude_code_lines, jsonl

from ctxledger.importers.claude_code import parse_claude_code


def test_claude_code_follows_the_chain_and_splits_at_the_compact_boundary() -> None:
    parent, child = parse_claude_code(jsonl(claude_code_lines()), path="cc.jsonl")
    assert_valid([parent, child])
    assert parent.key == "sess-cc#1" and parent.end_reason == "compression"
    assert child.key == "sess-cc" and child.parent_key == "sess-cc#1" and child.end_reason is None
    assert child.title == "Listing files"
    assert parent.extras == {
        "sessionId": "sess-cc",
        "cwd": "/repo",
        "version": "1.0.0",
        "gitBranch": "main",
    }
    _user, assistant, tool, _final = parent.messages
    assert (
        assistant["tool_calls"][0]["id"] == "toolu_9" and assistant["reasoning_content"] == "ls it"
    )
    assert assistant["id"] == "m1" and assistant["model"] == "claude-x"
    assert tool["content"] == [{"type": "text", "text": "a.py"}]
    assert [u.raw["output_tokens"] for u in parent.usages] == [
        9,
        5,
    ]  # merged message: its last usage, once
    assert [m["content"] for m in child.messages] == [
        "Summary: listed files, found a.py.",
        "Continuing.",
    ]
    assert "abandoned edit" not in json.dumps(parent.messages) and "subagent" not in json.dumps(
        child.messages
    )
    assert any("system prompt" in w for w in child.warnings)


def test_claude_code_summary_record_links_an_old_style_continuation() -> None:
    lines = [
        {
            "type": "user",
            "uuid": "a",
            "parentUuid": None,
            "sessionId": "s",
            "message": {"role": "user", "content": "one"},
        },
        {
            "type": "assistant",
            "uuid": "b",
            "parentUuid": "a",
            "message": {"id": "m", "role": "assistant", "content": "two"},
        },
        {"type": "summary", "summary": "earlier", "leafUuid": "b"},
        {
            "type": "user",
            "uuid": "c",
            "parentUuid": None,
            "message": {"role": "user", "content": "three"},
        },
    ]
    parent, child = parse_claude_code(jsonl(lines))
    assert [m["content"] for m in parent.messages] == ["one", "two"] and parent.title == "earlier"
    assert child.parent_key == parent.key and parent.end_reason == "compression"
