"""The differences the differential check against hermes-agent 0.19.0 found and fixed.

``tests/test_parity_differential.py`` compares with the real Hermes; these pin each fix
on ctxledger alone, so they run without ``.venv-hermes`` too.
"""

from __future__ import annotations

import pytest

from ctxledger.compressor.prune import describe_tool_result
from ctxledger.compressor.serialize import strip_reasoning
from ctxledger.runtime.overflow import classify_provider_error, recovery_action
from ctxledger.usage import normalize_usage


def test_deepseek_cache_hits_are_cache_reads() -> None:
    raw = {"prompt_tokens": 1000, "completion_tokens": 50, "prompt_cache_hit_tokens": 600}
    _, usage = normalize_usage(raw)
    assert (usage.input, usage.cache_read, usage.prompt) == (400, 600, 1000)


def test_a_zero_in_the_nested_place_does_not_hide_a_top_level_figure() -> None:
    raw = {
        "prompt_tokens": 5000,
        "completion_tokens": 100,
        "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "cache_read_input_tokens": 3000,
        "cache_creation_input_tokens": 1500,
        "completion_tokens_details": {"reasoning_tokens": 40},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    _, usage = normalize_usage(raw)
    assert (usage.input, usage.cache_read, usage.cache_write, usage.reasoning) == (
        500,
        3000,
        1500,
        40,
    )


@pytest.mark.parametrize(
    ("reply", "stored"),
    [
        ("<thought>Gemma plans</thought>Summary", "Summary"),
        ("<REASONING_SCRATCHPAD>s</REASONING_SCRATCHPAD>Summary", "Summary"),
        # an opening tag inside a line is a mention: only the tag goes, not the rest
        ("Use <think> tags in prose.", "Use  tags in prose."),
        ("Summary\n<thinking>ran out of tokens", "Summary"),
        ("reasoning</think>Summary</think>", "Summary"),
    ],
)
def test_reply_reasoning_variants(reply: str, stored: str) -> None:
    assert strip_reasoning(reply, dangling=True) == stored


def test_lm_studio_prompt_in_characters_lowers_the_output_cap() -> None:
    """The input fits (77,409 chars ~ 25,803 tokens); compressing would resend the same
    65,536-token output request and fail again."""
    text = (
        "This model's maximum context length is 65536 tokens. However, you requested 65536 "
        "output tokens and your prompt contains 77409 characters"
    )
    verdict = classify_provider_error(400, {"error": {"message": text}})
    assert verdict.kind == "max_tokens_too_large"
    assert verdict.available_output_tokens == 65536 - (77409 + 2) // 3
    action = recovery_action(verdict, context_length=65536, requested_max_tokens=65536)
    assert action.action == "lower_max_tokens" and action.max_tokens == 39733 - 64


def test_max_model_len_is_colon() -> None:
    verdict = classify_provider_error(400, "The prompt exceeds the max_model_len is: 32768")
    assert verdict.is_context_overflow and verdict.context_limit == 32768


def test_blank_terminal_output_has_no_lines() -> None:
    line = describe_tool_result("terminal", '{"command": "true"}', "\n\n \n")
    assert "0 lines of output" in line
