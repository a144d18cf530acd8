"""The middle serialized for a summarizer: labels, cuts, redaction (HERMES_SPEC §3 phase 3)."""

from __future__ import annotations

import json
from typing import Any

from ctxledger.compressor.markers import wrap_summary
from ctxledger.compressor.serialize import (
    ARGS_HEAD_CHARS,
    ARGS_MAX_CHARS,
    CONTENT_HEAD_CHARS,
    CONTENT_MAX_CHARS,
    CONTENT_TAIL_CHARS,
    cut_end,
    cut_middle,
    serialize_turns,
)


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_each_message_gets_a_role_label_and_tool_results_their_call_id_and_name() -> None:
    text = serialize_turns(
        [
            {"role": "user", "content": "run the tests"},
            {
                "role": "assistant",
                "content": "Running.",
                "tool_calls": [call("call_7", "terminal", '{"command": "pytest"}')],
            },
            {"role": "tool", "tool_call_id": "call_7", "content": "1 failed"},
            {"role": "tool", "tool_call_id": "call_unknown", "content": "orphan"},
        ]
    )
    assert text == (
        "[USER]\nrun the tests\n\n"
        '[ASSISTANT]\nRunning.\n[TOOL CALL call_7] terminal({"command": "pytest"})\n\n'
        "[TOOL RESULT call_7 · terminal]\n1 failed\n\n"
        "[TOOL RESULT call_unknown]\norphan"
    )


def test_long_content_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    body = "H" * CONTENT_HEAD_CHARS + "M" * 2_345 + "T" * CONTENT_TAIL_CHARS
    text = serialize_turns([{"role": "tool", "tool_call_id": "c", "content": body}])
    assert "[… 2,345 chars omitted …]" in text
    assert "H" * CONTENT_HEAD_CHARS in text and "T" * CONTENT_TAIL_CHARS in text
    assert "M" not in text
    assert cut_middle("short") == "short"


def test_long_tool_call_arguments_are_cut_to_1200_chars() -> None:
    arguments = json.dumps({"content": "x" * 5000})
    text = serialize_turns(
        [{"role": "assistant", "content": None, "tool_calls": [call("c", "write_file", arguments)]}]
    )
    omitted = len(arguments) - ARGS_HEAD_CHARS
    assert f"[… {omitted:,} chars omitted]" in text
    assert arguments[:ARGS_HEAD_CHARS] in text
    assert cut_end("abc") == "abc"


def test_a_content_up_to_6000_chars_is_sent_whole_and_a_longer_one_is_cut() -> None:
    # hermes-agent 0.19's lengths: a 5,501-6,000-char content was cut before (s29)
    whole = "H" * CONTENT_HEAD_CHARS + "M" * 500 + "T" * CONTENT_TAIL_CHARS
    assert len(whole) == CONTENT_MAX_CHARS == 6000
    assert whole in serialize_turns([{"role": "user", "content": whole}])
    longer = whole + "T"
    text = serialize_turns([{"role": "user", "content": longer}])
    assert longer not in text and "[… 501 chars omitted …]" in text


def test_arguments_up_to_1500_chars_are_sent_whole_and_longer_ones_are_cut() -> None:
    # hermes-agent 0.19's lengths: 1,201-1,500-char arguments were cut before (s29)
    whole = json.dumps({"content": "x" * (ARGS_MAX_CHARS - 15)})
    assert len(whole) == ARGS_MAX_CHARS == 1500
    message = {"role": "assistant", "content": None, "tool_calls": [call("c", "w", whole)]}
    assert f"w({whole})" in serialize_turns([message])
    longer = json.dumps({"content": "x" * (ARGS_MAX_CHARS - 14)})
    message["tool_calls"] = [call("c", "w", longer)]
    text = serialize_turns([message])
    assert longer not in text and f"[… {len(longer) - ARGS_HEAD_CHARS:,} chars omitted]" in text


def test_secrets_are_redacted_before_cutting() -> None:
    key = "sk-proj-" + "Q" * 40
    # the key straddles the head/tail cut: it must be gone, not half-visible
    body = "a" * (CONTENT_HEAD_CHARS - 10) + f" {key} " + "b" * 9000
    text = serialize_turns(
        [
            {"role": "tool", "tool_call_id": "c", "content": body},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("d", "terminal", json.dumps({"command": f"export KEY={key}"}))],
            },
        ]
    )
    assert "QQQQ" not in text
    assert "[REDACTED]" in text


def test_earlier_summary_is_labelled_and_unwrapped() -> None:
    text = serialize_turns([{"role": "user", "content": wrap_summary("## Goal\nship v2")}])
    assert text == "[EARLIER SUMMARY]\n## Goal\nship v2"


def test_repeated_call_ids_take_the_name_of_the_latest_call() -> None:
    text = serialize_turns(
        [
            {"role": "assistant", "content": None, "tool_calls": [call("dup", "read_file", "{}")]},
            {"role": "tool", "tool_call_id": "dup", "content": "first"},
            {"role": "assistant", "content": None, "tool_calls": [call("dup", "terminal", "{}")]},
            {"role": "tool", "tool_call_id": "dup", "content": "second"},
        ]
    )
    assert "[TOOL RESULT dup · read_file]\nfirst" in text
    assert "[TOOL RESULT dup · terminal]\nsecond" in text


def test_content_parts_are_joined_and_non_text_parts_counted() -> None:
    text = serialize_turns(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "x"}},
                ],
            }
        ]
    )
    assert text == "[USER]\nlook\n[1 non-text part(s)]"
