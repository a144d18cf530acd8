"""Replies no agent goes on from are not recorded (session 42): one the output limit cut
inside its tool calls, and one that says nothing.

Found with the real hermes-agent 0.19.0 through ``ctxledger serve``: a model that stops
with ``finish_reason: length`` while writing a tool call leaves a call no agent runs
(its arguments end mid-way). Hermes drops that reply and sends the same request again
(``conversation_loop``: "Truncated tool call detected"). The proxy had recorded the cut
call, so the retry was a repeat (answered, not recorded) and the next turn branched:
the root kept a call the agent never had. Now such a reply is not recorded (its usage
is); the retry is an ordinary turn, and a client that does keep the reply sends it
back with its next turn, where it is recorded as the client sent it.

An empty reply (no text but whitespace, no call, refusal or audio: what is left of a
reasoning-only answer too) is the same: Hermes drops it and asks again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.chat_stream import chat_chunks, sse_events
from helpers.fake_upstream import Raw, Say
from helpers.server_rig import Rig, rig
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.events import MessageAppended, SessionStarted, UsageReported
from ctxledger.server.upstream_reply import says_nothing

pytestmark = pytest.mark.anyio

ASK = {"role": "user", "content": "Plan the work."}
CUT = [("call_1", '{"todos": [{"id": "1", "cont')]
WHOLE = [("call_2", '{"todos": [{"id": "1", "content": "a"}]}')]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _answer(reply: dict[str, Any], *, stream: bool, finish: str | None = None) -> Raw:
    """`reply` as the upstream sends it: a chat completion, or its event stream."""
    chunks = chat_chunks(reply, chunk_id="c1", model="m", finish=finish, split_calls=stream)
    if stream:
        return Raw(tuple(sse_events(chunks)), "text/event-stream")
    message = {"role": "assistant", **{k: v for k, v in chunks[0]["choices"][0]["delta"].items()}}
    for call in message.get("tool_calls") or ():
        call.pop("index")
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": chunks[-2]["choices"][0]["finish_reason"],
    }
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m"}
    return Raw((json.dumps({**body, "choices": [choice], "usage": chunks[-1]["usage"]}).encode(),))


async def _ask(r: Rig, messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    """The assistant message the client got for `messages`."""
    client = r.openai(**{"X-Ctxledger-Session": "cut"})
    if not stream:
        done = await client.chat.completions.create(model="m", messages=messages)
        return done.choices[0].message.model_dump(exclude_none=True)
    got: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": {}}
    async for chunk in await client.chat.completions.create(
        model="m", messages=messages, stream=True
    ):
        for choice in chunk.choices:
            got["content"] += choice.delta.content or ""
            for call in choice.delta.tool_calls or ():
                slot = got["tool_calls"].setdefault(call.index, {"arguments": ""})
                slot["arguments"] += call.function.arguments or ""
    return got


def _events(r: Rig) -> list[Any]:
    r.service.ledger.refresh()
    return [x.event for x in r.service.ledger.store.read_all()]


def _said(r: Rig) -> list[Any]:
    return [
        [e.message["role"], [c["id"] for c in e.message.get("tool_calls") or ()]]
        for e in _events(r)
        if isinstance(e, MessageAppended)
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_call_cut_by_the_output_limit_is_not_recorded_and_the_retry_is(
    tmp_path: Path, stream: bool
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(
            _answer({"content": "Let me plan.", "tool_calls": CUT}, stream=stream, finish="length"),
            _answer({"content": "Let me plan.", "tool_calls": WHOLE}, stream=stream),
            _answer({"content": "Planned."}, stream=stream),
        )
        cut = await _ask(r, [ASK], stream)
        assert "cont" in str(cut["tool_calls"])  # the client has the reply as it came
        assert _said(r) == [["user", []]]  # not recorded
        usage = [e for e in _events(r) if isinstance(e, UsageReported)]
        assert [u.tool_calls for u in usage] == [True]  # its usage is, saying it asked for tools
        # Hermes drops it and sends the same request again: an ordinary turn
        await _ask(r, [ASK], stream)
        assert r.upstream.requests[-1].messages[-1] == ASK  # asked, not served a repeat
        call = {"id": "call_2", "type": "function"}
        call["function"] = {"name": "todo", "arguments": WHOLE[0][1]}
        done = {"role": "assistant", "content": "Let me plan.", "tool_calls": [call]}
        result = {"role": "tool", "tool_call_id": "call_2", "content": "1 item"}
        await _ask(r, [ASK, done, result], stream)
        assert _said(r) == [
            ["user", []],
            ["assistant", ["call_2"]],
            ["tool", []],
            ["assistant", []],
        ]
        assert sum(isinstance(e, SessionStarted) for e in _events(r)) == 1  # no branch
        assert r.service.ledger.verify().ok


async def test_a_client_that_keeps_the_cut_reply_sends_it_back_and_it_is_recorded(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(
            _answer({"content": "Let me plan.", "tool_calls": CUT}, stream=False, finish="length")
        )
        await _ask(r, [ASK], stream=False)
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "todo", "arguments": CUT[0][1]}
        kept = {"role": "assistant", "content": "Let me plan.", "tool_calls": [call]}
        await _ask(r, [ASK, kept, {"role": "user", "content": "Go on."}], stream=False)
        assert _said(r) == [
            ["user", []],
            ["assistant", ["call_1"]],
            ["user", []],
            ["assistant", []],
        ]
        assert sum(isinstance(e, SessionStarted) for e in _events(r)) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_text_cut_by_the_output_limit_is_recorded(tmp_path: Path, stream: bool) -> None:
    """Hermes goes on from a cut text (it asks the model to continue): it is kept."""
    async with rig(tmp_path) as r:
        r.upstream.queue(_answer({"content": "The plan has thr"}, stream=stream, finish="length"))
        await _ask(r, [ASK], stream)
        assert _said(r) == [["user", []], ["assistant", []]]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("empty", ["", "  \n"])
async def test_an_empty_reply_is_not_recorded_and_the_retry_is(
    tmp_path: Path, stream: bool, empty: str
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(
            _answer({"content": empty}, stream=stream), _answer({"content": "Real."}, stream=stream)
        )
        got = await _ask(r, [ASK], stream)
        assert got["content"] == empty  # passed on as it came
        assert _said(r) == [["user", []]]
        assert sum(isinstance(e, UsageReported) for e in _events(r)) == 1
        await _ask(r, [ASK], stream)  # Hermes asks again
        assert r.upstream.requests[-1].messages == [ASK]
        assert _said(r) == [["user", []], ["assistant", []]]
        await _ask(r, [ASK, {"role": "assistant", "content": "Real."}, ASK], stream)
        assert sum(isinstance(e, SessionStarted) for e in _events(r)) == 1  # no branch


async def test_a_client_that_keeps_an_empty_reply_sends_it_back(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(_answer({"content": ""}, stream=False))
        await _ask(r, [ASK], stream=False)
        await _ask(r, [ASK, {"role": "assistant", "content": ""}, ASK], stream=False)
        assert _said(r) == [["user", []], ["assistant", []], ["user", []], ["assistant", []]]
        assert sum(isinstance(e, SessionStarted) for e in _events(r)) == 1


async def _ask_anthropic_twice(client: Any, stream: bool) -> None:
    """The same Anthropic request twice, streamed or not (the first reply is unusable)."""
    for _ in range(2):
        if stream:
            async with client.messages.stream(model="claude-x", max_tokens=50, messages=[ASK]) as s:
                await s.get_final_message()
        else:
            await client.messages.create(model="claude-x", max_tokens=50, messages=[ASK])


@pytest.mark.parametrize("stream", [False, True])
async def test_an_empty_anthropic_reply_is_not_recorded(tmp_path: Path, stream: bool) -> None:
    async with rig(tmp_path, api="anthropic") as r:
        r.upstream.queue(Say(""), Say("Real."))
        client = r.anthropic(**{"X-Ctxledger-Session": "empty"})
        await _ask_anthropic_twice(client, stream)
        assert _said(r) == [["user", []], ["assistant", []]]
        said = [e.message for e in _events(r) if isinstance(e, MessageAppended)]
        assert "Real." in str(said[-1])


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _anthropic(stop: Any, partial: str, *, stream: bool) -> Raw:
    """A message with text and one tool_use (its input written as `partial`), stopped by `stop`."""
    start = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x"}
    start |= {"content": [], "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
    tool = {"type": "tool_use", "id": "tu_1", "name": "todo", "input": {}}
    if not stream:
        text = {"type": "text", "text": "Let me."}
        written = {"todos": [{"id": "1"}]} if stop == "max_tokens" else json.loads(partial)
        whole = {**start, "content": [text, {**tool, "input": written}]}
        return Raw((json.dumps({**whole, "stop_reason": stop}).encode(),))
    events = [
        ("message_start", {"message": start}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Let me."}}),
        ("content_block_stop", {"index": 0}),
        ("content_block_start", {"index": 1, "content_block": tool}),
        ("content_block_delta", {"index": 1, "delta": {"type": "input_json_delta", "partial_json": partial}}),
        ("content_block_stop", {"index": 1}),
        ("message_delta", {"delta": stop if isinstance(stop, str) and stop.startswith("(") else {"stop_reason": stop}, "usage": {"output_tokens": 5}}),
        ("message_stop", {}),
    ]  # fmt: skip
    return Raw(tuple(_sse(e, {"type": e, **d}) for e, d in events), "text/event-stream")


@pytest.mark.parametrize("stream", [False, True])
async def test_an_anthropic_tool_use_cut_by_max_tokens_is_not_recorded(
    tmp_path: Path, stream: bool
) -> None:
    async with rig(tmp_path, api="anthropic") as r:
        r.upstream.queue(
            _anthropic("max_tokens", '{"todos": [{"id": "1", "cont', stream=stream),
            _anthropic("tool_use", '{"a": 1}', stream=stream),
        )
        client = r.anthropic(**{"X-Ctxledger-Session": "cut"})
        await _ask_anthropic_twice(client, stream)  # the cut reply, then the same again
        assert _said(r) == [["user", []], ["assistant", ["tu_1"]]]
        usage = [e for e in _events(r) if isinstance(e, UsageReported)]
        assert [u.tool_calls for u in usage] == [True, True]  # the cut one asked for tools too
        last = [e.message for e in _events(r) if isinstance(e, MessageAppended)][-1]
        assert json.loads(last["tool_calls"][0]["function"]["arguments"]) == {"a": 1}  # the retry's


@given(st.text(), st.booleans())
def test_a_reply_says_nothing_exactly_when_its_text_is_blank(text: str, as_parts: bool) -> None:
    content: Any = [{"type": "text", "text": text}] if as_parts else text
    assert says_nothing({"role": "assistant", "content": content}) is (not text.strip())
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert not says_nothing({"role": "assistant", "content": content, "tool_calls": [call]})
    assert not says_nothing({"role": "assistant", "content": content, "refusal": "no"})
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    assert not says_nothing({"role": "assistant", "content": [image]})


async def test_an_odd_message_delta_is_read_as_before(tmp_path: Path) -> None:
    """A ``message_delta`` whose delta is no object is not checked (only its stop_reason
    is read): the reply is recorded as on main."""
    async with rig(tmp_path, api="anthropic") as r:
        r.upstream.queue(_anthropic("(odd)", '{"a": 1}', stream=True))
        body = {"model": "claude-x", "max_tokens": 50, "messages": [ASK], "stream": True}
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        got = await r.http.post("/v1/messages", json=body, headers=headers)  # (no SDK reads it)
        assert got.status_code == 200 and b"message_stop" in got.content
        assert _said(r) == [["user", []], ["assistant", ["tu_1"]]]
