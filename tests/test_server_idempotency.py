"""The state API's ``Idempotency-Key`` on ``POST /v1/sessions/{id}/messages``.

A re-send with the same key and body answers the first answer and appends nothing; the
key on another request is a 422; a bad key is a 400; each held across a server restart
and between two servers on one ledger (SQLite and PostgreSQL), over ASGI and uvicorn.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.pg_server import PgServer
from helpers.uvicorn_thread import serving

from ctxledger import CompressionConfig, ContextService
from ctxledger.server import create_app
from ctxledger.server import idempotency as idem

pytestmark = pytest.mark.anyio
TOKEN = "s3cret-token-for-tests-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TURN = {
    "messages": [
        {"role": "user", "content": "run the tests"},
        {"role": "assistant", "content": "they pass"},
    ]
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_at(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where the ledger is: a SQLite file, or a schema of the private PostgreSQL server."""
    if request.param == "sqlite":
        yield str(tmp_path / "keys.db")
        return
    pg: PgServer = request.getfixturevalue("pg_server")
    mp: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    mp.setenv("CTXLEDGER_INDEX_DIR", str(tmp_path / "indexes"))
    yield f"{pg.url}?schema=k_{hashlib.sha256(str(tmp_path).encode()).hexdigest()[:20]}"


class Server:
    """One server process's app on the ledger, driven over ASGI."""

    def __init__(self, client: httpx.AsyncClient, service: ContextService) -> None:
        self.client, self.service = client, service

    async def post(self, path: str, body: Any, key: str | None = None) -> httpx.Response:
        headers = dict(AUTH) if key is None else {**AUTH, "Idempotency-Key": key}
        return await self.client.post(path, json=body, headers=headers)

    def last_seq(self) -> int:
        self.service.ledger.refresh()
        return self.service.ledger.store.last_seq()


@asynccontextmanager
async def server(at: str) -> AsyncIterator[Server]:
    service = ContextService.open(at, config=CompressionConfig(context_length=8192))
    app = create_app(service, token=TOKEN)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://ledger.test"
    ) as client:
        yield Server(client, service)
    await app.state.ctx.aclose()
    await service.aclose()


async def _start(api: Server) -> str:
    resp = await api.post("/v1/sessions", {"model": "gpt-4.1"})
    assert resp.status_code == 201, resp.text
    sid: str = resp.json()["session_id"]
    return sid


async def test_a_resend_answers_the_first_answer_and_appends_nothing(ledger_at: str) -> None:
    async with server(ledger_at) as api:
        sid = await _start(api)
        first = await api.post(f"/v1/sessions/{sid}/messages", TURN, key="turn-1")
        assert first.status_code == 200, first.text
        assert "Idempotent-Replayed" not in first.headers
        end = api.last_seq()
        again = await api.post(f"/v1/sessions/{sid}/messages", TURN, key="turn-1")
        assert (again.status_code, again.json()) == (200, first.json())
        assert again.headers["Idempotent-Replayed"] == "true"
        assert api.last_seq() == end
        # the draft's structured-field form ("...") is the same key
        quoted = await api.post(f"/v1/sessions/{sid}/messages", TURN, key='"turn-1"')
        assert quoted.json() == first.json() and api.last_seq() == end
        # another key is another request: appended
        other = await api.post(f"/v1/sessions/{sid}/messages", TURN, key="turn-2")
        assert other.status_code == 200 and other.json()["version"] == first.json()["version"] + 2
        view = api.service.ledger.transcript.session(sid)
        assert len(view.live) == 4


async def test_the_key_on_another_request_is_a_422_and_appends_nothing(ledger_at: str) -> None:
    async with server(ledger_at) as api:
        sid, other = await _start(api), await _start(api)
        assert (await api.post(f"/v1/sessions/{sid}/messages", TURN, key="k")).status_code == 200
        end = api.last_seq()
        bodies = [
            (sid, {"messages": [{"role": "user", "content": "something else"}]}),
            (sid, {"messages": TURN["messages"] * 2}),  # more events than the first
            (sid, {**TURN, "expected_version": 3}),
            (other, TURN),  # another session
        ]
        for target, body in bodies:
            resp = await api.post(f"/v1/sessions/{target}/messages", body, key="k")
            assert resp.status_code == 422, resp.text
            error = resp.json()["error"]
            assert error["code"] == "idempotency_key_reused"
            assert "'k' was already used for another request" in error["message"]
            assert api.last_seq() == end


