"""Provider usage -> CanonicalUsage, exactly as HERMES_SPEC §5."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.errors import InvalidInput
from ctxledger.usage import CanonicalUsage, normalize_usage


def test_anthropic_messages_shape() -> None:
    shape, u = normalize_usage(
        {
            "input_tokens": 100,
            "cache_read_input_tokens": 900,
            "cache_creation_input_tokens": 50,
            "output_tokens": 40,
        }
    )
    assert shape == "anthropic"
    assert (u.input, u.cache_read, u.cache_write, u.output) == (100, 900, 50, 40)
    assert u.prompt == 1050 and u.total == 1090


def test_openai_chat_shape_subtracts_cache_from_prompt() -> None:
    shape, u = normalize_usage(
        {
            "prompt_tokens": 1000,
            "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 200},
        }
    )
    assert shape == "openai_chat"
    assert (u.input, u.cache_read, u.cache_write, u.output, u.reasoning) == (
        300,
        600,
        100,
        300,
        200,
    )
    assert u.prompt == 1000 and u.total == 1300


def test_openai_chat_falls_back_to_top_level_cache_fields() -> None:
    _, u = normalize_usage(
        {
            "prompt_tokens": 500,
            "completion_tokens": 5,
            "cache_read_input_tokens": 200,
            "cache_creation_input_tokens": 10,
        }
    )
    assert (u.input, u.cache_read, u.cache_write) == (290, 200, 10)


def test_openai_responses_shape() -> None:
    shape, u = normalize_usage(
        {
            "input_tokens": 800,
            "output_tokens": 90,
            "total_tokens": 890,
            "input_tokens_details": {"cached_tokens": 300},
            "output_tokens_details": {"reasoning_tokens": 60},
        }
    )
    assert shape == "openai_responses"
    assert (u.input, u.cache_read, u.output, u.reasoning) == (500, 300, 90, 60)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"foo": 1}, "unrecognised usage shape"),
        ({"prompt_tokens": "12", "completion_tokens": 1}, "must be a number"),
        ({"input_tokens": -1, "output_tokens": 1}, "must not be negative"),
        (
            {
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "prompt_tokens_details": {"cached_tokens": 20},
            },
            "exceed the prompt",
        ),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_bad_usage_is_rejected(raw: object, fragment: str) -> None:
    with pytest.raises(InvalidInput) as info:
        normalize_usage(raw)  # type: ignore[arg-type]
    assert fragment in str(info.value)


counts = st.integers(min_value=0, max_value=10**7)


@given(counts, counts, counts, counts, counts)
def test_prompt_and_total_identities(
    inp: int, read: int, write: int, out: int, reasoning: int
) -> None:
    u = CanonicalUsage(
        input=inp, cache_read=read, cache_write=write, output=out, reasoning=reasoning
    )
    assert u.prompt == inp + read + write
    assert u.total == u.prompt + out


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_every_shape_keeps_prompt_identity(prompt: int, read: int, write: int, out: int) -> None:
    read, write = min(read, prompt), min(write, max(0, prompt - min(read, prompt)))
    _, u = normalize_usage(
        {
            "prompt_tokens": prompt,
            "completion_tokens": out,
            "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
        }
    )
    assert u.prompt == prompt and u.total == prompt + out
