"""ShareGPT trajectories."""

from __future__ import annotations

import json

from helpers.import_fixtures import assert_valid, jsonl, sharegpt_record

from ctxledger.importers.common import synth_call_id
from ctxledger.importers.sharegpt import parse_sharegpt


def test_sharegpt_tool_calls_and_responses() -> None:
    (s,) = parse_sharegpt(json.dumps(sharegpt_record()), path="t.json")
    assert_valid([s])
    assert s.key == "traj-7" and s.extras == {"id": "traj-7", "source": "unit"}
    assert s.system_prompt == "You are Hermes."
    gpt = s.messages[1]
    assert gpt["content"] == "OK." and gpt["reasoning_content"] == "Tests first."
    first, second = gpt["tool_calls"]
    assert first["id"] == "call_real"  # learned from the response that answered it
    assert second["id"] == synth_call_id("traj-7", 2, 1)
    assert s.messages[2] == {
        "role": "tool",
        "tool_call_id": "call_real",
        "content": "3 passed",
        "name": "terminal",
    }
    assert (
        s.messages[3]["content"] == '{"lines":3}' and s.messages[3]["tool_call_id"] == second["id"]
    )
    assert s.messages[4] == {"role": "assistant", "content": "All green.", "weight": 1}


def test_sharegpt_plain_tool_turn_answers_the_pending_call() -> None:
    rec = {
        "conversations": [
            {"from": "human", "value": "go"},
            {"from": "gpt", "value": '<tool_call>{"name": "ls", "arguments": {}}</tool_call>'},
            {"from": "tool", "value": "a b c"},
        ]
    }
    (s,) = parse_sharegpt(jsonl([rec]), path="x.jsonl")
    assert s.messages[2]["content"] == "a b c" and s.messages[2]["name"] == "ls"
    assert s.messages[1]["content"] is None
