"""Review mends of session 42's unrecorded replies (reach7): each test fails on the
branch before its mend.

- A Responses client that chains with ``previous_response_id`` sends nothing back, so an
  ``incomplete`` response is dropped only when a function call in it is cut (its own
  status ``incomplete``, or arguments that are not JSON); a chained id of a dropped one
  gets a 400 that says why.
- A client that keeps an empty reply as ``{"role": "assistant"}`` (no content field) is
  read as ``content: ""``, not refused.
- A reply of thinking alone (Anthropic's signed blocks) is recorded.
- An empty reply's usage is reported as asking for no tools.
- An Anthropic stream's stop reason is the last one said.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_upstream import Raw, Say
from helpers.server_rig import Rig, rig

from ctxledger.events import MessageAppended, SessionStarted, UsageReported
from ctxledger.server.formats import AnthropicStream
from ctxledger.server.sseparse import SSEEvent
from ctxledger.server.upstream_reply import says_nothing

pytestmark = pytest.mark.anyio

ASK = {"role": "user", "content": "Plan the work."}
HEADERS = {"X-Ctxledger-Session": "p", "authorization": "Bearer k"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _events(r: Rig) -> list[Any]:
    r.service.ledger.refresh()
    return [x.event for x in r.service.ledger.store.read_all()]


def _said(r: Rig) -> list[tuple[str, Any]]:
    return [
        (e.message["role"], e.message.get("content"))
        for e in _events(r)
        if isinstance(e, MessageAppended)
    ]


def _incomplete(call_status: str, arguments: str) -> Raw:
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    call = {"id": "fc_1", "type": "function_call", "name": "todo", "call_id": "call_1"}
    text = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "incomplete",
        "content": [{"type": "output_text", "text": "And th", "annotations": []}],
    }
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "model": "gpt-4.1",
        "output": [{**call, "arguments": arguments, "status": call_status}, text],
        "usage": usage,
    }
    return Raw((json.dumps(body).encode(),))


async def _chain(r: Rig) -> Any:
    await r.http.post("/v1/responses", json={"model": "gpt-4.1", "input": "Add."}, headers=HEADERS)
    output = {"type": "function_call_output", "call_id": "call_1", "output": "added"}
    body = {"model": "gpt-4.1", "previous_response_id": "resp_1", "input": [output]}
    return await r.http.post("/v1/responses", json=body, headers=HEADERS)


async def test_an_incomplete_response_with_a_whole_call_is_recorded_and_chains(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(_incomplete("completed", '{"item": "milk"}'), Say("Done."))
        chained = await _chain(r)
        assert chained.status_code == 200, chained.text
        assert [role for role, _ in _said(r)] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize(("status", "arguments"), [("incomplete", '{"it'), ("completed", "{")])
async def test_a_chained_id_of_a_cut_call_is_refused_saying_why(
    tmp_path: Path, status: str, arguments: str
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(_incomplete(status, arguments))
        chained = await _chain(r)
        assert chained.status_code == 400
        message = chained.json()["error"]["message"]
        assert "cut inside a function call" in message and "send the whole" in message
        assert _said(r) == [("user", "Add.")]  # nothing appended by the refused request


@pytest.mark.parametrize("kept", [{"role": "assistant"}, {"role": "assistant", "content": None}])
async def test_an_empty_reply_kept_without_content_reads_as_empty(
    tmp_path: Path, kept: dict[str, Any]
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(Say(""), Say("Real."))
        client = r.openai(**{"X-Ctxledger-Session": "e"})
        await client.chat.completions.create(model="m", messages=[ASK])
        again = {"role": "user", "content": "Again."}
        await client.chat.completions.create(model="m", messages=[ASK, kept, again])
        assert _said(r) == [
            ("user", ASK["content"]),
            ("assistant", ""),
            ("user", "Again."),
            ("assistant", "Real."),
        ]
        assert sum(isinstance(e, SessionStarted) for e in _events(r)) == 1


def test_a_reply_of_thinking_alone_says_something() -> None:
    block = {"type": "thinking", "thinking": "hm", "signature": "sig"}
    assert not says_nothing({"role": "assistant", "content": "", "thinking_blocks": [block]})
    assert not says_nothing({"role": "assistant", "content": "", "reasoning_content": "hm"})
    assert says_nothing({"role": "assistant", "content": " "})


async def test_an_anthropic_reply_of_signed_thinking_is_recorded(tmp_path: Path) -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    async with rig(tmp_path, api="anthropic") as r:
        r.upstream.queue(Raw((json.dumps(body).encode(),)))
        client = r.anthropic(**{"X-Ctxledger-Session": "t"})
        await client.messages.create(model="claude-x", max_tokens=50, messages=[ASK])
        said = [e.message for e in _events(r) if isinstance(e, MessageAppended)]
        assert said[-1]["role"] == "assistant" and said[-1].get("thinking_blocks")


async def test_an_empty_reply_reports_usage_asking_for_no_tools(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(Say(""))
        client = r.openai(**{"X-Ctxledger-Session": "e"})
        await client.chat.completions.create(model="m", messages=[ASK])
        usage = [e for e in _events(r) if isinstance(e, UsageReported)]
        assert len(usage) == 1 and usage[0].tool_calls is False


def test_an_anthropic_stream_keeps_the_last_stop_reason_said() -> None:
    stream = AnthropicStream()
    for delta in ({"stop_reason": "max_tokens"}, {}):
        data = {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 5}}
        stream.feed(SSEEvent(b"", "message_delta", json.dumps(data)))
    assert stream.stop_reason == "max_tokens"
