"""OpenAI's ``developer`` role (o-series / gpt-5 clients, the OpenAI SDKs and Agents SDK)
through the chat proxy and the state API, driven with raw httpx as a client in another
language would (session 37): forwarded upstream as sent, recorded as sent, protected
like the system prompt by compaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_upstream import Say
from helpers.server_rig import Rig, ask, rig, switches

from ctxledger import CompressionConfig
from ctxledger.importers.anthropic import parse_anthropic
from ctxledger.importers.export import export_messages
from ctxledger.importers.responses import STUBS, messages_to_items
from ctxledger.messages import validate_message
from ctxledger.tokens import count_message

pytestmark = pytest.mark.anyio

DEV = "You are a careful coding agent. Answer briefly."
AUTH = {"authorization": "Bearer sk-client"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _chat(r: Rig, messages: list[Any], **headers: str) -> Any:
    body = {"model": "gpt-5", "messages": messages}
    return await r.http.post("/v1/chat/completions", json=body, headers={**AUTH, **headers})


@pytest.mark.parametrize("content", [DEV, [{"type": "text", "text": DEV}]])
async def test_a_leading_developer_message_goes_upstream_as_developer(
    tmp_path: Path, content: Any
) -> None:
    async with rig(tmp_path) as r:
        history: list[Any] = [{"role": "developer", "content": content}]
        for i in range(2):
            history.append({"role": "user", "content": f"question {i}"})
            res = await _chat(r, history, **{"X-Ctxledger-Session": "dev"})
            assert res.status_code == 200, res.text
            history.append(res.json()["choices"][0]["message"])
            sent = r.upstream.requests[-1].json["messages"]
            assert sent[0] == history[0]  # as sent: its role, and list content as a list
            assert sent[1:] == [{k: v for k, v in m.items()} for m in history[1:-1]]
        ledger = r.service.ledger
        assert ledger.transcript.session("dev").system_prompt == DEV  # one session, no branch
        assert len(ledger.chains.chain("dev")) == 1


@pytest.mark.parametrize("role", ["developer", "system"])
async def test_a_leading_instruction_message_is_forwarded_byte_for_byte(
    tmp_path: Path, role: str
) -> None:
    """Its ``name`` and list content reach the upstream as the client sent them (they
    were dropped and flattened: the ledger keeps the prompt as text)."""
    lead = {"role": role, "content": [{"type": "text", "text": DEV}], "name": "policy"}
    async with rig(tmp_path) as r:
        res = await _chat(r, [lead, {"role": "user", "content": "hi"}])
        assert res.status_code == 200, res.text
        assert r.upstream.requests[0].json["messages"][0] == lead
        (session,) = r.service.ledger.sessions()
        assert r.service.ledger.transcript.session(session.session_id).system_prompt == DEV


async def test_a_developer_message_after_the_system_prompt_is_recorded_and_sent_as_is(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        dev = {"role": "developer", "content": "Prefer tabs.", "name": "policy"}
        messages = [{"role": "system", "content": DEV}, dev, {"role": "user", "content": "hi"}]
        res = await _chat(r, messages, **{"X-Ctxledger-Session": "mid"})
        assert res.status_code == 200, res.text
        assert r.upstream.requests[0].json["messages"] == messages
        view = (await r.http.get("/v1/sessions/mid/api-messages")).json()
        assert view["messages"][:3] == messages
        recorded = view["messages"][1:]  # the developer message counts as any message
        live = r.service.ledger.transcript.session("mid").live_tokens
        assert live == sum(count_message(m) for m in recorded)


async def test_the_state_api_takes_a_developer_message_and_refuses_an_empty_one(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        started = await r.http.post("/v1/sessions", json={"model": "gpt-5", "session_id": "s"})
        assert started.status_code == 201, started.text
        before = r.last_seq()
        bad = {"messages": [{"role": "developer", "content": None}]}
        res = await r.http.post("/v1/sessions/s/messages", json=bad)
        assert res.status_code == 422, res.text
        assert "developer message has no content" in res.json()["error"]["message"]
        assert r.last_seq() == before  # nothing appended
        good = [{"role": "developer", "content": "Use pytest."}, {"role": "user", "content": "go"}]
        res = await r.http.post("/v1/sessions/s/messages", json={"messages": good})
        assert res.status_code == 200, res.text
        view = (await r.http.get("/v1/sessions/s/api-messages")).json()
        assert view["messages"] == good


@pytest.mark.parametrize("face", ["chat", "responses"])
async def test_a_state_api_session_led_by_a_developer_message_goes_on_through_a_face(
    tmp_path: Path, face: str
) -> None:
    """A session whose first message is a developer message (the state API stores it as
    a message) continued through a face with the same messages: the same line, and the
    developer message goes upstream as it is, no fork; the same request sent again (a
    retry) is recognised as answered, not a branch."""
    async with rig(tmp_path) as r:
        assert (
            await r.http.post("/v1/sessions", json={"model": "gpt-5", "session_id": "c"})
        ).status_code == 201
        base = [
            {"role": "developer", "content": "Use pytest."},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": "ok"},
        ]
        assert (await r.http.post("/v1/sessions/c/messages", json={"messages": base})).is_success
        more = [*base, {"role": "user", "content": "next"}]
        headers = {**AUTH, "X-Ctxledger-Session": "c"}
        ledger = r.service.ledger
        for _ in range(2):  # the turn, then a retry of it
            if face == "chat":
                res = await _chat(r, more, **headers)
            else:
                body = {"model": "gpt-5", "input": messages_to_items(more)}
                res = await r.http.post("/v1/responses", json=body, headers=headers)
            assert res.status_code == 200, res.text
            assert [s.session_id for s in ledger.sessions()] == ["c"]  # no branch
        assert len(ledger.api_messages("c")) == 5  # the retry recorded nothing
        recorded = [{k: v for k, v in m.items() if k != STUBS} for m in ledger.api_messages("c")]
        assert recorded[:4] == more
        sent = r.upstream.requests[-1].json
        first = sent["messages"][0] if face == "chat" else sent["input"][0]
        assert first["role"] == "developer"


def test_developer_is_a_message_role_and_exports_round_trip() -> None:
    dev = {"role": "developer", "content": "Use pytest."}
    assert validate_message(dev) == dev
    doc = json.loads(export_messages(None, [{"role": "user", "content": "a"}, dev], "anthropic"))
    assert doc["messages"][1] == {**dev, "role": "user", "ctxledger_role": "developer"}
    assert parse_anthropic(json.dumps(doc))[0].messages[1] == dev  # and back


async def test_compaction_keeps_a_developer_system_prompt_and_its_role(tmp_path: Path) -> None:
    config = CompressionConfig(context_length=8192)
    async with rig(tmp_path, config=config) as r:
        history: list[Any] = [{"role": "developer", "content": DEV}]
        for i in range(40):
            history.append({"role": "user", "content": ask(i)})
            r.upstream.queue(Say(f"done {i}"))
            res = await _chat(r, history, **{"X-Ctxledger-Session": "long"})
            assert res.status_code == 200, res.text
            history.append(res.json()["choices"][0]["message"])
        assert switches(r)
        for seen in r.upstream.requests:
            first = seen.json["messages"][0]
            assert first["role"] == "developer" and first["content"].startswith(DEV)


async def test_a_leading_developer_message_outlives_every_compaction_as_sent(
    tmp_path: Path,
) -> None:
    """A session without a system prompt whose first message is a developer message: it
    is the head Hermes keeps (the system prompt's place), carried by id with its role,
    never summarized, on the first compaction and after it (no fossilized-head rule)."""
    dev = {"role": "developer", "content": "INSTRUCTION: indent with tabs"}
    async with rig(tmp_path) as r:
        start = {"model": "gpt-5", "session_id": "s", "context_length": 8192}
        assert (await r.http.post("/v1/sessions", json=start)).status_code == 201
        sid, batch = "s", [dev]
        for round_ in range(2):
            for i in range(8):
                batch += [
                    {"role": "user", "content": ask(i)},
                    {"role": "assistant", "content": "ok"},
                ]
            res = await r.http.post(f"/v1/sessions/{sid}/messages", json={"messages": batch})
            assert res.status_code == 200, res.text
            res = await r.http.post(f"/v1/sessions/{sid}/compress", json={})
            assert res.status_code == 200, res.text
            sid, batch = res.json()["session_id"], []
            view = (await r.http.get(f"/v1/sessions/{sid}/api-messages")).json()["messages"]
            assert view[0] == dev, round_
            assert all(m["role"] != "developer" for m in view[1:])
        assert len(switches(r)) == 2
        replay = (await r.http.get(f"/v1/sessions/{sid}/replay", params={"verify": "true"})).json()
        assert replay["equal"] is True and replay["drifted"] is False
