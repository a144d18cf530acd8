"""Exact (offline tiktoken) and rough token counts."""

from __future__ import annotations

from typing import Any

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


def test_a_big_batch_is_counted_in_chunks_with_the_same_counts(monkeypatch: Any) -> None:
    """Session 38: tiktoken's batch encode submits a Future per text up front and returns
    every token list at once (an import of 200,000 tiny messages peaked ~390 MiB in it);
    the texts now go in chunks, the counts unchanged."""
    real = tokens._encoding(tokens.DEFAULT_ENCODING)
    sizes: list[int] = []

    class Recording:
        def encode_ordinary_batch(self, texts: list[str], *, num_threads: int) -> Any:
            sizes.append(len(texts))
            return real.encode_ordinary_batch(texts, num_threads=num_threads)

    messages = [{"role": "user", "content": f"message number {i} " * (i % 7)} for i in range(150)]
    one_by_one = [tokens.count_message(m) for m in messages]
    monkeypatch.setattr(tokens, "_BATCH_CHUNK", 64)
    monkeypatch.setattr(tokens, "_encoding", lambda name: Recording())
    assert tokens.count_messages(messages) == one_by_one
    assert sizes == [64, 64, 22]
