"""Anthropic Messages documents and API responses."""

from __future__ import annotations

import json

from helpers.import_fixtures import anthropic_conversation, assert_valid, jsonl

from ctxledger.importers.anthropic import parse_anthropic
from ctxledger.usage import normalize_usage


def test_anthropic_blocks_map_to_openai_shape() -> None:
    (s,) = parse_anthropic(json.dumps(anthropic_conversation(), indent=2), path="a.json")
    assert_valid([s])
    assert s.system_prompt == "Be careful." and s.extras["system_blocks"][0]["cache_control"]
    assert s.tools == [
        {
            "type": "function",
            "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}},
        }
    ]
    user, assistant, tool, user2, final = s.messages
    assert user["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AAAA"},
    }
    assert (
        assistant["content"] == "Running ls."
        and assistant["reasoning_content"] == "I should run ls."
    )
    assert assistant["thinking_blocks"][0]["signature"] == "sig=="
    assert assistant["tool_calls"][0] == {
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"cmd":"ls"}'},
    }
    assert assistant["id"] == "msg_01" and assistant["stop_reason"] == "tool_use"
    assert tool == {"role": "tool", "tool_call_id": "toolu_1", "content": "a.py\nb.py"}
    assert user2 == {"role": "user", "content": "Now count them."}
    assert final["content"] == [
        {"type": "text", "text": "Two files.", "cache_control": {"type": "ephemeral"}}
    ]
    (usage,) = s.usages
    assert usage.after_index == 1 and usage.shape == "anthropic"
    assert normalize_usage(usage.raw, usage.shape)[1].prompt == 480


def test_anthropic_tool_results_come_before_the_remaining_user_text() -> None:
    conv = anthropic_conversation()
    conv["messages"][2]["content"].reverse()  # text block first in the source
    (s,) = parse_anthropic(json.dumps(conv))
    assert [m["role"] for m in s.messages[2:4]] == ["tool", "user"]


def test_anthropic_api_responses_as_jsonl() -> None:
    lines = [
        {"role": "user", "content": "hi"},
        {
            "type": "message",
            "role": "assistant",
            "model": "claude-3",
            "content": [{"type": "text", "text": "yo"}],
            "usage": {"input_tokens": 3, "output_tokens": 1},
        },
    ]
    (s,) = parse_anthropic(jsonl(lines))
    assert s.messages[1] == {"role": "assistant", "content": "yo", "model": "claude-3"}
    assert s.usages[0].model == "claude-3" and s.model == "claude-3"
