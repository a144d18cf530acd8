"""Provider errors as the real SDKs raise them: a client call to an upstream that
refuses (an ``httpx2.MockTransport``), so the exception is the SDK's own object."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import openai

OPENAI_TOO_LONG = (
    "openai",
    400,
    {
        "error": {
            "message": "This model's maximum context length is 4096 tokens. However, your "
            "messages resulted in 5120 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
)
ANTHROPIC_TOO_LONG = (
    "anthropic",
    400,
    {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    },
)
PAYLOAD_413 = ("openai", 413, {"error": {"message": "Request Entity Too Large"}})
OUTPUT_CAP = (
    "openai",
    400,
    {
        "error": {
            "message": "max_tokens is too large: 4096. This model supports at most 1000 "
            "completion tokens, whereas you provided 4096.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": None,
        }
    },
)


def raise_from_sdk(sdk: str, status: int, body: dict[str, Any]) -> None:
    """The provider SDK's own exception: a real client call to an upstream answering so."""
    transport = httpx2.MockTransport(lambda request: httpx2.Response(status, json=body))
    http = httpx2.Client(transport=transport)
    if sdk == "openai":
        client = openai.OpenAI(
            api_key="k", base_url="http://upstream.test/v1", http_client=http, max_retries=0
        )
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    else:
        other = anthropic.Anthropic(
            api_key="k", base_url="http://upstream.test", http_client=http, max_retries=0
        )
        other.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    raise AssertionError("the upstream was to refuse")