async def test_the_key_holds_across_a_restart_and_between_two_servers(ledger_at: str) -> None:
    async with server(ledger_at) as api:
        sid = await _start(api)
        first = await api.post(f"/v1/sessions/{sid}/messages", TURN, key="once")
        end = api.last_seq()
    async with server(ledger_at) as restarted, server(ledger_at) as second:
        for api in (restarted, second):
            again = await api.post(f"/v1/sessions/{sid}/messages", TURN, key="once")
            assert (again.status_code, again.json()) == (200, first.json())
            reused = await api.post(f"/v1/sessions/{sid}/messages", {"messages": []}, key="x")
            assert reused.status_code == 200  # no messages: nothing stored, nothing kept
            assert api.last_seq() == end


async def test_a_resend_racing_the_first_is_settled_by_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # two servers on one ledger: the second looks before the first has stored the append
    # (its look answers nothing), then appends under the same ids: the store refuses, and
    # the request is answered from what the first stored, or is the key's reuse
    at = str(tmp_path / "race.db")
    async with server(at) as one, server(at) as two:
        sid = await _start(one)
        real = idem.KeyedAppend.stored
        looks: list[int] = []

        def first_look_misses(self: idem.KeyedAppend, ledger: Any, messages: int) -> Any:
            looks.append(messages)
            return None if len(looks) == 1 else real(self, ledger, messages)

        first = await one.post(f"/v1/sessions/{sid}/messages", TURN, key="race")
        end = one.last_seq()
        monkeypatch.setattr(idem.KeyedAppend, "stored", first_look_misses)
        again = await two.post(f"/v1/sessions/{sid}/messages", TURN, key="race")
        assert (again.status_code, again.json()) == (200, first.json())
        assert again.headers["Idempotent-Replayed"] == "true" and len(looks) == 2
        # with an expected version the racing twin finds it passed (a 409 without the key)
        versioned = {**TURN, "expected_version": first.json()["version"]}
        monkeypatch.setattr(idem.KeyedAppend, "stored", real)
        first = await one.post(f"/v1/sessions/{sid}/messages", versioned, key="race-v")
        end = one.last_seq()
        monkeypatch.setattr(idem.KeyedAppend, "stored", first_look_misses)
        looks.clear()
        again = await two.post(f"/v1/sessions/{sid}/messages", versioned, key="race-v")
        assert (again.status_code, again.json()) == (200, first.json())
        looks.clear()
        other = {"messages": [{"role": "user", "content": "not the same"}]}
        reused = await two.post(f"/v1/sessions/{sid}/messages", other, key="race")
        assert reused.json()["error"]["code"] == "idempotency_key_reused"
        assert two.last_seq() == end


async def test_stored_tool_outputs_and_repaired_call_ids_answer_alike(tmp_path: Path) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
    body = {
        "messages": [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "x" * 60_000},
            {"role": "assistant", "content": None, "tool_calls": [call]},  # re-used id
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    }
    async with server(str(tmp_path / "tools.db")) as api:
        sid = await _start(api)
        first = await api.post(f"/v1/sessions/{sid}/messages", body, key="tools")
        notices = first.json()["notices"]
        assert any("stored outside the context" in n for n in notices)
        assert any(n.startswith("repaired message 2") for n in notices)
        end = api.last_seq()
        again = await api.post(f"/v1/sessions/{sid}/messages", body, key="tools")
        assert again.json() == first.json() and api.last_seq() == end


async def test_an_expected_version_resend_is_answered_not_a_409(tmp_path: Path) -> None:
    async with server(str(tmp_path / "v.db")) as api:
        sid = await _start(api)
        version = api.service.ledger.version(sid)
        body = {**TURN, "expected_version": version}
        first = await api.post(f"/v1/sessions/{sid}/messages", body, key="v")
        again = await api.post(f"/v1/sessions/{sid}/messages", body, key="v")
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json()
        plain = await api.post(f"/v1/sessions/{sid}/messages", body)
        assert plain.status_code == 409  # without the key: as before


