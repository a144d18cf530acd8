"""Provider usage reports -> CanonicalUsage (HERMES_SPEC §5).

Buckets: input, output, cache_read, cache_write, reasoning.
``prompt = input + cache_read + cache_write``; ``total = prompt + output``
(reasoning is part of output, never added again).

Many OpenAI-compatible servers (local ones especially) send no usage at all: an
absent, null or empty usage block, or one whose fields are all null, is the shape
:data:`NO_USAGE` ("no usage reported"), normalized to zeros. It is not an error; the
runtime then judges the prompt size by its own estimate.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ctxledger.errors import InvalidInput
from ctxledger.integers import shown
from ctxledger.limits import (
    MAX_MODEL_CHARS,
    check_json,
    check_name,
    check_nonblank,
    check_token_count,
    max_json_depth,
    replaying,
)

#: the shape of a response that reported no usage (absent, null, empty or all-null block)
NO_USAGE = "none"


class CanonicalUsage(msgspec.Struct, frozen=True, kw_only=True):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        return self.prompt + self.output

    def __add__(self, other: CanonicalUsage) -> CanonicalUsage:
        return CanonicalUsage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            reasoning=self.reasoning + other.reasoning,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "reasoning": self.reasoning,
            "prompt": self.prompt,
            "total": self.total,
        }


def _int(value: Any, field: str) -> int:
    # the one rule for token counts (ctxledger.limits): the API, CLI and service share it
    return check_token_count(value, f"usage field {field!r}")


def _get(d: Mapping[str, Any], *path: str) -> Any:
    cur: Any = d
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def reports_nothing(raw: Any) -> bool:
    """Whether a usage block carries no figure at all: None, ``{}``, or only nulls / empty
    blocks. Walked without recursion: a new block nesting past the JSON limit (or holding
    itself: a RecursionError) counts as reporting something, and is refused as a shape; a
    what-if's recorded block (read from JSON: no cycle) is walked whole, as recorded."""
    stack, limit = [(raw, 1)], None if replaying() else max_json_depth()
    while stack:
        value, level = stack.pop()
        if value is None:
            continue
        if not isinstance(value, Mapping) or (limit is not None and level > limit):
            return False
        stack.extend((child, level + 1) for child in value.values())
    return True


def detect_shape(raw: Mapping[str, Any]) -> str:
    """``anthropic``, ``openai_responses``, ``openai_chat``, ``canonical`` or ``none``."""
    if reports_nothing(raw):
        return NO_USAGE
    if "prompt_tokens" in raw or "completion_tokens" in raw:
        return "openai_chat"
    if "input_tokens_details" in raw or "output_tokens_details" in raw:
        return "openai_responses"
    if "cache_creation_input_tokens" in raw or "cache_read_input_tokens" in raw:
        return "anthropic"
    if "input_tokens" in raw or "output_tokens" in raw:
        # Both Anthropic and Responses use these names; Anthropic's input excludes cache.
        return (
            "anthropic"
            if raw.get("type") != "response" and "total_tokens" not in raw
            else "openai_responses"
        )
    if {"input", "output"} & set(raw):
        return "canonical"
    raise InvalidInput(
        "unrecognised usage shape: expected Anthropic (input_tokens/output_tokens), "
        "OpenAI chat (prompt_tokens/completion_tokens) or OpenAI Responses fields"
    )


def _first_figure(raw: Mapping[str, Any], *paths: tuple[str, ...]) -> Any:
    """The first of `paths` that holds a non-zero figure (else the last one's value):
    servers put the same count in different places, and a zero in the standard place
    does not hide a figure in another one."""
    value: Any = None
    for path in paths:
        value = _get(raw, *path)
        if value:
            return value
    return value


def _reasoning(raw: Mapping[str, Any]) -> int:
    value = _first_figure(
        raw,
        ("output_tokens_details", "reasoning_tokens"),
        ("completion_tokens_details", "reasoning_tokens"),
    )
    return _int(value, "reasoning_tokens")


def check_usage_report(
    raw: object, model: object, cost_usd: object, tool_calls: object = None
) -> None:
    """The arguments of ``report_usage`` besides the figures (checked when normalized):
    a model is None or a non-blank string (a blank one named no model, silently), a cost
    a finite number ≥ 0, ``tool_calls`` None or a bool, and the raw report JSON as it is
    (a NaN was stored as null)."""
    if tool_calls is not None and not isinstance(tool_calls, bool):
        raise InvalidInput(f"tool_calls must be true, false or None, got {shown(tool_calls)}")
    if model is not None:
        given = check_nonblank(model, "model", "None or a non-empty string")
        check_name(given, "model", MAX_MODEL_CHARS)
    if cost_usd is not None and (
        not isinstance(cost_usd, int | float)
        or isinstance(cost_usd, bool)
        or not 0 <= cost_usd <= sys.float_info.max  # (isfinite of an int past a float raised)
    ):
        raise InvalidInput(f"cost_usd must be a finite number ≥ 0, got {shown(cost_usd)}")
    if isinstance(raw, Mapping):
        check_json(raw, "usage")


