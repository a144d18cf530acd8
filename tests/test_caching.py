"""Anthropic prompt caching, "system_and_3" (HERMES_SPEC §7)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.errors import InvalidInput
from ctxledger.runtime.caching import (
    apply_cache_markers,
    count_cache_markers,
    supports_prompt_caching,
)

text = st.text(min_size=0, max_size=20)
part = st.fixed_dictionaries({"type": st.just("text"), "text": text})
image = st.fixed_dictionaries(
    {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": text})}
)
content = st.one_of(
    text,
    st.none(),
    st.lists(st.one_of(part, image), min_size=0, max_size=3),
)


@st.composite
def message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
    msg: dict[str, Any] = {"role": role, "content": draw(content)}
    if role == "tool":
        msg["tool_call_id"] = draw(st.sampled_from(["call_1", "call_2"]))
    if role == "assistant" and draw(st.booleans()):
        msg["tool_calls"] = [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]
    return msg


@st.composite
def transcript(draw: st.DrawFn) -> list[dict[str, Any]]:
    # a third of the draws are long enough to fill every breakpoint without a system
    # prompt (all four roll with the end then): short lists rarely have four carriers
    body = draw(st.lists(message(), min_size=draw(st.sampled_from([0, 0, 6])), max_size=12))
    if draw(st.booleans()):
        body.insert(
            0,
            {
                "role": "system",
                "content": draw(st.one_of(text, st.lists(part, min_size=1, max_size=2))),
            },
        )
    return body


def markers_in(msg: dict[str, Any]) -> list[dict[str, Any]]:
    found = [msg["cache_control"]] if "cache_control" in msg else []
    if isinstance(msg.get("content"), list):
        found += [
            p["cache_control"]
            for p in msg["content"]
            if isinstance(p, dict) and "cache_control" in p
        ]
    return found


def can_carry(msg: dict[str, Any], native: bool) -> bool:
    """Whether a marker on `msg` counts on the route (native: any message; otherwise a
    non-empty text or a list ending in an object)."""
    body = msg.get("content")
    if native:
        return True
    if isinstance(body, str):
        return body != ""
    return isinstance(body, list) and bool(body) and isinstance(body[-1], dict)


def expected_targets(messages: list[dict[str, Any]], native: bool) -> set[int]:
    targets = {0} if messages and messages[0]["role"] == "system" else set()
    carriers = [i for i, m in enumerate(messages) if m["role"] != "system" and can_carry(m, native)]
    return targets | set(carriers[-(4 - len(targets)) :])


def gets_marker(msg: dict[str, Any], native: bool) -> bool:
    """A target gets a marker unless nowhere is valid for it (an empty list, a list
    ending in a non-object; on a routed request an empty tool or assistant message)."""
    body = msg.get("content")
    if (msg["role"] == "tool" and native) or body is None or body == "":
        return native or msg["role"] not in ("tool", "assistant")
    return isinstance(body, str) or (bool(body) and isinstance(body[-1], dict))


@settings(max_examples=300)  # pure and fast: wide enough for every case, every run
@given(transcript(), st.sampled_from(["5m", "1h"]), st.booleans())
def test_system_and_last_three_carriers_get_markers_and_nothing_else(
    messages: list[dict[str, Any]], ttl: Any, native: bool
) -> None:
    before = copy.deepcopy(messages)
    out = apply_cache_markers(messages, ttl=ttl, native_anthropic=native)

    assert messages == before, "input must never be mutated"
    assert len(out) == len(messages)
    assert count_cache_markers(out) <= 4
    expected_marker = {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}
    targets = expected_targets(messages, native)
    for index, (original, result) in enumerate(zip(messages, out, strict=True)):
        marks = markers_in(result)
        if index in targets and gets_marker(original, native):
            assert marks == [expected_marker]
            assert result is not original, "a marked message is a copy"
        else:
            assert marks == []
            assert result is original, "unmarked messages are not copied"


@given(transcript())
def test_marking_changes_only_the_marker_placement(messages: list[dict[str, Any]]) -> None:
    out = apply_cache_markers(messages, native_anthropic=True)
    for original, result in zip(messages, out, strict=True):
        stripped = {k: v for k, v in result.items() if k != "cache_control"}
        body = original.get("content")
        if isinstance(body, str) and body and isinstance(stripped["content"], list):
            assert stripped["content"] == [
                {
                    "type": "text",
                    "text": body,
                    "cache_control": stripped["content"][0]["cache_control"],
                }
            ]
            stripped["content"] = body
        elif isinstance(stripped.get("content"), list):
            stripped["content"] = [
                {k: v for k, v in p.items() if k != "cache_control"} for p in stripped["content"]
            ]
        assert stripped == original


def test_string_content_becomes_one_marked_text_part() -> None:
    out = apply_cache_markers(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )
    assert out[0]["content"] == [
        {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}
    ]
    assert out[1]["content"] == [
        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}
    ]


def test_list_content_marks_last_part_only() -> None:
    msg = {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    out = apply_cache_markers([msg], ttl="1h")
    assert "cache_control" not in out[0]["content"][0]
    assert out[0]["content"][1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_only_last_three_non_system_messages_are_marked() -> None:
    messages = [{"role": "system", "content": "s"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(6)
    ]
    out = apply_cache_markers(messages)
    marked = [i for i, m in enumerate(out) if markers_in(m)]
    assert marked == [0, 4, 5, 6]


def test_a_developer_message_is_marked_as_the_system_prompt_is() -> None:
    """OpenAI's developer role is the system prompt's newer name (session 37): a leading
    one takes the system breakpoint, a later one is not a rolling one."""
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(6)]
    messages = [{"role": "developer", "content": "d"}, *turns[:4]]
    messages += [{"role": "developer", "content": "later"}, *turns[4:]]
    out = apply_cache_markers(messages)
    assert [i for i, m in enumerate(out) if markers_in(m)] == [0, 4, 6, 7]


def test_tool_and_empty_messages_marked_on_message_only_for_native_anthropic() -> None:
    """Message-level markers only on the native route; elsewhere a breakpoint goes to
    the last messages that can carry one in a content part."""
    messages = [
        {"role": "user", "content": "run it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    native = apply_cache_markers(messages, native_anthropic=True)
    assert native[1]["cache_control"] == {"type": "ephemeral"} and native[1]["content"] is None
    assert native[2]["cache_control"] == {"type": "ephemeral"} and native[2]["content"] == "done"
    routed = apply_cache_markers(messages)
    # routed: no marker on the pure tool-call turn (passed over for the user message);
    # the tool result carries it on a text part, which OpenRouter honours (Hermes 0.19)
    assert routed[1] is messages[1]
    assert routed[2]["content"] == [
        {"type": "text", "text": "done", "cache_control": {"type": "ephemeral"}}
    ]
    assert routed[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert count_cache_markers(routed) == 2


def test_markers_are_independent_objects() -> None:
    out = apply_cache_markers(
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    )
    out[0]["content"][0]["cache_control"]["ttl"] = "1h"
    assert out[1]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_empty_list_and_bad_ttl() -> None:
    assert apply_cache_markers([]) == []
    with pytest.raises(InvalidInput):
        apply_cache_markers([{"role": "user", "content": "x"}], ttl="10m")  # type: ignore[arg-type]


def test_large_transcript_copies_only_marked_messages() -> None:
    messages = [
        {"role": "user" if i % 2 else "assistant", "content": "x" * 50} for i in range(20_000)
    ]
    out = apply_cache_markers(messages)
    copied = [i for i, (a, b) in enumerate(zip(messages, out, strict=True)) if a is not b]
    # no system prompt: all four breakpoints roll with the end (Hermes 0.19)
    assert copied == [19_996, 19_997, 19_998, 19_999]


@pytest.mark.parametrize(
    ("model", "provider", "expected"),
    [
        ("claude-sonnet-4-5", "anthropic", True),
        ("claude-3-5-haiku-20241022", "anthropic", True),
        ("anthropic/claude-opus-4.1", "openrouter", True),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", "bedrock", True),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", "bedrock", True),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock", True),
        ("anthropic.claude-3-haiku-20240307-v1:0", "aws", True),
        # Bedrock runs a bare id on its Converse API, uncached (hermes-agent 0.19)
        ("claude-sonnet-4-5", "bedrock", False),
        ("xyz.anthropic.claude-3-5-sonnet-20240620-v1:0", "bedrock", False),
        ("claude-sonnet-4-5", None, True),
        ("anthropic/claude-sonnet-4", None, True),
        ("eu.anthropic.claude-3-7-sonnet-20250219-v1:0", None, True),
        ("openai/gpt-4o", "openrouter", False),
        ("claude-sonnet-4-5", "openrouter", False),
        ("gpt-4o", "openai", False),
        ("claude-sonnet-4-5", "openai", False),
        ("claude-3-5-sonnet", "together", False),
        ("qwen2.5-72b", None, False),
        ("claude-2.1", "anthropic", False),
        ("claude-instant-1.2", "anthropic", False),
        # Bedrock spells Claude 2 / Instant "claude-v2" (review of session 32: cached)
        ("anthropic.claude-v2:1", "bedrock", False),
        ("anthropic.claude-v2", "bedrock", False),
        ("us.anthropic.claude-v2", "bedrock", False),
        ("anthropic.claude-instant-v1", "aws", False),
        ("anthropic.claude-v2:1", None, False),
        ("claude-2", "anthropic", False),
        # a later family whose id holds a "2" is still cached
        ("anthropic.claude-3-haiku-20240307-v1:0", "bedrock", True),
        ("claude-sonnet-4-20250514", "anthropic", True),
    ],
)
def test_supports_prompt_caching(model: str, provider: str | None, expected: bool) -> None:
    assert supports_prompt_caching(model, provider) is expected
