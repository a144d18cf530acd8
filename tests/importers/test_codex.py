"""Codex CLI rollouts."""

from __future__ import annotations

from helpers.import_fixtures import assert_valid, codex_lines, cx_item, cx_message, jsonl

from ctxledger.importers.codex import parse_codex
from ctxledger.usage import normalize_usage


def test_codex_rollout_maps_items_usage_and_compaction() -> None:
    parent, child = parse_codex(jsonl(codex_lines()), path="rollout.jsonl")
    assert_valid([parent, child])
    assert (parent.key, child.key, child.parent_key) == ("rollout-1#1", "rollout-1", "rollout-1#1")
    assert parent.end_reason == "compression" and parent.system_prompt == "You are Codex."
    assert parent.model == "gpt-5-codex" and parent.context_length == 272000
    _user, call, out, _answer = parent.messages
    assert call["tool_calls"][0]["id"] == "call_1" and call["reasoning_content"] == "Run pytest."
    assert call["codex_reasoning_items"][0]["encrypted_content"] == "gAAA"
    assert out == {"role": "tool", "tool_call_id": "call_1", "content": "2 passed"}
    (usage,) = parent.usages  # the duplicated token_count is reported once
    assert usage.after_index == 1 and usage.shape == "openai_responses"
    canonical = normalize_usage(usage.raw, usage.shape)[1]
    assert (canonical.input, canonical.cache_read, canonical.output, canonical.reasoning) == (
        100,
        800,
        60,
        40,
    )
    assert [m["content"] for m in child.messages[:3]] == ["run tests", "Summary so far", "thanks"]
    patch = child.messages[3]["tool_calls"][0]
    assert patch["function"] == {"name": "apply_patch", "arguments": '{"input":"*** Begin Patch"}'}
    assert any("event_msg" in w for w in parent.warnings)


def test_a_codex_developer_message_is_kept_as_developer() -> None:
    lines = [
        cx_item(cx_message("developer", "sandbox: read-only")),
        cx_item(cx_message("user", "hi")),
    ]
    (s,) = parse_codex(jsonl(lines), path="rollout.jsonl")
    assert [m["role"] for m in s.messages] == ["developer", "user"]
    assert not any("developer" in w for w in s.warnings)
