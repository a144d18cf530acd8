"""Message builders for the re-used tool-call id tests (``test_reused_ids_*``,
``test_late_results``): calls, results, user turns and the planner's pairing."""

from __future__ import annotations

import json
from typing import Any

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.layout import message_layout
from helpers.fake_upstream import Raw


def call(cid: str) -> dict[str, Any]:
    args = json.dumps({"command": "make test"})
    return {"id": cid, "type": "function", "function": {"name": "terminal", "arguments": args}}


def asks(*cids: str, text: str = "trying") -> dict[str, Any]:
    """An assistant message making one call per id in `cids` (an id may repeat)."""
    return {"role": "assistant", "content": text, "tool_calls": [call(c) for c in cids]}


def result(cid: str, text: str = "done") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def user(text: str = "again") -> dict[str, Any]:
    return {"role": "user", "content": text}


def pairs(messages: list[dict[str, Any]]) -> dict[int, int]:
    """Which assistant message each tool result answers (the planner's reading)."""
    return message_layout(messages, CompressionConfig()).result_owner


def chat_reply(message: dict[str, Any]) -> Raw:
    """A fake upstream's OpenAI chat completion answering with `message`."""
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
    body["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
    body["usage"] = {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}
    return Raw((json.dumps(body).encode(),))
