"""The four summarizers shipped with ctxledger run the summarizer contract.

The LLM summarizer talks to a fake OpenAI-compatible model: an ASGI app served
in-process through httpx's ASGI transport, which answers with a structured handoff
built from what it was sent (so the summary is about the request, as a model's is).
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
from helpers.asgi import request_body, respond

from ctxledger.compressor.summarizers.base import Summarizer, render_sections
from ctxledger.compressor.summarizers.fallback import FallbackSummarizer
from ctxledger.compressor.summarizers.llm import LLMSummarizer
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.compressor.summarizers.recorded import RecordedSummarizer
from ctxledger.testing.summarizer import SummarizerContract

Scope = dict[str, Any]


async def fake_model(scope: Scope, receive: Any, send: Any) -> None:
    """A chat-completions endpoint whose summary names the files its prompt mentions."""
    assert scope["type"] == "http"
    body = await request_body(receive)
    prompt = json.dumps(json.loads(body)["messages"])
    files = sorted(set(re.findall(r"[\w/]+\.py", prompt)))
    text = render_sections({"goal": ["Fix the failing test."], "files": files})
    reply = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
    }
    await respond(send, 200, "application/json", json.dumps(reply).encode())


class TestOfflineSummarizer(SummarizerContract):
    def make_summarizer(self) -> Summarizer:
        return OfflineSummarizer()


class TestLLMSummarizer(SummarizerContract):
    def make_summarizer(self) -> Summarizer:
        return LLMSummarizer(
            api="openai",
            base_url="http://fake-model.local/v1",
            model="fake-model",
            api_key="sk-test",
            transport=httpx.ASGITransport(app=fake_model),
            env={},
        )


class TestRecordedSummarizer(SummarizerContract):
    def make_summarizer(self) -> Summarizer:
        text = render_sections({"goal": ["Fix the failing test in src/app/config.py."]})
        return RecordedSummarizer(text)


class TestFallbackSummarizer(SummarizerContract):
    def make_summarizer(self) -> Summarizer:
        return FallbackSummarizer()
