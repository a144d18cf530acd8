"""An upstream that fails at the transport level while it answers, not in its format.

Session 29, each a 500 ``internal`` before (after the user's turn was recorded, and in
the header case after the reply was recorded too, so the client lost an answer the
ledger kept):

- a non-streamed body (an answer or an error) cut mid-way by the upstream, or sent with
  a ``content-encoding`` that does not decode, raised an ``httpx`` error while it was
  read; it is now a 502 ``upstream_unreachable`` in the face's error shape, and nothing
  of the answer is recorded (the client's resend continues from the user's turn);
- a response header whose value is UTF-8 (httpx decodes it as such) was encoded back
  as Latin-1 to be passed on; the headers are now passed on as the bytes received.

And a 500 of the proxy faces (a bug) left no trace in the server's log; it is logged
with its traceback, as the state API's are.
"""

from __future__ import annotations

import gzip
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
        pytest.param(
            lambda request: httpx.Response(
                200, headers={"content-encoding": "gzip"}, stream=_Body(b"not gzip at all")
            ),
            id="answer-undecodable",
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


async def test_an_answer_that_decodes_is_still_read_whole(tmp_path: Path) -> None:
    def upstream(request: httpx.Request) -> httpx.Response:
        body = gzip.compress(json.dumps(REPLY).encode())
        return httpx.Response(200, headers={"content-encoding": "gzip"}, stream=_Body(body))

    response, roles = await _answer(tmp_path, upstream)
    assert response.status_code == 200 and response.json() == REPLY
    assert roles == ["user", "assistant"]


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
