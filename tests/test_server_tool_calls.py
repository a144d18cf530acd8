"""The proxy tells ``report_usage`` whether a reply asked for tools (review of session 30,
item H), on each face, JSON and streamed: the in-loop check runs after a tool call and
waits for the next request's preflight after a final answer. The recorded
``UsageReported.tool_calls`` says what was passed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_upstream import Raw, Say
from helpers.server_rig import Rig, rig

from ctxledger.events import UsageReported

pytestmark = pytest.mark.anyio

SYSTEM = "You are a careful coding agent."
TOOL = ("read_file", {"path": "a.py"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _said(r: Rig) -> list[bool | None]:
    return [
        rec.event.asked_for_tools
        for rec in r.service.ledger.store.read_all()
        if isinstance(rec.event, UsageReported)
    ]


async def _chat(r: Rig, stream: bool, ask: str) -> None:
    messages: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]
    client = r.openai()
    if stream:
        chunks = await client.chat.completions.create(
            model="gpt-4.1", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        async for _ in chunks:
            pass
    else:
        await client.chat.completions.create(model="gpt-4.1", messages=messages)


async def _responses(r: Rig, stream: bool, ask: str) -> None:
    client = r.openai()
    if stream:
        async with client.responses.stream(model="gpt-4.1", instructions=SYSTEM, input=ask) as s:
            await s.get_final_response()
    else:
        await client.responses.create(model="gpt-4.1", instructions=SYSTEM, input=ask)


async def _anthropic(r: Rig, stream: bool, ask: str) -> None:
    client = r.anthropic()
    messages: Any = [{"role": "user", "content": ask}]
    if stream:
        async with client.messages.stream(
            model="claude-sonnet-4", max_tokens=256, system=SYSTEM, messages=messages
        ) as s:
            await s.get_final_message()
    else:
        await client.messages.create(
            model="claude-sonnet-4", max_tokens=256, system=SYSTEM, messages=messages
        )


FACES = {"chat": ("openai", _chat), "responses": ("openai", _responses)}
FACES["anthropic"] = ("anthropic", _anthropic)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("face", sorted(FACES))
async def test_each_face_says_whether_the_reply_asked_for_tools(
    tmp_path: Path, face: str, stream: bool
) -> None:
    api, send = FACES[face]
    async with rig(tmp_path, api=api) as r:
        r.upstream.queue(Say("let me look", tool=TOOL), Say("done"))
        await send(r, stream, "read a.py")
        await send(r, stream, "what is 2 + 2?")  # another conversation: a final answer
        assert _said(r) == [True, False]


def _custom_call_response(kind: str) -> bytes:
    item: dict[str, Any] = {"id": "it_1", "type": kind, "call_id": "call_1", "status": "completed"}
    item |= {"name": "apply_patch", "input": "*** patch"} if kind == "custom_tool_call" else {}
    item |= {"action": {"type": "exec", "command": ["ls"]}} if kind == "local_shell_call" else {}
    if kind == "computer_call":
        item |= {"action": {"type": "screenshot"}, "pending_safety_checks": []}
    usage = {
        "input_tokens": 40,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 45,
    }
    doc = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": "gpt-4.1",
        "output": [item],
        "usage": usage,
    }
    return json.dumps(doc).encode()


@pytest.mark.parametrize("kind", ["custom_tool_call", "local_shell_call", "computer_call"])
async def test_a_responses_client_side_call_other_than_a_function_asks_for_tools(
    tmp_path: Path, kind: str
) -> None:
    """Review item E: such items ride along as stubs, not ``tool_calls``; they still ask
    the client to run a tool and call again."""
    async with rig(tmp_path) as r:
        r.upstream.queue(Raw((_custom_call_response(kind),)))
        resp = await r.http.post(
            "/v1/responses",
            json={"model": "gpt-4.1", "instructions": SYSTEM, "input": "go"},
            headers={"authorization": "Bearer sk-client"},
        )
        assert resp.status_code == 200, resp.text
        assert _said(r) == [True]


def _refusal_response() -> bytes:
    message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
    usage = {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26}
    doc = {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o"}
    return json.dumps({**doc, "choices": [choice], "usage": usage}).encode()


async def test_a_chat_client_that_sends_back_a_refusal_can_go_on(tmp_path: Path) -> None:
    """OpenAI answers a refusal as content null + "refusal"; a client keeps that message
    in its history. It was refused with 422 invalid_message at every later turn."""
    async with rig(tmp_path) as r:
        r.upstream.queue(Raw((_refusal_response(),)), Say("sure"))
        history: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "do the bad thing"},
        ]
        for ask in (None, "then something else"):
            if ask is not None:
                history.append({"role": "user", "content": ask})
            resp = await r.http.post(
                "/v1/chat/completions",
                json={"model": "gpt-4o", "messages": history},
                headers={"authorization": "Bearer sk-client", "x-ctxledger-session": "s"},
            )
            assert resp.status_code == 200, resp.text
            history.append(resp.json()["choices"][0]["message"])
        view = r.service.api_messages("s")
        assert view[2] == {
            "role": "assistant",
            "content": None,
            "refusal": "I can't help with that.",
        }
        assert [m["content"] for m in view[-2:]] == ["then something else", "sure"]


def _refusal_stream() -> tuple[bytes, ...]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        doc = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o"}
        return b"data: " + json.dumps({**doc, "choices": [choice]}).encode() + b"\n\n"

    return (
        chunk({"role": "assistant", "content": None, "refusal": ""}),
        chunk({"refusal": "I can't "}),
        chunk({"refusal": "help with that."}),
        chunk({}, "stop"),
        b"data: [DONE]\n\n",
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_reply_is_recorded_as_it_came(tmp_path: Path, stream: bool) -> None:
    """The proxy recorded nothing of a JSON refusal (and an empty text of a streamed
    one): the ledger's view lacked the turn's answer until the client's next request."""
    reply = Raw(_refusal_stream(), "text/event-stream") if stream else Raw((_refusal_response(),))
    async with rig(tmp_path) as r:
        r.upstream.queue(reply)
        resp = await r.http.post(
            "/v1/chat/completions",
            json={
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": "bad"}],
                "stream": stream,
            },
            headers={"authorization": "Bearer sk-client", "x-ctxledger-session": "s"},
        )
        assert resp.status_code == 200, resp.text
        refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        assert r.service.api_messages("s")[-1] == refusal


