"""A scripted chat-completions reply as the stream an OpenAI-compatible upstream sends
(standard library only: the Hermes scenarios import it in Hermes's own virtualenv,
where ctxledger is not installed).

A reply is ``{"content": str | None, "tool_calls": [...]}``; each call is a whole
``{"id", "type", "function": {"name", "arguments"}}`` dict or an ``(id, arguments)``
pair (a ``todo`` call). Shared by ``hermes_scenario`` (calls whole in the first
delta) and ``hermes_proxy_client`` (each call's head, then its arguments, as models
stream them)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

USAGE = {"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920}


def _call(call: Any) -> dict[str, Any]:
    if isinstance(call, Mapping):
        return dict(call)
    call_id, arguments = call
    return {"id": call_id, "type": "function", "function": {"name": "todo", "arguments": arguments}}


def chat_chunks(
    reply: Mapping[str, Any],
    *,
    chunk_id: str,
    model: str = "fake-model",
    usage: Mapping[str, Any] | None = None,
    split_calls: bool = False,
    finish: str | None = None,
    interleave: bool = False,
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events of `reply`: the role (and text), the tool
    calls (whole in the first delta, or with `split_calls` each call's head and then its
    arguments in a delta of their own), the finish reason (`finish`, else ``tool_calls``
    or ``stop``), and a last event with `usage` (:data:`USAGE` when not given). With
    `interleave` (and `split_calls`) every call's head comes first, then the calls'
    arguments in two halves each, the calls taking turns by index (session 46)."""
    base = {"id": chunk_id, "object": "chat.completion.chunk", "created": 1_700_000_000}
    base["model"] = model
    calls = [_call(c) for c in reply.get("tool_calls") or ()]
    first: dict[str, Any] = {"role": "assistant"}
    if reply.get("content") is not None:
        first["content"] = reply["content"]
    if calls and not split_calls:
        first["tool_calls"] = [{"index": i, **c} for i, c in enumerate(calls)]
    deltas = [first]
    for i, call in enumerate(calls if split_calls and not interleave else ()):
        head = {**call, "index": i, "function": {**call["function"], "arguments": ""}}
        arguments = {"index": i, "function": {"arguments": call["function"]["arguments"]}}
        deltas += [{"tool_calls": [head]}, {"tool_calls": [arguments]}]
    if split_calls and interleave:
        deltas += _interleaved(calls)
    ended = finish or ("tool_calls" if calls else "stop")
    out = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": ended}]})
    out.append({**base, "choices": [], "usage": dict(USAGE if usage is None else usage)})
    return out


def _interleaved(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Deltas of `calls`: each call's head, then their arguments' halves by turns."""
    heads = [
        {"tool_calls": [{**c, "index": i, "function": {**c["function"], "arguments": ""}}]}
        for i, c in enumerate(calls)
    ]
    parts = []
    for half in (0, 1):
        for i, call in enumerate(calls):
            text = call["function"]["arguments"]
            cut = len(text) // 2
            piece = text[:cut] if half == 0 else text[cut:]
            parts.append({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    return heads + parts


def sse_events(chunks: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """Each chunk as one server-sent event, then ``[DONE]``."""
    return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


async def send_stream(send: Any, chunks: Sequence[Mapping[str, Any]]) -> None:
    """A 200 event stream of `chunks`, one ASGI body message an event (as a model's
    stream arrives: many messages, no length)."""
    start = {"type": "http.response.start", "status": 200}
    await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
    events = sse_events(chunks)
    for i, event in enumerate(events):
        await send({"type": "http.response.body", "body": event, "more_body": i < len(events) - 1})
