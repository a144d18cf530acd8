"""Shared set-up of the server tests: a ledger, the app, a fake upstream, real SDK clients.

Everything runs in-process: the SDKs (which use ``httpx2``) reach the app through
``httpx2.ASGITransport``; the app reaches the fake upstream through
``httpx.ASGITransport`` (``raise_app_exceptions=False``, so an upstream that dies
mid-stream delivers what it sent, as a cut connection would).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import httpx2
import openai
from starlette.applications import Starlette

from ctxledger import CompressionConfig, ContextService
from ctxledger.events import SessionSwitched
from ctxledger.server import create_app
from ctxledger.server.state import ServerState
from helpers.asgi import http_scope
from helpers.fake_upstream import FakeUpstream


@dataclass
class Rig:
    app: Starlette
    service: ContextService
    upstream: FakeUpstream
    http: httpx2.AsyncClient

    @property
    def state(self) -> ServerState:
        state: ServerState = self.app.state.ctx
        return state

    def openai(self, **headers: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url="http://proxy.test/v1",
            api_key="sk-client",
            max_retries=0,
            http_client=self.http,
            default_headers=headers or None,
        )

    def anthropic(self, **headers: str) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url="http://proxy.test",
            api_key="sk-ant-client",
            max_retries=0,
            http_client=self.http,
            default_headers=headers or None,
        )

    def last_seq(self) -> int:
        return self.service.ledger.store.last_seq()


@asynccontextmanager
async def rig(
    tmp_path: Path,
    *,
    api: str = "openai",
    config: CompressionConfig | None = None,
    provider: str | None = None,
    ledger: dict[str, Any] | None = None,
    base: str | None = None,
    **settings: Any,
) -> AsyncIterator[Rig]:
    """`ledger`: the ledger's own arguments (``clock``, ``ids``), e.g. deterministic ids
    for a test whose compactions depend on token counts of the ids the ledger makes;
    `base`: the ``--upstream`` URL (the provider's usual form by default)."""
    upstream = FakeUpstream()
    service = ContextService.open(
        tmp_path / "server.db", config=config, provider=provider, **(ledger or {})
    )
    app = create_app(
        service,
        api=api,
        upstream=base or ("http://upstream.test/v1" if api == "openai" else "http://upstream.test"),
        transport=httpx.ASGITransport(app=upstream, raise_app_exceptions=False),
        **settings,
    )
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://proxy.test")
    try:
        yield Rig(app=app, service=service, upstream=upstream, http=http)
    finally:
        await http.aclose()
        await app.state.ctx.aclose()
        await service.aclose()


def ask(i: int, words: int = 40) -> str:
    """A user turn of a long proxied conversation (about `words` + 10 tokens)."""
    return f"Step {i}: please check module_{i}.py and report. " + " ".join(
        f"detail{i}_{j}" for j in range(words)
    )


def switches(r: Rig) -> list[SessionSwitched]:
    """Every compaction's switch event in the rig's ledger, in log order."""
    return [
        rec.event
        for rec in r.service.ledger.store.read_all()
        if isinstance(rec.event, SessionSwitched)
    ]


async def send_raw(
    app: Any,
    method: str,
    path: str,
    query: bytes,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    *,
    timeout: float = 10,
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One request straight into the ASGI `app` (no client library to clean its bytes
    first): the status, headers and body answered within `timeout` seconds."""
    sent: list[dict[str, Any]] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if delivered:
            await anyio.sleep_forever()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(timeout):
        await app(http_scope(method, path, headers, query), receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], list(start.get("headers", ())), body
