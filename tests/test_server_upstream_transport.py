"""An upstream that fails at the transport level while it answers, not in its format.

Session 29, each a 500 ``internal`` before (after the user's turn was recorded, and in
the header case after the reply was recorded too, so the client lost an answer the
ledger kept):

- a non-streamed body (an answer or an error) cut mid-way by the upstream raised an
  ``httpx`` error while it was read (a ``content-encoding`` is now refused before:
  test_server_upstream_limits.py); it is now a 502 ``upstream_unreachable`` in the face's error shape, and nothing
  of the answer is recorded (the client's resend continues from the user's turn);
- a response header whose value is UTF-8 (httpx decodes it as such) was encoded back
  as Latin-1 to be passed on; the headers are now passed on as the bytes received.

And a 500 of the proxy faces (a bug) left no trace in the server's log; it is logged
with its traceback, as the state API's are.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ctxledger import ContextService
from ctxledger.events import MessageAppended
from ctxledger.server import create_app
from ctxledger.server.proxy import Turn

pytestmark = pytest.mark.anyio

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
REPLY = {
    "id": "c1",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}
CHUNKS = (
    b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
#: a header value as a server sends it in UTF-8 (not Latin-1 text)
ODD_HEADER = "caf\u00e9 \u20ac \U0001f600".encode()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Body(httpx.AsyncByteStream):
    """A body sent as it comes off the wire (httpx decodes its content-encoding while
    it is read, not when the response arrives)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.data


class _CutStream(httpx.AsyncByteStream):
    """A body that stops with the error httpx raises when the peer closes mid-body."""

    def __init__(self, head: bytes) -> None:
        self.head = head

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


async def _answer(
    tmp_path: Path, upstream: Callable[[httpx.Request], httpx.Response], **kw: Any
) -> tuple[httpx.Response, list[str]]:
    """Post CHAT (with `kw` merged in) to a proxy whose upstream answers by `upstream`:
    (the response, the roles recorded)."""
    service = ContextService.open(tmp_path / "s.db")
    app = create_app(service, upstream="http://up.test/v1", transport=httpx.MockTransport(upstream))
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://proxy.test"
        ) as client:
            response = await client.post("/v1/chat/completions", json={**CHAT, **kw})
        events = [rec.event for rec in service.ledger.store.read_all()]
        roles = [e.message["role"] for e in events if isinstance(e, MessageAppended)]
        return response, roles
    finally:
        await app.state.ctx.aclose()
        await service.aclose()


@pytest.mark.parametrize(
    "upstream",
    [
        pytest.param(
            lambda request: httpx.Response(200, stream=_CutStream(json.dumps(REPLY)[:20].encode())),
            id="answer-cut",
        ),
        pytest.param(
            lambda request: httpx.Response(400, stream=_CutStream(b'{"error": {"mess')),
            id="error-cut",
        ),
    ],
)
async def test_an_answer_the_upstream_fails_to_finish_is_a_502_and_records_no_reply(
    tmp_path: Path, upstream: Callable[[httpx.Request], httpx.Response]
) -> None:
    response, roles = await _answer(tmp_path, upstream)
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert error["code"] == "upstream_unreachable" and error["type"] == "server_error"
    assert error["message"].startswith("upstream http://up.test/v1 failed: ")
    assert roles == ["user"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_header_value_that_is_not_latin1_is_passed_on_as_sent(
    tmp_path: Path, stream: bool
) -> None:
    def upstream(request: httpx.Request) -> httpx.Response:
        kind = b"text/event-stream" if stream else b"application/json"
        headers = [(b"content-type", kind), (b"x-upstream-note", ODD_HEADER)]
        body = CHUNKS if stream else json.dumps(REPLY).encode()
        return httpx.Response(200, headers=headers, content=body)

    response, roles = await _answer(tmp_path, upstream, stream=stream)
    assert response.status_code == 200, response.text
    assert dict(response.headers.raw)[b"x-upstream-note"] == ODD_HEADER
    assert roles == ["user", "assistant"]


async def test_an_internal_error_of_the_proxy_is_logged_with_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # the proxy faces answered a bug's 500 in the provider's shape and logged nothing
    async def broken(self: Turn, family: str, context_length: int) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Turn, "record_request", broken)
    with caplog.at_level(logging.ERROR, logger="ctxledger.server"):
        response, _ = await _answer(tmp_path, lambda request: httpx.Response(200, json=REPLY))
    assert response.status_code == 500 and response.json()["error"]["code"] == "internal"
    (record,) = [r for r in caplog.records if r.name == "ctxledger.server"]
    assert record.getMessage() == "POST /v1/chat/completions failed" and record.exc_info


