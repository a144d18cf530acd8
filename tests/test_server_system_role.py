"""The system prompt's role over HTTP (session 38): a proxied session led by a developer
message gives it back as ``developer`` (api-messages, a compaction's continuation);
a line recorded with the prompt as ``system`` takes the client's role without a
branch; the state API takes and checks a role; the Responses face records a later
developer item as ``developer`` and still continues a line recorded before as ``system``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from helpers.server_rig import Rig, ask, rig

from ctxledger.events import SystemPromptSet
from ctxledger.importers.responses import STUBS, items_to_messages, messages_to_items

pytestmark = pytest.mark.anyio

DEV = "You are a careful coding agent. Answer briefly."
AUTH = {"authorization": "Bearer sk-client"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _chat(r: Rig, messages: list[Any], session: str) -> list[Any]:
    """Send `messages`, check the answer, return the history with the reply added."""
    body = {"model": "gpt-5", "messages": messages}
    headers = {**AUTH, "X-Ctxledger-Session": session}
    res = await r.http.post("/v1/chat/completions", json=body, headers=headers)
    assert res.status_code == 200, res.text
    return [*messages, res.json()["choices"][0]["message"]]


async def _view(r: Rig, sid: str) -> list[Any]:
    res = await r.http.get(f"/v1/sessions/{sid}/api-messages")
    assert res.status_code == 200, res.text
    messages: list[Any] = res.json()["messages"]
    return messages


def _roles(r: Rig) -> list[Any]:
    return [
        e.event.role for e in r.service.ledger.store.read_all() if type(e.event) is SystemPromptSet
    ]


async def test_a_proxied_developer_led_session_is_read_back_as_developer(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        history: list[Any] = [{"role": "developer", "content": DEV}]
        for i in range(12):
            history = await _chat(r, [*history, {"role": "user", "content": ask(i)}], "d")
        assert (await _view(r, "d"))[0] == {"role": "developer", "content": DEV}
        res = await r.http.post("/v1/sessions/d/compress", json={})
        assert res.status_code == 200, res.text
        tip = res.json()["session_id"]
        assert tip != "d"
        head = (await _view(r, tip))[0]
        assert head["role"] == "developer" and head["content"].startswith(DEV)
        await _chat(r, [*history, {"role": "user", "content": "more"}], "d")  # goes on
        assert r.upstream.requests[-1].json["messages"][0]["role"] == "developer"
        assert [s.session_id for s in r.service.ledger.sessions()] == ["d", tip]
        assert _roles(r) == ["developer"]


async def test_a_line_recorded_as_system_takes_the_clients_role_without_a_branch(
    tmp_path: Path,
) -> None:
    """A session whose prompt was recorded as ``system`` (by main, or a client that used
    that role) continued by a client that sends it as ``developer``: the same line, the
    role recorded once, read back as developer."""
    async with rig(tmp_path) as r:
        start = {"model": "gpt-5", "session_id": "s", "system_prompt": DEV}
        assert (await r.http.post("/v1/sessions", json=start)).status_code == 201
        base = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
        assert (await r.http.post("/v1/sessions/s/messages", json={"messages": base})).is_success
        history = [{"role": "developer", "content": DEV}, *base]
        for i in range(2):
            history = await _chat(r, [*history, {"role": "user", "content": f"q{i}"}], "s")
        assert [s.session_id for s in r.service.ledger.sessions()] == ["s"]  # no branch
        assert _roles(r) == [msgspec.UNSET, "developer"]  # the start's, then the role: once
        assert (await _view(r, "s"))[0] == {"role": "developer", "content": DEV}


async def test_the_state_api_takes_a_role_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        before = r.last_seq()
        bad = {"model": "gpt-5", "session_id": "x", "system_prompt": DEV, "system_role": "boss"}
        res = await r.http.post("/v1/sessions", json=bad)
        assert res.status_code == 422 and "system_role must be 'system' or 'developer'" in res.text
        assert r.last_seq() == before  # nothing appended
        good = {**bad, "system_role": "developer"}
        assert (await r.http.post("/v1/sessions", json=good)).status_code == 201
        assert (await _view(r, "x")) == [{"role": "developer", "content": DEV}]
        before = r.last_seq()
        res = await r.http.post(
            "/v1/sessions/x/system-prompt", json={"system_prompt": "new", "role": "boss"}
        )
        assert res.status_code == 422 and "role must be 'system' or 'developer'" in res.text
        assert r.last_seq() == before
        res = await r.http.post("/v1/sessions/x/system-prompt", json={"system_prompt": "new"})
        assert res.status_code == 200, res.text  # no role: the current one is kept
        assert (await _view(r, "x")) == [{"role": "developer", "content": "new"}]
        res = await r.http.post(
            "/v1/sessions/x/system-prompt", json={"system_prompt": "new", "role": "system"}
        )
        assert res.status_code == 200, res.text
        assert (await _view(r, "x")) == [{"role": "system", "content": "new"}]


LATER_DEV = {
    "type": "message",
    "role": "developer",
    "content": [{"type": "input_text", "text": "Prefer tabs."}],
}


async def _respond(r: Rig, items: list[Any], session: str) -> list[Any]:
    body = {"model": "gpt-5", "input": items, "instructions": DEV}
    headers = {**AUTH, "X-Ctxledger-Session": session}
    res = await r.http.post("/v1/responses", json=body, headers=headers)
    assert res.status_code == 200, res.text
    return [*items, *res.json()["output"]]


async def test_the_responses_face_records_a_later_developer_item_as_developer(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        items = [{"role": "user", "content": "hi"}, LATER_DEV]
        await _respond(r, items, "r")
        view = await _view(r, "r")
        assert [m["role"] for m in view] == ["system", "user", "developer", "assistant"]
        assert r.upstream.requests[-1].json["input"][1]["role"] == "developer"


async def test_a_responses_line_recorded_with_the_item_as_system_goes_on(tmp_path: Path) -> None:
    """Before session 38 the face recorded a later developer item as a ``system`` message
    (its item stub said ``developer``): the client resends it as it was, no branch."""
    async with rig(tmp_path) as r:
        start = {"model": "gpt-5", "session_id": "o", "system_prompt": DEV}
        assert (await r.http.post("/v1/sessions", json=start)).status_code == 201
        items = [
            {"role": "user", "content": "hi"},
            LATER_DEV,
            {"role": "assistant", "content": "ok"},
        ]
        old = items_to_messages(items)
        old[1] = {**old[1], "role": "system"}  # as main recorded it
        assert old[1][STUBS][0]["role"] == "developer"
        assert (await r.http.post("/v1/sessions/o/messages", json={"messages": old})).is_success
        await _respond(
            r,
            [*messages_to_items(items_to_messages(items)), {"role": "user", "content": "next"}],
            "o",
        )
        assert [s.session_id for s in r.service.ledger.sessions()] == ["o"]  # no branch
        assert len(await _view(r, "o")) == 1 + 3 + 2


async def test_a_prompt_sent_with_no_role_keeps_the_role_held(tmp_path: Path) -> None:
    """Responses ``instructions`` (as Anthropic's ``system``) say no role: a prompt held
    as developer stays so; a leading system item says one, and it is recorded."""
    async with rig(tmp_path) as r:
        start = {"model": "gpt-5", "session_id": "n", "system_prompt": DEV}
        start["system_role"] = "developer"
        assert (await r.http.post("/v1/sessions", json=start)).status_code == 201
        items = await _respond(r, [{"role": "user", "content": "hi"}], "n")
        assert _roles(r) == ["developer"]
        assert r.upstream.requests[-1].json["instructions"] == DEV
        body = {
            "model": "gpt-5",
            "input": [{"role": "system", "content": DEV}, *items, {"role": "user", "content": "b"}],
        }
        headers = {**AUTH, "X-Ctxledger-Session": "n"}
        res = await r.http.post("/v1/responses", json=body, headers=headers)
        assert res.status_code == 200, res.text
        assert _roles(r) == ["developer", msgspec.UNSET]
        assert [s.session_id for s in r.service.ledger.sessions()] == ["n"]
