"""Exact (offline tiktoken) and rough token counts."""

from __future__ import annotations

from ctxledger import tokens


def test_exact_counts_are_offline_cl100k() -> None:
    assert tokens.count_text("hello world") == 2
    assert (
        tokens.count_message({"role": "user", "content": "hello world"})
        == 2 + tokens.MESSAGE_OVERHEAD
    )


def test_batch_counts_equal_single_counts() -> None:
    msgs = [{"role": "user", "content": f"message number {i} " * i} for i in range(20)]
    assert tokens.count_messages(msgs) == [tokens.count_message(m) for m in msgs]


def test_tool_calls_count_toward_the_message() -> None:
    plain = {"role": "assistant", "content": None}
    with_call = {
        **plain,
        "tool_calls": [
            {"id": "c", "function": {"name": "terminal", "arguments": '{"command": "pytest -x"}'}}
        ],
    }
    assert tokens.count_message(with_call) > tokens.count_message(plain)


def test_rough_estimate_is_hermes_formula() -> None:
    msg = {
        "role": "assistant",
        "content": "a" * 400,
        "tool_calls": [{"id": "c", "function": {"name": "t", "arguments": "b" * 80}}],
    }
    assert tokens.rough_message_tokens(msg) == 400 // 4 + 10 + 80 // 4
    assert (
        tokens.rough_message_tokens(
            {"role": "user", "content": [{"type": "text", "text": "abcd" * 3}]}
        )
        == 3 + 10
    )