# --- session 32: a stream the upstream cuts, or whose bytes do not decode, or whose one
# event never ends: the client's stream ends with the face's error event (it was the
# half event received, or nothing, and a client saw a stream that just stopped), and
# nothing of the reply is recorded.

_FACES = {
    "openai": ("/v1/chat/completions", {**CHAT, "stream": True}, "openai", b"data: {"),
    "responses": (
        "/v1/responses",
        {"model": "m", "input": "hello", "stream": True},
        "openai",
        b"event: error\ndata: {",
    ),
    "anthropic": (
        "/v1/messages",
        {**CHAT, "max_tokens": 64, "stream": True},
        "anthropic",
        b"event: error\ndata: {",
    ),
}
_SSE = {"content-type": "text/event-stream"}


class _Chunks(httpx.AsyncByteStream):
    """`count` chunks of `chunk`, counting how many were taken."""

    def __init__(self, chunk: bytes, count: int) -> None:
        self.chunk, self.count, self.taken = chunk, count, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.count):
            self.taken += 1
            yield self.chunk


async def _streamed(
    tmp_path: Path, face: str, upstream: Callable[[httpx.Request], httpx.Response]
) -> tuple[httpx.Response, list[str]]:
    path, body, api, _ = _FACES[face]
    service = ContextService.open(tmp_path / "s.db")
    app = create_app(
        service, upstream="http://up.test/v1", transport=httpx.MockTransport(upstream), api=api
    )
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://proxy.test"
        ) as client:
            response = await client.post(path, json=body)
        events = [rec.event for rec in service.ledger.store.read_all()]
        return response, [e.message["role"] for e in events if isinstance(e, MessageAppended)]
    finally:
        await app.state.ctx.aclose()
        await service.aclose()


@pytest.mark.parametrize("face", list(_FACES))
@pytest.mark.parametrize(
    ("upstream", "says"),
    [
        pytest.param(
            lambda request: httpx.Response(
                200, headers=_SSE, stream=_CutStream(b'data: {"type": "x", "cho')
            ),
            "peer closed connection",
            id="cut-mid-event",
        ),
    ],
)
async def test_a_stream_the_upstream_fails_ends_with_an_error_event_and_records_nothing(
    tmp_path: Path, face: str, upstream: Callable[[httpx.Request], httpx.Response], says: str
) -> None:
    response, roles = await _streamed(tmp_path, face, upstream)
    assert response.status_code == 200 and roles == ["user"]
    text = response.text
    assert text.startswith(_FACES[face][3].decode()) and "its stream failed" in text, text
    assert says in text and b'"cho' not in response.content  # (the half event is not sent)


async def test_a_stream_event_that_never_ends_is_cut_at_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ctxledger.server.proxy.MAX_EVENT_BYTES", 64 * 1024)
    endless = _Chunks(b"x" * 16 * 1024, 10_000)  # 160 MB, never a blank line
    response, roles = await _streamed(
        tmp_path, "openai", lambda request: httpx.Response(200, headers=_SSE, stream=endless)
    )
    assert endless.taken <= 6 and roles == ["user"]
    assert "a stream event runs past 65,536 bytes without ending" in response.text
    assert len(response.content) < 4096
