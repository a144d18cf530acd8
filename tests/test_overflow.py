"""Provider error classification and overflow recovery (HERMES_SPEC §2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxledger.compressor.config import CompressionConfig
from ctxledger.errors import ContextOverflowError, InvalidInput
from ctxledger.runtime.overflow import (
    OverflowRecovery,
    ProviderErrorClass,
    classify_provider_error,
    recovery_action,
)


def openai_error(
    message: str, code: str | None = None, type_: str = "invalid_request_error"
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def anthropic_error(message: str, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def openrouter_error(upstream: str, provider: str = "DeepInfra") -> dict[str, Any]:
    raw = json.dumps({"error": {"message": upstream, "code": 400}})
    return {
        "error": {
            "message": "Provider returned error",
            "code": 400,
            "metadata": {"raw": raw, "provider_name": provider},
        }
    }


# (id, status, body, kind, context_limit, available_output_tokens, prompt_tokens)
CASES: list[tuple[str, int | None, Any, str, int | None, int | None, int | None]] = [
    (
        "openai_context_length_exceeded",
        400,
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130000 tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
        ),
        "prompt_too_long",
        128_000,
        None,
        130_000,
    ),
    (
        "openai_body_as_json_text",
        400,
        json.dumps(
            openai_error(
                "This model's maximum context length is 16385 tokens. However, your messages "
                "resulted in 17012 tokens. Please reduce the length of the messages.",
                code="context_length_exceeded",
            )
        ),
        "prompt_too_long",
        16_385,
        None,
        17_012,
    ),
    (
        "openai_max_tokens_too_large",
        400,
        openai_error(
            "max_tokens is too large: 5000. This model supports at most 4096 completion tokens, "
            "whereas you provided 5000."
        ),
        "max_tokens_too_large",
        None,
        4_096,
        None,
    ),
    (
        "openai_legacy_completion_split_fits",
        400,
        openai_error(
            "This model's maximum context length is 4097 tokens. However, you requested 4200 "
            "tokens (3200 in the messages, 1000 in the completion). Please reduce the length "
            "of the messages or completion."
        ),
        "max_tokens_too_large",
        4_097,
        897,
        3_200,
    ),
    (
        "anthropic_prompt_too_long",
        400,
        anthropic_error("prompt is too long: 210000 tokens > 200000 maximum"),
        "prompt_too_long",
        200_000,
        None,
        210_000,
    ),
    (
        "anthropic_input_plus_max_tokens",
        400,
        anthropic_error(
            "input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000, "
            "decrease input length or `max_tokens` and try again"
        ),
        "max_tokens_too_large",
        200_000,
        10_000,
        190_000,
    ),
    (
        "anthropic_input_alone_too_long",
        400,
        anthropic_error(
            "input length and `max_tokens` exceed context limit: 201000 + 8000 > 200000, "
            "decrease input length or `max_tokens` and try again"
        ),
        "prompt_too_long",
        200_000,
        None,
        201_000,
    ),
    (
        "anthropic_available_tokens",
        400,
        anthropic_error(
            "max_tokens: 64000 > context_window: 200000 - input_tokens: 180000 = available_tokens: 20000"
        ),
        "max_tokens_too_large",
        200_000,
        20_000,
        180_000,
    ),
    (
        "vllm_messages_fit_completion_does_not",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 32768 tokens. However, you requested "
            "33000 tokens (31000 in the messages, 2000 in the completion). Please reduce the "
            "length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        "max_tokens_too_large",
        32_768,
        1_768,
        31_000,
    ),
    (
        "vllm_messages_alone_too_long",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 32768 tokens. However, you requested "
            "35000 tokens (33000 in the messages, 2000 in the completion). Please reduce the "
            "length of the messages or completion.",
            "type": "BadRequestError",
            "code": 400,
        },
        "prompt_too_long",
        32_768,
        None,
        33_000,
    ),
    (
        "vllm_output_tokens_and_prompt_contains",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 8192 tokens. However, you requested "
            "4000 output tokens and your prompt contains at least 6000 input tokens, for a total "
            "of at least 10000 tokens. Please reduce the length of the input prompt or the number "
            "of requested output tokens.",
            "type": "BadRequestError",
            "code": 400,
        },
        "max_tokens_too_large",
        8_192,
        2_192,
        6_000,
    ),
    (
        "openrouter_wrapped_upstream",
        400,
        openrouter_error(
            "This endpoint's maximum context length is 131072 tokens. However, you requested "
            "about 140000 tokens (135000 of text input, 5000 in the output). Please reduce the "
            "length of either one."
        ),
        "prompt_too_long",
        131_072,
        None,
        135_000,
    ),
    (
        "openrouter_output_only",
        400,
        openrouter_error(
            "This endpoint's maximum context length is 131072 tokens. However, you requested "
            "about 140000 tokens (100000 of text input, 40000 in the output). Please reduce the "
            "length of either one."
        ),
        "max_tokens_too_large",
        131_072,
        31_072,
        100_000,
    ),
    (
        "lm_studio_loaded_context",
        400,
        b'{"error":"Trying to keep the first 5000 tokens when context the overflows. However, '
        b"the model is loaded with context length of only 4096 tokens, which is not enough. "
        b'Try to load the model with a larger context length, or provide a shorter input"}',
        "prompt_too_long",
        4_096,
        None,
        None,
    ),
    (
        "dashscope_input_range",
        400,
        {
            "code": "InvalidParameter",
            "message": "<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 30720]",
            "request_id": "5e1b2a",
        },
        "prompt_too_long",
        30_720,
        None,
        None,
    ),
    (
        "dashscope_max_tokens_range",
        400,
        {
            "code": "InvalidParameter",
            "message": "<400> InternalError.Algo.InvalidParameter: Range of max_tokens should be [1, 8192]",
        },
        "max_tokens_too_large",
        None,
        8_192,
        None,
    ),
    (
        "available_tokens_plain_text",
        400,
        "Requested max_tokens exceeds what is left of the window (available_tokens: 1536)",
        "max_tokens_too_large",
        None,
        1_536,
        None,
    ),
    (
        "prompt_contains_input_tokens_plain_text",
        400,
        "max_tokens too large: maximum context length is 16384 tokens and the prompt contains 15000 input tokens",
        "max_tokens_too_large",
        16_384,
        1_384,
        15_000,
    ),
    (
        "thousands_separators",
        400,
        "This model's maximum context length is 131,072 tokens. However, your messages resulted in 140,500 tokens.",
        "prompt_too_long",
        131_072,
        None,
        140_500,
    ),
    (
        "llama_cpp_context_size",
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            }
        },
        "prompt_too_long",
        None,
        None,
        None,
    ),
    (
        "llama_cpp_with_numbers",
        400,
        "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it",
        "prompt_too_long",
        8_192,
        None,
        9_000,
    ),
    (
        "gemini_input_token_count",
        400,
        {
            "error": {
                "code": 400,
                "status": "INVALID_ARGUMENT",
                "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            }
        },
        "prompt_too_long",
        1_048_576,
        None,
        1_200_000,
    ),
    (
        "mistral_prompt_contains_tokens",
        400,
        {
            "object": "error",
            "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
            "type": "invalid_request_message_error",
        },
        "prompt_too_long",
        32_768,
        None,
        40_000,
    ),
    (
        "tgi_inputs_plus_max_new_tokens",
        422,
        {
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32768. Given: 30000 `inputs` tokens and 4000 `max_new_tokens`",
            "error_type": "validation",
        },
        "max_tokens_too_large",
        32_768,
        2_768,
        30_000,
    ),
    (
        "groq_max_tokens_bound",
        400,
        openai_error(
            "`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` is less than the `context_window` for this model"
        ),
        "max_tokens_too_large",
        None,
        8_192,
        None,
    ),
    (
        "http_413_html",
        413,
        "<html><head><title>413 Request Entity Too Large</title></head><body>nginx</body></html>",
        "payload_too_large",
        None,
        None,
        None,
    ),
    (
        "anthropic_413_request_too_large",
        413,
        anthropic_error(
            "Request exceeds the maximum allowed number of bytes.", type_="request_too_large"
        ),
        "payload_too_large",
        None,
        None,
        None,
    ),
    (
        "payload_too_large_without_status",
        None,
        "Payload Too Large",
        "payload_too_large",
        None,
        None,
        None,
    ),
    (
        "out_of_range_small_limit_not_learned",
        400,
        "This model's maximum context length is 512 tokens. However, your messages resulted in 900 tokens.",
        "prompt_too_long",
        None,
        None,
        900,
    ),
    (
        "out_of_range_huge_limit_not_learned",
        400,
        "This model's maximum context length is 99999999999 tokens.",
        "prompt_too_long",
        None,
        None,
        None,
    ),
    (
        "rate_limit_429_tpm",
        429,
        openai_error(
            "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): "
            "Limit 30000, Requested 45000. The input or output tokens must be reduced.",
            code="rate_limit_exceeded",
            type_="tokens",
        ),
        "rate_limit",
        None,
        None,
        None,
    ),
    (
        "rate_limit_anthropic",
        429,
        anthropic_error(
            "Number of request tokens has exceeded your per-minute rate limit",
            type_="rate_limit_error",
        ),
        "rate_limit",
        None,
        None,
        None,
    ),
    ("server_500", 500, "Internal Server Error", "server", None, None, None),
    (
        "anthropic_overloaded_529",
        529,
        anthropic_error("Overloaded", type_="overloaded_error"),
        "server",
        None,
        None,
        None,
    ),
    (
        "auth_401",
        401,
        openai_error(
            "Incorrect API key provided: sk-abc***. You can find your API key at ...",
            code="invalid_api_key",
        ),
        "auth",
        None,
        None,
        None,
    ),
    (
        "auth_403",
        403,
        anthropic_error("Forbidden", type_="permission_error"),
        "auth",
        None,
        None,
        None,
    ),
    (
        "openai_code_without_numbers",
        400,
        openai_error("", code="context_length_exceeded"),
        "prompt_too_long",
        None,
        None,
        None,
    ),
    ("plain_bad_request", 400, "Bad Request", "other", None, None, None),
    ("nothing_at_all", None, None, "other", None, None, None),
]


@pytest.mark.parametrize(
    ("status", "body", "kind", "limit", "available", "prompt"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_classify_provider_error(
    status: int | None,
    body: Any,
    kind: str,
    limit: int | None,
    available: int | None,
    prompt: int | None,
) -> None:
    cls = classify_provider_error(status, body)
    assert (cls.kind, cls.context_limit, cls.available_output_tokens, cls.prompt_tokens) == (
        kind,
        limit,
        available,
        prompt,
    )
    assert cls.status == status
    if kind != "other":
        assert cls.evidence, "every decision names the excerpt that made it"


def test_evidence_is_the_matched_excerpt() -> None:
    cls = classify_provider_error(
        400, anthropic_error("prompt is too long: 210000 tokens > 200000 maximum")
    )
    assert cls.evidence == "prompt is too long: 210000 tokens > 200000 maximum"


def test_odd_bodies_never_raise() -> None:
    odd: list[Any] = [
        "",
        "{not json",
        b"\xff\xfe",
        {"error": None},
        {"error": [1, {"message": 3}]},
        "[]",
        {"x": object()},
    ]
    for body in odd:
        assert classify_provider_error(400, body).kind == "other"


def wrap(text: str, levels: int) -> str:
    body = text
    for _ in range(levels):
        body = json.dumps({"error": {"message": body}})
    return body


def test_proxy_chains_of_json_in_strings_are_unwrapped() -> None:
    cls = classify_provider_error(400, wrap("maximum context length is 8192 tokens", 3))
    assert (cls.kind, cls.context_limit) == ("prompt_too_long", 8_192)


def test_absurdly_deep_nesting_is_bounded_not_crashing() -> None:
    # each level doubles the escaping; past the depth and size caps nothing is read
    assert (
        classify_provider_error(400, wrap("maximum context length is 8192 tokens", 20)).kind
        == "other"
    )


# --- recovery_action ---------------------------------------------------------------------


def test_max_tokens_error_lowers_output_cap_without_compressing() -> None:
    cls = classify_provider_error(
        400,
        anthropic_error(
            "input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000, "
            "decrease input length or `max_tokens` and try again"
        ),
    )
    action = recovery_action(cls, context_length=200_000, requested_max_tokens=20_000)
    assert action.action == "lower_max_tokens"
    assert action.max_tokens == 10_000 - 64  # a safety margin below what is left (issue 10)
    assert action.learn_context_length is None


def test_max_tokens_error_never_shrinks_window_even_when_limit_stated() -> None:
    cls = classify_provider_error(
        400,
        "This model's maximum context length is 32768 tokens. However, you requested 33000 "
        "tokens (31000 in the messages, 2000 in the completion).",
    )
    action = recovery_action(cls, context_length=131_072, requested_max_tokens=2_000)
    assert (action.action, action.max_tokens, action.learn_context_length) == (
        "lower_max_tokens",
        1_768 - 64,
        None,
    )


def test_max_tokens_error_without_budget_halves_the_request() -> None:
    cls = ProviderErrorClass(kind="max_tokens_too_large", evidence="max_tokens")
    assert (
        recovery_action(cls, context_length=8_192, requested_max_tokens=4_000).max_tokens == 2_000
    )
    assert recovery_action(cls, context_length=8_192, requested_max_tokens=1).action == "fail"
    assert recovery_action(cls, context_length=8_192, requested_max_tokens=None).action == "fail"


def test_stated_budget_not_below_request_falls_back_to_halving() -> None:
    cls = ProviderErrorClass(kind="max_tokens_too_large", available_output_tokens=9_000)
    action = recovery_action(cls, context_length=32_000, requested_max_tokens=8_000)
    assert action.max_tokens == 4_000


def test_prompt_too_long_learns_smaller_window_then_compresses() -> None:
    cls = classify_provider_error(
        400, openrouter_error("This endpoint's maximum context length is 131072 tokens.")
    )
    action = recovery_action(cls, context_length=200_000, requested_max_tokens=4_096)
    assert (action.action, action.learn_context_length) == ("compress", 131_072)


def test_prompt_too_long_keeps_window_when_stated_limit_is_not_lower() -> None:
    cls = classify_provider_error(
        400, anthropic_error("prompt is too long: 210000 tokens > 200000 maximum")
    )
    action = recovery_action(cls, context_length=200_000, requested_max_tokens=None)
    assert (action.action, action.learn_context_length) == ("compress", None)


def test_payload_too_large_compresses() -> None:
    action = recovery_action(
        classify_provider_error(413, "Payload Too Large"),
        context_length=64_000,
        requested_max_tokens=None,
    )
    assert (action.action, action.learn_context_length) == ("compress", None)


@pytest.mark.parametrize("status", [401, 429, 500])
def test_non_context_errors_fail(status: int) -> None:
    action = recovery_action(
        classify_provider_error(status, "x"), context_length=64_000, requested_max_tokens=1_000
    )
    assert action.action == "fail"


def test_recovery_action_rejects_bad_window() -> None:
    with pytest.raises(InvalidInput):
        recovery_action(
            ProviderErrorClass(kind="other"), context_length=0, requested_max_tokens=None
        )


# --- OverflowRecovery ----------------------------------------------------------------------

TOO_LONG = ProviderErrorClass(
    kind="prompt_too_long", evidence="prompt is too long: 210000 tokens > 200000 maximum"
)


def test_three_attempts_with_progress_then_give_up() -> None:
    recovery = OverflowRecovery(max_attempts=CompressionConfig().max_compression_attempts)
    tokens = 210_000
    for expected in (1, 2, 3):
        assert recovery.start_attempt(TOO_LONG) == expected
        # each pass drops tokens by 10 %: material progress (a 5 % drop is not, issue 10)
        recovery.record_result(tokens_before=tokens, tokens_after=tokens * 9 // 10, rows_removed=0)
        tokens = tokens * 9 // 10
    assert recovery.remaining == 0
    with pytest.raises(ContextOverflowError) as info:
        recovery.start_attempt(TOO_LONG)
    text = str(info.value)
    assert "3 compression attempts" in text
    assert "new session" in text and "/compress" in text


def test_attempt_without_progress_gives_up_at_once() -> None:
    recovery = OverflowRecovery(max_attempts=3)
    recovery.start_attempt(TOO_LONG)
    with pytest.raises(ContextOverflowError, match="no progress") as info:
        recovery.record_result(tokens_before=50_000, tokens_after=50_000, rows_removed=0)
    assert "new session" in str(info.value)


def test_removing_rows_counts_as_progress() -> None:
    recovery = OverflowRecovery(max_attempts=3)
    recovery.start_attempt(TOO_LONG)
    recovery.record_result(tokens_before=50_000, tokens_after=50_100, rows_removed=12)


def test_recovery_validates_its_inputs() -> None:
    with pytest.raises(InvalidInput):
        OverflowRecovery(max_attempts=0)
    with pytest.raises(InvalidInput):
        OverflowRecovery(max_attempts=3).record_result(
            tokens_before=-1, tokens_after=0, rows_removed=0
        )


def test_a_figure_of_thousands_of_digits_in_an_error_is_no_figure() -> None:
    # an upstream's error text holding 5,000 digits: int() raised ValueError out of
    # handle_provider_error (and so out of the proxy's retry)
    text = "This model's maximum context length is " + "9" * 5000 + " tokens. However, you"
    found = classify_provider_error(400, openai_error(text, "context_length_exceeded"))
    assert found.context_limit is None
