"""A Responses answer the output limit left ``incomplete`` (the Agents SDK fails its run
on one), as the fake upstream sends it: the tests of provisional replies (withdrawn when
the client goes on without them) build it here."""

from __future__ import annotations

import json
from typing import Any

from helpers.fake_upstream import Raw, raw_responses_stream

#: the text the incomplete answer holds, cut short
HALF = "The plan has three st"


def incomplete_response(kind: str, input_tokens: int = 10) -> dict[str, Any]:
    """A response left ``incomplete`` by ``max_output_tokens``: `kind` ``text`` (a text cut
    short) or ``call`` (a whole call ``call_whole`` after the text); its usage says
    `input_tokens` (a large figure makes the proxy compact after recording it)."""
    text = {"type": "output_text", "text": HALF, "annotations": []}
    output: list[dict[str, Any]] = [
        {"id": "msg_half", "type": "message", "role": "assistant", "content": [text]}
    ]
    output[0]["status"] = "incomplete" if kind == "text" else "completed"
    if kind == "call":
        call = {"id": "fc_1", "type": "function_call", "name": "todo", "call_id": "call_whole"}
        output.append({**call, "arguments": '{"item": "milk"}', "status": "completed"})
    usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0}}
    usage |= {"output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}}
    return {
        "id": "resp_half",
        "object": "response",
        "created_at": 1,
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "error": None,
        "model": "gpt-4.1",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {**usage, "total_tokens": input_tokens + 5},
    }


def as_answer(response: dict[str, Any], streamed: bool) -> Raw:
    """`response` as the upstream's answer: its SSE stream, or its JSON body."""
    return raw_responses_stream(response) if streamed else Raw((json.dumps(response).encode(),))