def test_a_refusal_beside_content_is_recorded_too() -> None:
    """A refusal beside content "" (Azure, gateways) or beside text was dropped."""
    from ctxledger.server.formats import OpenAIStream, SSEEvent, openai_reply

    no = "I can't help with that."
    assert (openai_reply({"content": "", "refusal": no}) or {}).get("refusal") == no
    assert openai_reply({"content": "part", "refusal": no}) == {
        "role": "assistant",
        "content": "part",
        "refusal": no,
    }
    stream = OpenAIStream(wants_usage=False)
    for delta, finish in (({"content": "", "refusal": None}, None), ({"refusal": no}, "stop")):
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        stream.feed(SSEEvent(raw=b"", event=None, data=json.dumps({"choices": [choice]})))
    assert stream.reply() == {"role": "assistant", "content": "", "refusal": no}
    assert "refusal" not in (openai_reply({"content": "hi", "refusal": ""}) or {})


def test_a_refusal_that_is_not_text_from_upstream_is_a_bad_reply() -> None:
    """Review 2 of s36-anylang: an upstream's ``refusal: 5`` was dropped without a word
    (JSON: the client's echo of the reply was then refused; a stream of pieces "a", 5,
    "b" was recorded as "ab"); it is a bad upstream reply, named."""
    from ctxledger.server.formats import OpenAIStream, SSEEvent
    from ctxledger.server.upstream_reply import BadUpstreamReply, check_openai_message

    with pytest.raises(BadUpstreamReply, match=r"choices\[0\]\.message\.refusal must be a string"):
        check_openai_message({"content": None, "refusal": 5}, "choices[0].message")
    stream = OpenAIStream(wants_usage=False)
    choice = {"index": 0, "delta": {"refusal": 5}, "finish_reason": None}
    with pytest.raises(BadUpstreamReply, match=r"delta\.refusal must be a string"):
        stream.feed(SSEEvent(raw=b"", event=None, data=json.dumps({"choices": [choice]})))
