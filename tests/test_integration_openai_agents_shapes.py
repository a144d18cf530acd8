"""Shapes the OpenAI Agents SDK sends through ``ctxledger serve``'s Responses face that
the other tests do not (session 45): parallel function calls in one answer, plain and
streamed, whose tool returns a list of content parts (text and an image); the next run
goes on in the same session, and the upstream gets each output as the SDK sent it."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.frameworks import require

require("agents", "agents")
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    SQLiteSession,
    ToolOutputImage,
    ToolOutputText,
    function_tool,
)
from helpers.agents_runs import run_turn
from helpers.chat_stream import sse_events
from helpers.fake_upstream import Raw, Say, raw_responses_stream
from helpers.server_rig import Rig, rig

from ctxledger.events import SessionStarted

pytestmark = pytest.mark.anyio

PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@function_tool
def look(part: str) -> list[ToolOutputText | ToolOutputImage]:
    """Look at a part of the screen."""
    return [ToolOutputText(text=f"part {part}:"), ToolOutputImage(image_url=PIXEL)]


def _two_calls(streamed: bool) -> Raw:
    calls = [
        {
            "id": f"fc_{n}",
            "type": "function_call",
            "call_id": f"call_{n}",
            "name": "look",
            "arguments": json.dumps({"part": n}),
            "status": "completed",
        }
        for n in ("left", "right")
    ]
    response = {
        "id": "resp_two",
        "object": "response",
        "created_at": 0,
        "model": "gpt-4.1",
        "status": "completed",
        "output": calls,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 50,
            "output_tokens": 10,
            "total_tokens": 60,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
    return raw_responses_stream(response) if streamed else Raw((json.dumps(response).encode(),))


def _outputs(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {i["call_id"]: i["output"] for i in items if i.get("type") == "function_call_output"}


async def _two_runs(r: Rig, calls: Raw, model_class: Any, streamed: bool) -> None:
    """Two runs of an agent holding `look` through the proxy: `calls` answers the first
    request, then a text each (one session, ``X-Ctxledger-Session: shapes``)."""
    r.upstream.queue(calls, Say("Both parts seen."), Say("Again."))
    client = r.openai(**{"X-Ctxledger-Session": "shapes"})
    model = model_class(model="gpt-4.1", openai_client=client)
    agent = Agent(name="a", instructions="Be brief.", tools=[look], model=model)
    session = SQLiteSession("s")
    assert await run_turn(agent, "Look at both parts.", session, streamed) == "Both parts seen."
    assert await run_turn(agent, "And now?", session, streamed) == "Again."


@pytest.mark.parametrize("streamed", [False, True])
async def test_parallel_calls_with_content_part_outputs(tmp_path: Path, streamed: bool) -> None:
    async with rig(tmp_path) as r:
        await _two_runs(r, _two_calls(streamed), OpenAIResponsesModel, streamed)
        _, second, third = r.upstream.requests
        sent = _outputs(second.items)
        assert set(sent) == {"call_left", "call_right"}
        for call, output in sent.items():
            assert isinstance(output, list), output
            kinds = [part["type"] for part in output]
            assert kinds == ["input_text", "input_image"], output
            assert output[1]["image_url"] == PIXEL
            assert output[0]["text"] == f"part {call.removeprefix('call_')}:"
        assert _outputs(third.items) == sent  # the next run: the same outputs, in the same session
        r.service.ledger.refresh()
        events = [x.event for x in r.service.ledger.store.read_all()]
        assert sum(isinstance(e, SessionStarted) for e in events) == 1
        assert r.service.ledger.verify().ok


def _interleaved_calls(streamed: bool) -> Raw:
    """Two calls streamed as some providers send them: both heads, then the arguments
    of each, by index (or the whole completion as JSON)."""
    heads = [
        {
            "index": i,
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "look", "arguments": ""},
        }
        for i, n in enumerate(("left", "right"))
    ]
    args = [
        {"index": i, "function": {"arguments": json.dumps({"part": n})}}
        for i, n in enumerate(("left", "right"))
    ]
    base = {
        "id": "chatcmpl-two",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-4.1",
    }
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None}]
    deltas += [{"tool_calls": [h]} for h in heads] + [{"tool_calls": [a]} for a in args]
    chunks = [
        {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    usage = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}
    chunks.append({**base, "choices": [], "usage": usage})
    if streamed:
        return Raw(tuple(sse_events(chunks)), "text/event-stream")
    calls = [
        {"id": h["id"], "type": "function", "function": {**h["function"], **a["function"]}}
        for h, a in zip(heads, args, strict=True)
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    whole = {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
    return Raw((json.dumps(whole).encode(),))


@pytest.mark.parametrize("streamed", [False, True])
async def test_interleaved_parallel_calls_on_the_chat_face(tmp_path: Path, streamed: bool) -> None:
    async with rig(tmp_path) as r:
        await _two_runs(r, _interleaved_calls(streamed), OpenAIChatCompletionsModel, streamed)
        _, second, third = r.upstream.requests
        (asked,) = [m for m in second.messages if m.get("tool_calls")]
        assert [c["id"] for c in asked["tool_calls"]] == ["call_left", "call_right"]
        assert [json.loads(c["function"]["arguments"]) for c in asked["tool_calls"]] == [
            {"part": "left"},
            {"part": "right"},
        ]
        results = [m for m in second.messages if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in results] == ["call_left", "call_right"]
        assert [m for m in third.messages if m["role"] == "tool"] == results
        r.service.ledger.refresh()
        events = [x.event for x in r.service.ledger.store.read_all()]
        assert sum(isinstance(e, SessionStarted) for e in events) == 1
        assert r.service.ledger.verify().ok