async def test_a_resend_after_a_compaction_answers_the_first_answer(tmp_path: Path) -> None:
    # the keyed messages are carried into the continuation by id: the re-send still
    # finds the append where it was stored and answers as then (the old session)
    async with server(str(tmp_path / "c.db")) as api:
        sid = await _start(api)
        for i in range(8):
            words = f"step {i}: edited src/mod_{i}.py and ran the suite " + "word " * 80
            turn = [{"role": "user", "content": words}, {"role": "assistant", "content": "ok"}]
            await api.post(f"/v1/sessions/{sid}/messages", {"messages": turn})
        first = await api.post(f"/v1/sessions/{sid}/messages", TURN, key="late")
        done = (await api.post(f"/v1/sessions/{sid}/compress", {})).json()
        assert done["session_id"] != sid  # compacted: a continuation is the tip
        end = api.last_seq()
        again = await api.post(f"/v1/sessions/{sid}/messages", TURN, key="late")
        assert (again.status_code, again.json()) == (200, first.json())
        # the path is part of the request: the same messages sent to the tip are another
        tip = await api.post(f"/v1/sessions/{done['session_id']}/messages", TURN, key="late")
        assert tip.status_code == 422
        assert "a re-send goes to the path of the first send" in tip.json()["error"]["message"]
        assert api.last_seq() == end


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("", "is empty"),
        ('""', "is empty"),
        ("k" * 256, "is 256 characters long; at most 255"),
        ("two words", "holds ' ' at character 4"),
        ("caf\u00e9", "holds 'é' at character 4"),
        ("a\\b", "holds '\\\\' at character 2"),
        ('a"b', "holds '\"' at character 2"),
    ],
)
async def test_a_bad_key_is_a_400_and_appends_nothing(
    tmp_path: Path, header: str, says: str
) -> None:
    async with server(str(tmp_path / "bad.db")) as api:
        sid = await _start(api)
        end = api.last_seq()
        resp = await api.client.post(
            f"/v1/sessions/{sid}/messages",
            json=TURN,
            headers=[*AUTH.items(), ("Idempotency-Key", header.encode("latin-1"))],
        )
        assert resp.status_code == 400, resp.text
        error = resp.json()["error"]
        assert error["code"] == "invalid_idempotency_key"
        assert says in error["message"] and "nothing appended" in error["message"]
        assert api.last_seq() == end


async def test_a_key_sent_twice_or_to_another_write_is_a_400(tmp_path: Path) -> None:
    async with server(str(tmp_path / "twice.db")) as api:
        sid = await _start(api)
        end = api.last_seq()
        twice = await api.client.post(
            f"/v1/sessions/{sid}/messages",
            json=TURN,
            headers=[*AUTH.items(), ("Idempotency-Key", "a"), ("Idempotency-Key", "a")],
        )
        assert twice.status_code == 400 and "was sent 2 times" in twice.text
        for path, body in [
            ("/v1/sessions", {"model": "gpt-4.1"}),
            (f"/v1/sessions/{sid}/usage", {"usage": {"prompt_tokens": 5}}),
            (f"/v1/sessions/{sid}/end", {}),
        ]:
            resp = await api.post(path, body, key="k")
            assert resp.status_code == 400, resp.text
            error = resp.json()["error"]
            assert error["code"] == "idempotency_key_unsupported"
            assert "taken by POST /v1/sessions/{id}/messages only, not by POST" in error["message"]
            assert "send it without the header" in error["message"]
            assert api.last_seq() == end
        schema = (await api.client.get("/openapi.json")).json()
        op = schema["paths"]["/v1/sessions/{session_id}/messages"]["post"]
        assert {"name": "Idempotency-Key", "in": "header"}.items() <= op["parameters"][-1].items()


def test_the_key_over_uvicorn_on_127_0_0_1(ledger_at: str) -> None:
    service = ContextService.open(ledger_at, config=CompressionConfig(context_length=8192))
    app = create_app(service, token=TOKEN, own_service=True)
    with serving(app) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
        sid = http.post("/v1/sessions", json={"model": "m"}, headers=AUTH).json()["session_id"]
        keyed = {**AUTH, "Idempotency-Key": "tcp-1"}
        first = http.post(f"/v1/sessions/{sid}/messages", json=TURN, headers=keyed)
        again = http.post(f"/v1/sessions/{sid}/messages", json=TURN, headers=keyed)
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
        other = http.post(
            f"/v1/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "other"}]},
            headers=keyed,
        )
        assert other.status_code == 422
        status = http.get(f"/v1/sessions/{sid}", headers=AUTH).json()
        assert status["version"] == first.json()["version"]
