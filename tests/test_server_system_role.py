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
from helpers.server_rig import Rig, ask, rig, switches

from ctxledger import CompressionConfig
from ctxledger.events import MessageAppended, SystemPromptSet
from ctxledger.importers.responses import STUBS, items_to_messages, messages_to_items
from ctxledger.tokens import count_messages

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


async def _line_recorded_as_system(r: Rig, history: list[Any]) -> None:
    """Session ``s``: the prompt recorded as ``system``, then `history` (no preflight)."""
    await r.service.start_session(
        model="gpt-5", context_length=8192, system_prompt=DEV, session_id="s"
    )
    await r.service.append("s", history)


@pytest.mark.parametrize(
    "bad",
    [
        {"role": "user", "content": 5},
        {"role": "tool", "content": "x"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": 3}}
            ],
        },
    ],
)
async def test_a_refused_request_records_no_role(tmp_path: Path, bad: Any) -> None:
    """The role change goes in the suffix's atomic append: a request whose new message is
    refused (422) leaves the ledger as it was, as on a line that needs no role change."""
    async with rig(tmp_path) as r:
        base = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
        await _line_recorded_as_system(r, base)
        before = r.last_seq()
        body = {"model": "gpt-5", "messages": [{"role": "developer", "content": DEV}, *base, bad]}
        headers = {**AUTH, "X-Ctxledger-Session": "s"}
        res = await r.http.post("/v1/chat/completions", json=body, headers=headers)
        assert res.status_code == 422, res.text
        assert r.last_seq() == before  # nothing appended
        assert _roles(r) == [msgspec.UNSET]


async def test_the_role_change_compacts_only_after_the_new_messages(tmp_path: Path) -> None:
    """A line over the threshold, continued in the other role: the client's new message
    is appended (with the role) before the preflight compacts, as without a role change;
    the compaction's continuation holds the prompt as developer."""
    config = CompressionConfig(context_length=8192)
    async with rig(tmp_path, config=config) as r:
        history: list[Any] = []
        while sum(count_messages(history)) <= config.threshold_tokens(8192):
            i = len(history)
            history += [
                {"role": "user", "content": ask(i, 200)},
                {"role": "assistant", "content": f"a{i}"},
            ]
        await _line_recorded_as_system(r, history)
        await _chat(
            r,
            [{"role": "developer", "content": DEV}, *history, {"role": "user", "content": "NEW"}],
            "s",
        )
        records = [x.event for x in r.service.ledger.store.read_all()]
        [new] = [e for e in records if type(e) is MessageAppended and e.message["content"] == "NEW"]
        assert new.session_id == "s"  # appended before the compaction, to the line's session
        [switch] = switches(r)
        assert switch.session_id == "s" and switch.system_prompt_role == "developer"
        tip = r.service.tip("s")
        assert (await _view(r, tip))[0]["role"] == "developer"


async def test_the_state_api_takes_a_role_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        before = r.last_seq()
        bad = {"model": "gpt-5", "session_id": "x", "system_prompt": DEV, "system_role": "boss"}
        res = await r.http.post("/v1/sessions", json=bad)
        assert res.status_code == 422 and "system_role must be 'system' or 'developer'" in res.text
        assert r.last_seq() == before  # nothing appended
        alone = {"model": "gpt-5", "session_id": "x", "system_role": "developer"}
        res = await r.http.post("/v1/sessions", json=alone)  # no prompt to hold the role
        assert res.status_code == 422 and "'developer' needs a system_prompt" in res.text
        assert r.last_seq() == before
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
