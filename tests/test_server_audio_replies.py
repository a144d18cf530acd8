"""An audio reply through the chat proxy (session 37): OpenAI answers an audio model
with content null and an ``audio`` object; a client sends it back as
``{"role": "assistant", "audio": {"id": ...}}``. The proxy recorded nothing of such a
reply and the state API refused the message, so the second turn of an audio
conversation was a 422. The reply is now recorded by its audio id (not its base64
data), and the next turn continues the same session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_upstream import Raw
from helpers.server_rig import rig

from ctxledger.errors import InvalidMessage
from ctxledger.importers.responses import messages_to_items
from ctxledger.messages import validate_message

pytestmark = pytest.mark.anyio

AUDIO = {"id": "audio_abc", "data": "UklGRg==", "expires_at": 1, "transcript": "Hello there"}
SSE = "text/event-stream"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _json_reply() -> Raw:
    message = {"role": "assistant", "content": None, "refusal": None, "audio": AUDIO}
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
    body["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
    body["usage"] = {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}
    return Raw((json.dumps(body).encode(),))


def _stream_reply() -> Raw:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({'id': 'c', 'choices': [choice]})}\n\n".encode()

    pieces = [
        chunk({"role": "assistant", "content": None}),
        chunk({"audio": {"id": "audio_abc", "transcript": "Hello"}}),
        chunk({"audio": {"data": "UklGRg==", "expires_at": 1, "transcript": " there"}}),
        chunk({}, "stop"),
        b"data: [DONE]\n\n",
    ]
    return Raw(tuple(pieces), SSE)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_audio_reply_is_recorded_by_its_id_and_the_next_turn_continues(
    tmp_path: Path, stream: bool
) -> None:
    async with rig(tmp_path) as r:
        headers = {"X-Ctxledger-Session": "voice", "authorization": "Bearer sk"}
        history: list[Any] = [{"role": "user", "content": "say hello"}]
        r.upstream.queue(_stream_reply() if stream else _json_reply())
        body = {"model": "gpt-4o-audio-preview", "messages": history, "stream": stream}
        res = await r.http.post("/v1/chat/completions", json=body, headers=headers)
        assert res.status_code == 200, res.text
        recorded = {"role": "assistant", "content": None, "audio": {"id": "audio_abc"}}
        assert r.service.ledger.api_messages("voice")[-1] == recorded
        history += [{"role": "assistant", "audio": {"id": "audio_abc"}}]
        history += [{"role": "user", "content": "again"}]
        r.upstream.queue(_json_reply())
        body = {"model": "gpt-4o-audio-preview", "messages": history}
        res = await r.http.post("/v1/chat/completions", json=body, headers=headers)
        assert res.status_code == 200, res.text
        assert r.upstream.requests[-1].json["messages"][1] == recorded
        assert len(r.service.ledger.chains.chain("voice")) == 1  # no branch
        assert len(r.service.ledger.api_messages("voice")) == 4


@pytest.mark.parametrize("audio", [{}, {"id": ""}, {"id": 5}, "audio_abc", None])
def test_an_assistant_message_with_no_audio_id_and_no_content_is_still_refused(
    audio: Any,
) -> None:
    with pytest.raises(InvalidMessage, match="neither content nor tool_calls"):
        validate_message({"role": "assistant", "content": None, "audio": audio})


def _reply(message: dict[str, Any]) -> Raw:
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m"}
    body["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
    return Raw((json.dumps(body).encode(),))


@pytest.mark.parametrize(
    ("first", "sent_back"),
    [
        ({"audio": AUDIO}, {"audio": {"id": "audio_other"}}),
        ({"refusal": "No A."}, {"refusal": "No B."}),
    ],
    ids=["audio id", "refusal"],
)
async def test_a_different_audio_id_or_refusal_sent_back_makes_a_branch(
    tmp_path: Path, first: dict[str, Any], sent_back: dict[str, Any]
) -> None:
    """A client that goes on from another reply (another choice of n=2, an edited
    history) must not have the recorded one sent upstream in its place."""
    async with rig(tmp_path) as r:
        headers = {"X-Ctxledger-Session": "v", "authorization": "Bearer sk"}
        history: list[Any] = [{"role": "user", "content": "say hello"}]
        r.upstream.queue(_reply({"role": "assistant", "content": None, **first}))
        body = {"model": "m", "messages": history}
        res = await r.http.post("/v1/chat/completions", json=body, headers=headers)
        assert res.status_code == 200, res.text
        mine = {"role": "assistant", "content": None, **sent_back}
        history += [mine, {"role": "user", "content": "again"}]
        r.upstream.queue(_reply({"role": "assistant", "content": "ok"}))
        body = {"model": "m", "messages": history}
        res = await r.http.post("/v1/chat/completions", json=body, headers=headers)
        assert res.status_code == 200, res.text
        assert r.upstream.requests[-1].json["messages"][1] == mine
        ledger = r.service.ledger
        kinds = sorted(ledger.chains.kind(s.session_id) for s in ledger.sessions())
        assert kinds == ["branch", "root"]


@pytest.mark.parametrize("reopened", [False, True], ids=["same service", "recorded before"])
async def test_a_refusal_sent_back_as_empty_content_goes_on_the_same_line(
    tmp_path: Path, reopened: bool
) -> None:
    """A client that keeps only role and content sends a refusal back as
    ``content: ""``: it continues its line (as it did before refusals were compared),
    also in a conversation recorded before this service started."""
    headers = {"X-Ctxledger-Session": "v", "authorization": "Bearer sk"}
    history: list[Any] = [{"role": "user", "content": "pick a lock"}]
    async with rig(tmp_path) as r:
        r.upstream.queue(_reply({"role": "assistant", "content": None, "refusal": "No."}))
        res = await r.http.post(
            "/v1/chat/completions", json={"model": "m", "messages": history}, headers=headers
        )
        assert res.status_code == 200, res.text
        if not reopened:
            await _send_back_empty(r, history, headers)
    if reopened:
        async with rig(tmp_path) as r:
            await _send_back_empty(r, history, headers)


async def _send_back_empty(r: Any, history: list[Any], headers: dict[str, str]) -> None:
    history = [*history, {"role": "assistant", "content": ""}, {"role": "user", "content": "ok"}]
    r.upstream.queue(_reply({"role": "assistant", "content": "fine"}))
    res = await r.http.post(
        "/v1/chat/completions", json={"model": "m", "messages": history}, headers=headers
    )
    assert res.status_code == 200, res.text
    ledger = r.service.ledger
    assert [ledger.chains.kind(s.session_id) for s in ledger.sessions()] == ["root"]
    assert len(ledger.api_messages("v")) == 4


async def test_a_refusal_recorded_by_the_chat_face_goes_on_through_the_responses_face(
    tmp_path: Path,
) -> None:
    """A Responses client sends the refusal back as an output message with a refusal
    part (the form the Responses face gave it): the same line, no branch."""
    headers = {"X-Ctxledger-Session": "v", "authorization": "Bearer sk"}
    history: list[Any] = [{"role": "user", "content": "pick a lock"}]
    async with rig(tmp_path) as r:
        r.upstream.queue(_reply({"role": "assistant", "content": None, "refusal": "No."}))
        body = {"model": "m", "messages": history}
        res = await r.http.post("/v1/chat/completions", json=body, headers=headers)
        assert res.status_code == 200, res.text
        history = [*r.service.ledger.api_messages("v"), {"role": "user", "content": "ok"}]
        body = {"model": "m", "input": messages_to_items(history)}
        res = await r.http.post("/v1/responses", json=body, headers=headers)
        assert res.status_code == 200, res.text
        ledger = r.service.ledger
        assert [ledger.chains.kind(s.session_id) for s in ledger.sessions()] == ["root"]
