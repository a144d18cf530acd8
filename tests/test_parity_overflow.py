"""Hermes field parity (issue 10): what local and Chinese servers say when the prompt is too long.

10. The overflow wordings of llama.cpp, Ollama, vLLM, LM Studio and Chinese providers
    are context overflow (compress and retry) whatever the status and body shape.
11. The window they state is parsed with every delimiter, kept only in
    1,024-10,000,000, and recorded as learned.
12. ``available_tokens : 5000`` is the max-tokens shape; list / number / null bodies
    never crash; the lowered output cap keeps 64 tokens of margin below what the
    window has left (a model's own output ceiling is used as stated).
13. An overflow retry counts as progress only below 95 % of the tokens or with rows
    removed (the preflight rule).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.errors import ContextOverflowError
from ctxledger.runtime.overflow import (
    OUTPUT_SAFETY_MARGIN,
    OverflowRecovery,
    ProviderErrorClass,
    classify_provider_error,
    made_progress,
    recovery_action,
)

WORDINGS = [
    "Context size has been exceeded.",  # llama.cpp server / Ollama
    "超过最大长度限制",
    "输入长度超过最大长度限制",
    "请求的输入超出了模型的最大上下文长度",
    "上下文长度超过限制",
    "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.",
    "The prompt (40000 tokens) exceeds the max_model_len of this model",
    "Input of 40000 tokens exceeds maximum model length",
    "the request exceeds the available context size, try increasing it",
    "slot 0: context shift is disabled and there is not enough space in the context",
    "slot context full, not enough space to process the prompt",
    "The context length of the model (8192 tokens) was exceeded",
    "Context length exceeded.",
]
STATUSES = [400, 413, 500, 502, 503, 529]


def _shapes(text: str) -> list[Any]:
    return [
        {"error": {"message": text, "type": "invalid_request_error"}},
        text,
        json.dumps({"error": {"message": text}}),
        [{"error": {"message": text, "code": 400}}],
        json.dumps([{"error": {"message": text}}]),
        {"error": text},
        {"object": "error", "message": text, "type": "BadRequestError", "code": 400},
        text.encode(),
    ]


@pytest.mark.parametrize("text", WORDINGS)
@pytest.mark.parametrize("status", STATUSES)
def test_real_server_wordings_are_context_overflow(text: str, status: int) -> None:
    for body in _shapes(text):
        cls = classify_provider_error(status, body)
        assert cls.is_context_overflow, (status, body, cls)
        action = recovery_action(cls, context_length=131_072, requested_max_tokens=4_096)
        assert action.action == "compress"


def test_a_chinese_rate_limit_is_not_an_overflow() -> None:
    assert classify_provider_error(429, "请求频率超过限制，请稍后再试").kind == "rate_limit"


STATED = [
    ("Maximum context size 65536 exceeded", 65_536),
    ("Maximum context size is 32768", 32_768),
    ("context window of 4096 tokens exceeded", 4_096),
    ("This model's maximum context length is 32768 tokens", 32_768),
    ("模型最大上下文长度为32768", 32_768),
]
for name in ("max_model_len", "maximum model length"):
    for delim in (" ", ": ", ":", " = ", "=", " (", " is ", " of "):
        close = ")" if "(" in delim else ""
        STATED.append((f"Prompt too long: exceeds the {name}{delim}32768{close}", 32_768))
        STATED.append((f"input exceeds {name}{delim}131,072{close} tokens", 131_072))


@pytest.mark.parametrize(("text", "window"), STATED)
def test_the_stated_window_is_parsed_with_every_delimiter(text: str, window: int) -> None:
    for body in (text, {"error": {"message": text}}, [text]):
        cls = classify_provider_error(400, body)
        assert cls.is_context_overflow and cls.context_limit == window, (body, cls)
        action = recovery_action(cls, context_length=1_000_000, requested_max_tokens=None)
        assert action.learn_context_length == window


def test_llama_cpp_numeric_fields_state_the_window() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 9_000,
            "n_ctx": 8_192,
        }
    }
    cls = classify_provider_error(400, body)
    assert (cls.kind, cls.context_limit, cls.prompt_tokens) == ("prompt_too_long", 8_192, 9_000)


@pytest.mark.parametrize("window", [512, 1_023, 10_000_001, 99_999_999])
def test_windows_outside_the_plausible_range_are_ignored(window: int) -> None:
    cls = classify_provider_error(400, f"exceeds the max_model_len {window}")
    assert cls.is_context_overflow and cls.context_limit is None
    assert (
        recovery_action(cls, context_length=8_192, requested_max_tokens=None).learn_context_length
        is None
    )


@given(st.integers(min_value=1_024, max_value=10_000_000))
def test_any_plausible_window_is_learned_when_smaller(window: int) -> None:
    cls = classify_provider_error(400, f"Maximum context size {window} exceeded")
    assert cls.context_limit == window
    learned = recovery_action(cls, context_length=window + 1, requested_max_tokens=None)
    assert learned.learn_context_length == window


# --- 12. classifier edge cases ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens too large; available_tokens : 5000",
        "available_tokens :5000",
        "available_tokens = 5000",
        "available_tokens: 5000",
    ],
)
def test_available_tokens_with_any_spacing_is_the_max_tokens_shape(text: str) -> None:
    cls = classify_provider_error(400, {"error": {"message": text}})
    assert (cls.kind, cls.available_output_tokens) == ("max_tokens_too_large", 5_000)
    action = recovery_action(cls, context_length=200_000, requested_max_tokens=8_000)
    assert (action.action, action.max_tokens) == ("lower_max_tokens", 5_000 - 64)


@pytest.mark.parametrize(
    ("text", "ceiling"),
    [
        (
            "max_tokens is too large: 9000. This model supports at most 4096 completion tokens.",
            4_096,
        ),
        (
            "<400> InternalError.Algo.InvalidParameter: Range of max_tokens should be [1, 8192]",
            8_192,
        ),
        ("`max_tokens` must be less than or equal to `8192`", 8_192),
    ],
)
def test_a_models_own_output_ceiling_is_used_exactly(text: str, ceiling: int) -> None:
    # the margin is for what the window has left after the prompt; a model's own
    # maximum output does not depend on the prompt and is exact
    cls = classify_provider_error(400, {"error": {"message": text}})
    assert cls.kind == "max_tokens_too_large" and cls.output_is_ceiling
    action = recovery_action(cls, context_length=200_000, requested_max_tokens=9_000)
    assert (action.action, action.max_tokens) == ("lower_max_tokens", ceiling)


def test_what_the_window_has_left_gets_the_margin() -> None:
    cls = classify_provider_error(
        400,
        "max_tokens: 9000 > context_window: 200000 - input_tokens: 195000 = available_tokens: 5000",
    )
    assert cls.kind == "max_tokens_too_large" and not cls.output_is_ceiling
    action = recovery_action(cls, context_length=200_000, requested_max_tokens=9_000)
    assert action.max_tokens == 5_000 - OUTPUT_SAFETY_MARGIN


@pytest.mark.parametrize(
    "body", [[], [1, 2, 3], [None], 42, 3.5, True, None, "null", "[]", "[1, 2]", "42", b"\xff\xfe"]
)
@pytest.mark.parametrize("status", [None, 400, 500])
def test_odd_bodies_never_crash_the_classifier(body: Any, status: int | None) -> None:
    cls = classify_provider_error(status, body)
    assert isinstance(cls, ProviderErrorClass)
    assert not cls.is_context_overflow


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    ),
    st.sampled_from([None, 400, 413, 429, 500, 503]),
)
def test_no_json_value_crashes_the_classifier(body: Any, status: int | None) -> None:
    classify_provider_error(status, body)
    classify_provider_error(status, json.dumps(body))


@given(st.integers(min_value=1, max_value=200_000), st.integers(min_value=2, max_value=300_000))
def test_the_lowered_cap_keeps_a_64_token_margin(available: int, requested: int) -> None:
    cls = ProviderErrorClass(
        kind="max_tokens_too_large", available_output_tokens=available, evidence="x"
    )
    action = recovery_action(cls, context_length=400_000, requested_max_tokens=requested)
    assert action.action == "lower_max_tokens"
    assert action.max_tokens is not None and 1 <= action.max_tokens < requested
    if available - OUTPUT_SAFETY_MARGIN < requested:
        assert action.max_tokens == max(1, available - OUTPUT_SAFETY_MARGIN)


# --- 13. material progress ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "rows", "progress"),
    [
        (100_000, 97_000, 0, False),  # a 3 % drop is no progress
        (100_000, 95_000, 0, False),
        (100_000, 94_999, 0, True),
        (100_000, 99_000, 1, True),  # rows removed always count
        (100_000, 101_000, 5, True),
        (100_000, 100_000, 0, False),
    ],
)
def test_material_progress(before: int, after: int, rows: int, progress: bool) -> None:
    assert made_progress(before, after, rows) is progress
    recovery = OverflowRecovery(max_attempts=3)
    recovery.start_attempt(ProviderErrorClass(kind="prompt_too_long", evidence="too long"))
    if progress:
        recovery.record_result(tokens_before=before, tokens_after=after, rows_removed=rows)
    else:
        with pytest.raises(ContextOverflowError, match="no progress"):
            recovery.record_result(tokens_before=before, tokens_after=after, rows_removed=rows)
