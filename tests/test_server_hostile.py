"""Hostile bodies through the HTTP state API: the same limits as the library and the CLI.

Nesting is refused before the body is decoded (no RecursionError, no 500), numbers
out of range get the library's own error, a number JSON cannot hold (``1e400``) is
named; every refusal is a 4xx with a code and appends nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from ctxledger import CompressionConfig, ContextService
from ctxledger.server import create_app

pytestmark = pytest.mark.anyio
TOKEN = "hostile-token-for-tests-0123456789"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, ContextService]]:
    service = ContextService.open(tmp_path / "h.db", config=CompressionConfig(context_length=8192))
    app = create_app(service, token=TOKEN)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://ledger.test"
    ) as http:
        yield http, service
    await app.state.ctx.aclose()
    await service.aclose()


def deep_message(levels: int) -> str:
    body = json.dumps({"messages": [{"role": "user", "content": "HOLE"}]})
    return body.replace('"HOLE"', "[" * levels + "]" * levels)


def deep_arguments(levels: int) -> str:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "HOLE"}}
    body = json.dumps({"messages": [{"role": "assistant", "content": None, "tool_calls": [call]}]})
    return body.replace('"HOLE"', json.dumps("[" * levels + "]" * levels))


BODIES = {
    "a message 10,000 levels deep": (deep_message(10_000), 400, "too_deep"),
    "a 100,000-deep top-level array": ("[" * 100_000 + "]" * 100_000, 400, "too_deep"),
    "tool-call arguments 900 levels deep": (deep_arguments(900), 422, "invalid_message"),
}


@pytest.mark.parametrize("case", list(BODIES))
async def test_deep_bodies_are_refused_before_decoding(
    client: tuple[httpx.AsyncClient, ContextService], case: str
) -> None:
    http, service = client
    sid = (await http.post("/v1/sessions", json={"model": "m"}, headers=HEADERS)).json()[
        "session_id"
    ]
    before = service.ledger.store.last_seq()
    body, status, code = BODIES[case]
    resp = await http.post(f"/v1/sessions/{sid}/messages", content=body, headers=HEADERS)
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["code"] == code and "deeper than" in error["message"]
    assert service.ledger.store.last_seq() == before


USAGE = {
    "10^30": ('{"usage": {"prompt_tokens": 1000000000000000000000000000000}}', "out of range"),
    "2^63": (f'{{"usage": {{"prompt_tokens": {2**63}}}}}', "out of range"),
    "a float": ('{"usage": {"prompt_tokens": 12.7}}', "whole number"),
    "1e400": ('{"usage": {"prompt_tokens": 1e400}}', "Number out of range"),
}


@pytest.mark.parametrize("case", list(USAGE))
async def test_out_of_range_usage_is_refused_with_the_librarys_rule(
    client: tuple[httpx.AsyncClient, ContextService], case: str
) -> None:
    http, service = client
    sid = (await http.post("/v1/sessions", json={"model": "m"}, headers=HEADERS)).json()[
        "session_id"
    ]
    before = service.ledger.store.last_seq()
    body, words = USAGE[case]
    resp = await http.post(f"/v1/sessions/{sid}/usage", content=body, headers=HEADERS)
    assert resp.status_code in (400, 422) and words in resp.json()["error"]["message"], resp.text
    assert service.ledger.store.last_seq() == before


@pytest.mark.parametrize("value", ["1000000000000000000000000000000", "1e400", "12.5", "0"])
async def test_out_of_range_context_length_starts_no_session(
    client: tuple[httpx.AsyncClient, ContextService], value: str
) -> None:
    http, service = client
    before = service.ledger.store.last_seq()
    body = f'{{"model": "m", "context_length": {value}}}'
    resp = await http.post("/v1/sessions", content=body, headers=HEADERS)
    assert resp.status_code in (400, 422), resp.text
    assert "context_length" in resp.text or "Number out of range" in resp.text
    assert service.ledger.store.last_seq() == before
