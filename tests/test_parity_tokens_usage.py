"""Hermes field parity (issue 10): hidden replay fields weigh tokens; a response
without usage is "no usage reported", not an error.

1. ``reasoning``, ``reasoning_content``, ``reasoning_details``, ``codex_*_items`` (any
   field that goes back to the provider) are counted, exactly and roughly, and the
   planner's tail budget sees them.
2. ``report_usage(sid, {})`` / a null block / an all-null block is recorded with shape
   ``none``, counted as a call without usage, and judged by the estimate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.ledger_helpers import deterministic_ledger
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.planner import plan, rough_counts
from ctxledger.errors import InvalidInput
from ctxledger.events import UsageReported
from ctxledger.tokens import count_message, count_messages, message_text, rough_message_tokens
from ctxledger.usage import NO_USAGE, CanonicalUsage, normalize_usage

REASONING = "Let me think about the failing import step by step. " * 480  # ~25,000 chars


def _reply(**extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "Done.", **extra}


HIDDEN_FIELDS: list[dict[str, Any]] = [
    {"reasoning": REASONING},
    {"reasoning_content": REASONING},
    {"reasoning_details": [{"type": "reasoning.text", "text": REASONING, "format": "x"}]},
    {"codex_reasoning_items": [{"type": "reasoning", "encrypted_content": REASONING}]},
    {"codex_message_items": [{"id": "msg_1", "content": [{"text": REASONING}]}]},
    {"provider_specific_fields": {"thinking_blocks": [{"thinking": REASONING}]}},
]


@pytest.mark.parametrize("extra", HIDDEN_FIELDS, ids=lambda e: next(iter(e)))
def test_a_25k_char_hidden_replay_field_weighs_thousands_of_tokens(extra: dict[str, Any]) -> None:
    bare, full = _reply(), _reply(**extra)
    assert count_message(full) - count_message(bare) > 4_000
    assert rough_message_tokens(full) - rough_message_tokens(bare) >= len(REASONING) // 4 - 1
    assert count_messages([full])[0] == count_message(full)


def test_what_is_sent_counts_but_a_reader_does_not_see_the_reasoning() -> None:
    message = _reply(reasoning_content="private chain of thought")
    assert "private chain of thought" in message_text(message)
    assert "private chain of thought" not in message_text(message, text_only=True)


def test_null_fields_and_cache_directives_add_nothing() -> None:
    bare = _reply()
    assert count_message({**bare, "reasoning_content": None}) == count_message(bare)
    assert count_message({**bare, "cache_control": {"type": "ephemeral"}}) == count_message(bare)


@given(
    st.dictionaries(
        st.from_regex(r"(reasoning|codex_[a-z]+_items|x_[a-z]{1,6})", fullmatch=True),
        st.one_of(st.text(min_size=1, max_size=200), st.lists(st.integers(), max_size=20)),
        min_size=1,
        max_size=3,
    )
)
def test_any_replayed_field_never_counts_less_than_without_it(extra: dict[str, Any]) -> None:
    bare = _reply()
    assert count_message({**bare, **extra}) >= count_message(bare)
    assert rough_message_tokens({**bare, **extra}) >= rough_message_tokens(bare)


def test_the_tail_budget_no_longer_keeps_a_reasoning_heavy_turn_for_free() -> None:
    # twenty turns, each reply carrying a long reasoning trace: with the trace counted,
    # the token-budgeted tail holds a handful of turns, not the whole session
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}]
    for i in range(20):
        messages.append({"role": "user", "content": f"step {i}"})
        messages.append(_reply(reasoning_content=REASONING[:8_000]))
    config = CompressionConfig(threshold_floor_tokens=0)
    counts = rough_counts(messages)
    assert sum(counts) > 20 * 1_900  # the traces are in the counts
    p = plan(messages, config, counts, context_length=64_000, force=True)
    assert p.action == "compress"
    kept = len(messages) - p.tail_start
    assert kept < 20  # before, every reply counted ~12 tokens and the tail kept everything


# --- no usage reported ------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", [{}, None, {"prompt_tokens": None, "completion_tokens": None}, {"usage": None}]
)
def test_a_response_without_usage_normalizes_to_no_usage_reported(raw: Any) -> None:
    assert normalize_usage(raw) == (NO_USAGE, CanonicalUsage())


def test_a_block_with_unknown_figures_is_still_an_error() -> None:
    with pytest.raises(InvalidInput, match="unrecognised usage shape"):
        normalize_usage({"tokens_used": 12})


@pytest.mark.parametrize("raw", [{}, None])
def test_ledger_records_no_usage_with_the_estimate_and_counts_the_call(
    tmp_path: Path, raw: Any
) -> None:
    ledger = deterministic_ledger(tmp_path / "l.db")
    sid = ledger.start_session(model="local-llama", context_length=32_768, system_prompt="agent")
    ledger.append_messages(sid, [{"role": "user", "content": "hello " * 200}])
    ledger.report_usage(sid, {"prompt_tokens": 900, "completion_tokens": 10})
    event = ledger.report_usage(sid, raw)
    assert isinstance(event, UsageReported)
    assert (event.shape, event.reported, event.raw) == ("none", False, {})
    estimate = ledger.transcript.total_tokens(sid)
    assert event.estimated_prompt_tokens == estimate == event.prompt_tokens
    usage = ledger.usage(sid)
    assert (usage.agent_calls, usage.agent_calls_without_usage) == (2, 1)
    # the last real count is unknown now: hygiene falls back to the estimate
    assert usage.last_prompt_tokens is None
    assert usage.to_dict()["agent_calls_without_usage"] == 1
    reopened = deterministic_ledger(tmp_path / "l.db")
    assert reopened.usage(sid).agent_calls_without_usage == 1
