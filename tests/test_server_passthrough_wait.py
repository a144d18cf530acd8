"""The endpoints passed on unchanged (``/v1/models``, embeddings, Anthropic's
count_tokens) wait for the upstream as a proxied turn does (session 41).

They kept a fixed 600 s read timeout of their own and did not watch for the client
hanging up: an SDK that timed out and retried left each try's upstream request
running (up to 600 s), and ``--turn-timeout`` did not reach them. Now a hang-up
cancels the upstream request (499 ``client_closed``, nothing recorded) and an
upstream silent for ``turn_timeout`` seconds is a 502 ``upstream_unreachable``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from helpers.asgi import http_scope, request_body, serve_lifespan
from helpers.server_rig import rig
from helpers.uvicorn_thread import serving

from ctxledger import ContextService
from ctxledger.server import create_app

pytestmark = pytest.mark.anyio

#: (face, method, path, body) of each endpoint passed on unchanged
CASES = [
    ("openai", "GET", "/v1/models", None),
    ("openai", "GET", "/v1/models/gpt-x", None),
    ("openai", "POST", "/v1/embeddings", {"model": "e", "input": "hi"}),
    ("anthropic", "GET", "/v1/models", None),
    ("anthropic", "POST", "/v1/messages/count_tokens", {"model": "c", "messages": []}),
]
IDS = ["models", "model", "embeddings", "anthropic-models", "count-tokens"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _call_hanging_up(
    app: Any, method: str, path: str, body: dict[str, Any] | None, when: anyio.Event
) -> int:
    """Call `app` as a server would, the client hanging up once `when` is set; the
    status the app answered (the test fails after 10 s without one)."""
    sent = [False]

    async def receive() -> dict[str, Any]:
        if not sent[0]:
            sent[0] = True
            data = json.dumps(body).encode() if body is not None else b""
            return {"type": "http.request", "body": data, "more_body": False}
        await when.wait()
        return {"type": "http.disconnect"}

    started: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.append(message["status"])

    headers = [(b"content-type", b"application/json"), (b"authorization", b"Bearer sk-c")]
    scope = http_scope(method, path, headers, port=5000)
    with anyio.fail_after(10):  # (without the watch: the upstream's 30 s)
        await app(scope, receive, send)
    return started[0]


@pytest.mark.parametrize(("api", "method", "path", "body"), CASES, ids=IDS)
async def test_a_hang_up_cancels_the_passed_on_request(
    tmp_path: Path, api: str, method: str, path: str, body: dict[str, Any] | None
) -> None:
    """A client that hangs up while the upstream thinks: the upstream request is
    cancelled (not left running), the proxy answers 499, nothing is recorded, and the
    next request is answered."""
    async with rig(tmp_path, api=api) as r:
        asked = anyio.Event()
        r.upstream.delay = 30.0  # never waited for: the hang-up cancels it
        r.upstream.on_request = lambda seen: asked.set()
        status = await _call_hanging_up(r.app, method, path, body, asked)
        assert status == 499
        assert r.upstream.in_flight == 0 and r.upstream.turn == 0  # cancelled, unanswered
        assert r.service.ledger.store.last_seq() == 0  # nothing recorded
        r.upstream.delay, r.upstream.on_request = 0.0, None
        again = await r.http.request(method, path, json=body)
        assert again.status_code == 200 and len(r.upstream.requests) == 2


async def _silent_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An upstream that takes the request and then says nothing (a hung server, a
    half-open connection) until the proxy hangs up; to an embeddings request it sends
    its headers and the start of a body first (the silence falls mid-body)."""
    if scope["type"] == "lifespan":
        await serve_lifespan(receive, send)
        return
    await request_body(receive)
    if scope["path"].endswith("/embeddings"):
        start = {"type": "http.response.start", "status": 200}
        await send({**start, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"data": [', "more_body": True})
    while (await receive())["type"] != "http.disconnect":
        pass


@pytest.mark.parametrize(
    ("api", "method", "path", "body"), [CASES[0], CASES[2], CASES[4]], ids=[IDS[0], IDS[2], IDS[4]]
)
async def test_a_silent_upstream_is_given_up_after_the_turn_timeout(
    tmp_path: Path, api: str, method: str, path: str, body: dict[str, Any] | None
) -> None:
    """A client with no timeout of its own and an upstream that never answers (or stops
    mid-body): a 502 ``upstream_unreachable`` after ``turn_timeout`` (0.3 s here), in
    the face's error shape; nothing recorded."""
    service = ContextService.open(tmp_path / "server.db")
    with serving(_silent_upstream) as port:
        base = f"http://127.0.0.1:{port}" + ("/v1" if api == "openai" else "")
        app = create_app(service, api=api, upstream=base, turn_timeout=0.3)
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(
            transport=transport, base_url="http://proxy.test", timeout=None
        ) as http:
            with anyio.fail_after(20):  # (with the old 600 s: no answer in time)
                resp = await http.request(method, path, json=body)
        await app.state.ctx.aclose()
    assert resp.status_code == 502
    error = resp.json()["error"]
    assert error["code"] == "upstream_unreachable"
    assert "timed out" in error["message"].lower() or "timeout" in error["message"].lower()
    assert service.ledger.store.last_seq() == 0
    await service.aclose()