def normalize_usage(
    raw: Mapping[str, Any] | None, shape: str | None = None
) -> tuple[str, CanonicalUsage]:
    """Normalize one provider usage dict. Returns ``(shape, usage)``.

    A response without usage (None, ``{}``, all nulls) gives ``("none", zeros)``.
    Raises :class:`InvalidInput` for unknown shapes, non-numbers, negatives, or cache
    counts larger than the prompt they are part of.
    """
    if reports_nothing(raw):
        return NO_USAGE, CanonicalUsage()
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"usage must be a JSON object, got {type(raw).__name__}")
    if shape is not None and not isinstance(shape, str):  # a list was unhashable: TypeError
        raise InvalidInput(f"shape must be a usage shape's name or None, got {shown(shape)}")
    shape = shape or detect_shape(raw)
    if shape == NO_USAGE:
        raise InvalidInput(f"usage shape {NO_USAGE!r} carries no figures, but this block has some")
    reader = _READERS.get(shape)
    if reader is None:
        raise InvalidInput(f"unknown usage shape {shown(shape)}")
    usage = reader(raw)
    if usage.reasoning > usage.output and usage.output:
        raise InvalidInput(
            f"reasoning tokens ({usage.reasoning}) exceed output tokens ({usage.output})"
        )
    return shape, usage


def _from_anthropic(raw: Mapping[str, Any]) -> CanonicalUsage:
    return CanonicalUsage(
        input=_int(raw.get("input_tokens"), "input_tokens"),
        cache_read=_int(raw.get("cache_read_input_tokens"), "cache_read_input_tokens"),
        cache_write=_int(raw.get("cache_creation_input_tokens"), "cache_creation_input_tokens"),
        output=_int(raw.get("output_tokens"), "output_tokens"),
        reasoning=_reasoning(raw),
    )


def _from_responses(raw: Mapping[str, Any]) -> CanonicalUsage:
    total_in = _int(raw.get("input_tokens"), "input_tokens")
    read = _int(_get(raw, "input_tokens_details", "cached_tokens"), "cached_tokens")
    write = _int(
        _get(raw, "input_tokens_details", "cache_creation_tokens"), "cache_creation_tokens"
    )
    return _split_prompt(
        total_in, read, write, _int(raw.get("output_tokens"), "output_tokens"), raw
    )


def _from_chat(raw: Mapping[str, Any]) -> CanonicalUsage:
    total_in = _int(raw.get("prompt_tokens"), "prompt_tokens")
    # OpenAI nests cache figures; proxies routing Claude (OpenRouter) put Anthropic's
    # names at the top level; DeepSeek's own API says prompt_cache_hit_tokens
    read_raw = _first_figure(
        raw,
        ("prompt_tokens_details", "cached_tokens"),
        ("cache_read_input_tokens",),
        ("prompt_cache_hit_tokens",),
    )
    write_raw = _first_figure(
        raw, ("prompt_tokens_details", "cache_write_tokens"), ("cache_creation_input_tokens",)
    )
    return _split_prompt(
        total_in,
        _int(read_raw, "cached_tokens"),
        _int(write_raw, "cache_write_tokens"),
        _int(raw.get("completion_tokens"), "completion_tokens"),
        raw,
    )


def _from_canonical(raw: Mapping[str, Any]) -> CanonicalUsage:
    return CanonicalUsage(
        input=_int(raw.get("input"), "input"),
        output=_int(raw.get("output"), "output"),
        cache_read=_int(raw.get("cache_read"), "cache_read"),
        cache_write=_int(raw.get("cache_write"), "cache_write"),
        reasoning=_int(raw.get("reasoning"), "reasoning"),
    )


#: how each known shape maps onto the canonical fields
_READERS: dict[str, Callable[[Mapping[str, Any]], CanonicalUsage]] = {
    "anthropic": _from_anthropic,
    "openai_responses": _from_responses,
    "openai_chat": _from_chat,
    "canonical": _from_canonical,
}


def _split_prompt(
    total_in: int, read: int, write: int, output: int, raw: Mapping[str, Any]
) -> CanonicalUsage:
    if read + write > total_in:
        raise InvalidInput(
            f"cache tokens (read {read} + write {write}) exceed the prompt's {total_in} input tokens"
        )
    return CanonicalUsage(
        input=total_in - read - write,
        cache_read=read,
        cache_write=write,
        output=output,
        reasoning=_reasoning(raw),
    )
