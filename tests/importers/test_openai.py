"""OpenAI chat messages, and what the chat formats share."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers.import_fixtures import assert_valid, jsonl, openai_conversation

from ctxledger.errors import ImportFormatError
from ctxledger.importers.anthropic import parse_anthropic
from ctxledger.importers.common import synth_call_id
from ctxledger.importers.openai import parse_openai


@pytest.mark.parametrize(
    "shape", ["object", "list", "jsonl_messages", "jsonl_conversations", "list_of_conversations"]
)
def test_openai_shapes_give_the_same_session(shape: str) -> None:
    conv = openai_conversation()
    text = {
        "object": json.dumps(conv, indent=2),
        "list": json.dumps(conv["messages"]),
        "jsonl_messages": jsonl(conv["messages"]),
        "jsonl_conversations": jsonl([conv, {**conv, "id": "conv-2"}]),
        "list_of_conversations": json.dumps([conv], indent=1),
    }[shape]
    sessions = parse_openai(text, path="chat.json")
    assert_valid(sessions)
    s = sessions[0]
    assert s.system_prompt == "You are a coding agent."
    assert [m["role"] for m in s.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert s.messages[1]["reasoning_content"] == "Look at the file first."
    assert s.messages[3]["x_vendor"] == {"latency_ms": 12}
    assert "usage" not in s.messages[1]
    assert [(u.after_index, u.shape) for u in s.usages] == [(1, "openai_chat")]
    if shape in ("object", "jsonl_conversations", "list_of_conversations"):
        assert (
            s.key == "conv-1"
            and s.model == "gpt-4o"
            and s.tools[0]["function"]["name"] == "read_file"
        )
    if shape == "jsonl_conversations":
        assert [x.key for x in sessions] == ["conv-1", "conv-2"]


def test_openai_chat_completion_lines_attach_usage_and_model() -> None:
    lines = [
        {"role": "user", "content": "hi"},
        {
            "object": "chat.completion",
            "model": "gpt-4o-mini",
            "choices": [{"message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        },
    ]
    (s,) = parse_openai(jsonl(lines))
    assert s.model == "gpt-4o-mini"
    assert s.messages[-1] == {"role": "assistant", "content": "hello"}
    assert s.usages[0].after_index == 1 and s.usages[0].model == "gpt-4o-mini"


@pytest.mark.parametrize(
    ("parse", "line"),
    [
        (parse_openai, {"role": "user", "content": "hi"}),
        (parse_anthropic, {"role": "user", "content": "hi"}),
        (parse_openai, {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}),
    ],
)
def test_jsonl_of_one_line_is_one_message_not_a_document(parse: Any, line: dict[str, Any]) -> None:
    # session 29: a one-line JSONL file reads as a JSON document, which was refused as
    # "expected a list of messages or an object with 'messages', got object"
    (s,) = parse("\n" + json.dumps(line) + "\n", path="one.jsonl")
    assert [m["role"] for m in s.messages] == [line.get("role", "assistant")]
    assert s.messages[0]["content"] == "hi"


def test_a_one_line_object_that_is_no_message_still_names_what_is_expected() -> None:
    with pytest.raises(ImportFormatError, match=re.escape("one.jsonl:2: expected a message")):
        parse_openai("\n" + json.dumps({"surprise": 1}), path="one.jsonl")


def test_openai_legacy_function_call_and_missing_ids_get_deterministic_ids() -> None:
    msgs = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "weather", "arguments": "{}"},
        },
        {"role": "function", "name": "weather", "content": "sunny"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}],
        },
        {"role": "tool", "tool_call_id": synth_call_id("w.json", 3, 0), "content": "ok"},
    ]
    (s,) = parse_openai(json.dumps(msgs), path="w.json")
    assert s.messages[1]["tool_calls"][0]["id"] == synth_call_id("w.json", 1, 0)
    assert s.messages[2]["role"] == "tool" and s.messages[2]["tool_call_id"] == synth_call_id(
        "w.json", 1, 0
    )
    assert s.messages[3]["tool_calls"][0]["function"]["arguments"] == '{"x":1}'
    assert (
        synth_call_id("w.json", 1, 0).startswith("call_syn_")
        and len(synth_call_id("a", 1)) == 9 + 24
    )
    assert any("synthesized" in w for w in s.warnings)


def test_reused_tool_call_ids_are_renamed_with_their_results() -> None:
    def call(cid: str) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }

    msgs = [
        {"role": "user", "content": "go"},
        call("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        call("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": "two"},
    ]
    (s,) = parse_openai(json.dumps(msgs), path="tau.json")
    renamed = synth_call_id("tau.json", 3, 0)
    assert (
        s.messages[3]["tool_calls"][0]["id"] == renamed and s.messages[4]["tool_call_id"] == renamed
    )
    assert s.messages[2]["tool_call_id"] == "c1"
    assert s.warnings == ["re-used tool-call ids were replaced by synthesized ids"]
    with pytest.raises(ImportFormatError, match="second tool result"):
        parse_openai(jsonl([*msgs, {"role": "tool", "tool_call_id": "c1", "content": "three"}]))


def test_a_late_result_for_a_call_lost_across_a_user_turn_answers_it() -> None:
    """A(call_0) unanswered, a user turn, B(call_0): the first result is B's, a second
    one answers the lost A (README, orphan section; session 45 refused it); a third has
    no call left: refused, naming its line."""

    def call(text: str) -> dict[str, Any]:
        tool_call = {
            "id": "call_0",
            "type": "function",
            "function": {"name": "f", "arguments": "{}"},
        }
        return {"role": "assistant", "content": text, "tool_calls": [tool_call]}

    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
        call("A"),
        {"role": "user", "content": "again"},
        call("B"),
        {"role": "tool", "tool_call_id": "call_0", "content": "one"},
        {"role": "tool", "tool_call_id": "call_0", "content": "two"},
    ]
    (s,) = parse_openai(jsonl(msgs), path="lost.jsonl")
    assert s.messages[-2]["tool_call_id"] == s.messages[-3]["tool_calls"][0]["id"] != "call_0"
    first = next(m for m in s.messages if m.get("tool_calls"))
    assert s.messages[-1]["tool_call_id"] == "call_0" == first["tool_calls"][0]["id"]
    extra = {"role": "tool", "tool_call_id": "call_0", "content": "three"}  # a third: no call
    with pytest.raises(ImportFormatError, match="second tool result") as err:
        parse_openai(jsonl([*msgs, extra]), path="lost.jsonl")
    assert err.value.line == 8 and str(err.value).startswith("lost.jsonl:8: ")


def test_openai_tool_calls_without_arguments_get_empty_arguments() -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "function": {"name": "f"}},
                {"id": "b", "function": {"name": "g", "arguments": None}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
    ]
    (s,) = parse_openai(json.dumps(msgs))
    calls = s.messages[1]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", "{}"]
    assert all(c["type"] == "function" for c in calls)
    assert s.warnings == ["tool calls without arguments got empty arguments ('{}') (x2)"]


@pytest.mark.parametrize("parse", [parse_openai, parse_anthropic], ids=["openai", "anthropic"])
def test_chat_formats_read_conversations_the_same_way(parse: Any) -> None:
    conv = {
        "id": "c-1",
        "model": "m-1",
        "title": "T",
        "context_length": 9000,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        "usage": {"input_tokens": 3, "output_tokens": 1},
        "tools": [],
        "project": "p",
    }
    for text in (json.dumps(conv), jsonl([conv, {**conv, "id": "c-2"}])):
        s = parse(text, path="c.jsonl")[0]
        assert (s.key, s.model, s.title, s.context_length) == ("c-1", "m-1", "T", 9000)
        assert s.system_prompt == "Be brief." and s.extras == {"id": "c-1", "project": "p"}
        assert s.usages[0].after_index == 1 and s.usages[0].model == "m-1"
    messages = conv["messages"]
    assert isinstance(messages, list)
    with pytest.raises(
        ImportFormatError, match="expected a JSON object on this line, got int"
    ) as info:
        parse(jsonl([messages[0], 42]))
    assert info.value.line == 2
    with pytest.raises(ImportFormatError, match="expected a conversation") as info:
        parse(jsonl([conv, messages[0]]))
    assert info.value.line == 2
    with pytest.raises(ImportFormatError, match="whole conversation") as info:
        parse(jsonl([messages[0], conv]))
    assert info.value.line == 2
    with pytest.raises(ImportFormatError, match=r"expected a message \(with 'role'\)"):
        parse(json.dumps([messages[0], {"content": "no role"}]))


@pytest.mark.parametrize(
    "line", [{"foo": 1}, {}, {"choices": [{"message": {"role": "assistant", "content": "x"}}]}]
)
def test_a_one_line_object_that_is_no_anthropic_message_says_what_a_file_holds(
    line: dict[str, Any],
) -> None:
    # review of session 29: the one-line reading gave "unknown role None; Anthropic
    # messages are 'user' or 'assistant'" for any object, naming nothing that was wrong
    with pytest.raises(ImportFormatError, match="expected a list of messages or an object"):
        parse_anthropic(json.dumps(line), path="one.jsonl")


@pytest.mark.parametrize("parse", [parse_openai, parse_anthropic])
def test_text_handed_to_a_parser_may_start_with_a_byte_order_mark(parse: Any) -> None:
    (s,) = parse('\ufeff{"role": "user", "content": "hi"}\n', path="bom.jsonl")
    assert s.messages == [{"role": "user", "content": "hi"}]
    (s,) = parse('\ufeff[{"role": "user", "content": "hi"}]', path="bom.json")
    assert s.messages == [{"role": "user", "content": "hi"}]
