"""Exporters and round trips through them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.import_fixtures import anthropic_conversation, openai_conversation, sharegpt_record

from ctxledger.errors import InvalidInput
from ctxledger.importers.anthropic import parse_anthropic
from ctxledger.importers.detect import IMPORTERS, detect_format
from ctxledger.importers.export import export_messages, export_session
from ctxledger.importers.openai import parse_openai
from ctxledger.importers.sharegpt import parse_sharegpt


@pytest.mark.parametrize(
    ("fmt", "parse", "text"),
    [
        ("openai", parse_openai, lambda: json.dumps(openai_conversation())),
        ("anthropic", parse_anthropic, lambda: json.dumps(anthropic_conversation())),
        ("sharegpt", parse_sharegpt, lambda: json.dumps(sharegpt_record())),
    ],
)
def test_import_export_import_gives_the_same_messages(fmt: str, parse: Any, text: Any) -> None:
    (first,) = parse(text(), path=f"in.{fmt}")
    exported = export_session(first, fmt)
    assert detect_format(exported) == fmt
    (second,) = parse(exported, path="elsewhere.json")
    assert second.messages == first.messages
    assert second.system_prompt == first.system_prompt
    (third,) = parse(export_messages(second.system_prompt, second.messages, fmt))
    assert third.messages == first.messages


@pytest.mark.parametrize("fmt", ["anthropic", "sharegpt"])
def test_openai_history_exports_to_other_formats_and_back(fmt: str) -> None:
    (s,) = parse_openai(json.dumps(openai_conversation()))
    back = IMPORTERS[fmt](export_session(s, fmt))[0]
    assert [m["role"] for m in back.messages] == [m["role"] for m in s.messages]
    assert [c["id"] for c in back.messages[1]["tool_calls"]] == ["call_a", "call_b"]
    assert back.messages[1]["reasoning_content"] == "Look at the file first."


def test_a_sharegpt_export_imports_back_to_the_same_export() -> None:
    """Session 39: export sharegpt -> import -> export was not a fixed point. A tool
    message without a ``name`` (OpenAI's shape) is exported without one, and the importer
    named it after its call; the second export then held names the first had not. A
    response's own name is kept, and plain-text tool output is still named after its call
    (``test_sharegpt_plain_tool_turn_answers_the_pending_call``)."""
    conversation = openai_conversation()
    conversation["messages"][4]["name"] = "read_file"  # one named, one not
    (s,) = parse_openai(json.dumps(conversation))
    first = export_session(s, "sharegpt")
    (back,) = parse_sharegpt(first)
    assert export_session(back, "sharegpt") == first
    tools = [m for m in back.messages if m["role"] == "tool"]
    assert tools == [m for m in s.messages if m["role"] == "tool"]
    assert [m.get("name") for m in tools] == [None, "read_file"]


def test_export_puts_the_system_message_first_and_rejects_unknown_formats() -> None:
    doc = json.loads(export_messages("sys", [{"role": "user", "content": "hi"}], "openai"))
    assert doc == {
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    }
    anth = json.loads(
        export_messages(
            "sys",
            [{"role": "user", "content": "hi"}, {"role": "system", "content": "note"}],
            "anthropic",
        )
    )
    assert anth["system"] == "sys" and anth["messages"][1]["ctxledger_role"] == "system"
    assert parse_anthropic(json.dumps(anth))[0].messages[1] == {"role": "system", "content": "note"}
    with pytest.raises(InvalidInput, match="unknown export format"):
        export_messages(None, [], "yaml")


def test_non_json_arguments_survive_an_anthropic_round_trip() -> None:
    msgs = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "not json"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "r"},
    ]
    (back,) = parse_anthropic(export_messages(None, msgs, "anthropic"))
    assert back.messages[1]["tool_calls"][0]["function"]["arguments"] == "not json"


@pytest.mark.parametrize("image", [5, None, {"url": None}, {"url": ["x"]}, ["u"]])
def test_an_image_part_the_validator_accepted_exports_to_anthropic_as_it_is(image: Any) -> None:
    """An ``image_url`` part whose ``image_url`` is not an object with a text url is
    stored as given (the validator checks only a part's ``type``); exporting it was an
    AttributeError traceback. It is kept unconverted, and a bare-string url converts."""
    odd = {"type": "image_url", "image_url": image}
    messages = [
        {"role": "user", "content": [odd, {"type": "image_url", "image_url": "https://x/a.png"}]}
    ]
    (user,) = json.loads(export_messages(None, messages, "anthropic"))["messages"]
    assert user["content"] == [
        odd,
        {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
    ]


@pytest.mark.parametrize("arguments", ['{"x": NaN}', '{"x": -Infinity}', '{"x": 1e999}'])
@pytest.mark.parametrize("fmt", ["anthropic", "sharegpt"])
def test_arguments_holding_nan_are_exported_as_the_text_sent(fmt: str, arguments: str) -> None:
    """Arguments are text, stored as sent; parsed for export, a NaN became null in the
    Anthropic file (msgspec) and the invalid literal NaN in the ShareGPT one (review
    G1). Such arguments are exported as their text, and the file is strict JSON."""
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    msgs = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
    ]
    text = export_messages(None, msgs, fmt)

    def strict(constant: str) -> None:
        raise AssertionError(f"the export holds {constant}")

    json.loads(text, parse_constant=strict)
    parse = parse_anthropic if fmt == "anthropic" else parse_sharegpt
    (back,) = parse(text)
    assert back.messages[1]["tool_calls"][0]["function"]["arguments"] == arguments


def test_developer_messages_export_to_openai_and_import_back_as_developer() -> None:
    """A developer message (leading or later) is a message role: the openai export of it
    imports back as the same messages, with no warning (it came back as system before)."""
    messages = [
        {"role": "developer", "content": "Use pytest."},
        {"role": "user", "content": "go"},
        {"role": "developer", "content": [{"type": "text", "text": "Prefer tabs."}]},
        {"role": "assistant", "content": "ok"},
    ]
    (back,) = parse_openai(export_messages(None, messages, "openai"))
    assert back.messages == messages and back.system_prompt is None
    assert back.warnings == []


def test_sharegpt_exports_a_developer_message_as_a_system_turn() -> None:
    messages = [{"role": "developer", "content": "Use pytest."}, {"role": "user", "content": "go"}]
    doc = json.loads(export_messages(None, messages, "sharegpt"))
    assert doc["conversations"] == [
        {"from": "system", "value": "Use pytest."},
        {"from": "human", "value": "go"},
    ]
