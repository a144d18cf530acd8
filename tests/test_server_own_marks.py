"""The proxy's own message keys never reach the model server (session 44).

A session recorded through the Responses face stores each message's input items
(``responses_items``), a reply's response id and, for an incomplete answer, the
``ctxledger_provisional`` mark. Continued through the chat-completions face, whose view
goes upstream as stored, those keys reached the upstream (session 43's review). The
proxy now strips them from every request it forwards, on every face, in one place
(:func:`ctxledger.server.ownmarks.unmarked_payload`); the ledger keeps them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_upstream import Say
from helpers.incomplete_replies import HALF, as_answer, incomplete_response
from helpers.server_rig import Rig, rig

from ctxledger.importers.responses import STUBS
from ctxledger.server.formats import RESPONSE_ID
from ctxledger.server.history import PROVISIONAL
from ctxledger.server.ownmarks import OWN_KEYS, unmarked, unmarked_payload
from ctxledger.server.proxyfaces import ANTHROPIC, OPENAI
from ctxledger.server.responses_face import RESPONSES
from ctxledger.server.upstream_reply import CUT_IN_A_CALL

pytestmark = pytest.mark.anyio

HEADERS = {"Authorization": "Bearer sk-client", "X-Ctxledger-Session": "mixed"}
ASK = {"role": "user", "content": "What is the plan?"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _own_keys_in(value: Any) -> set[str]:
    """Every key of :data:`OWN_KEYS` anywhere in `value` (nested dicts and lists)."""
    if isinstance(value, dict):
        found = OWN_KEYS.intersection(value)
        for inner in value.values():
            found |= _own_keys_in(inner)
        return set(found)
    if isinstance(value, list):
        return set().union(*map(_own_keys_in, value)) if value else set()
    return set()


async def _recorded_through_responses(r: Rig) -> None:
    """One Responses turn whose answer is incomplete: its messages hold all three marks."""
    r.upstream.queue(as_answer(incomplete_response("text"), False))
    body = {"model": "gpt-4.1", "input": [ASK]}
    assert (await r.http.post("/v1/responses", json=body, headers=HEADERS)).status_code == 200
    stored = r.service.ledger.transcript.live_messages("mixed")
    assert {STUBS, RESPONSE_ID, PROVISIONAL} <= set().union(*map(set, stored))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_chat_continuation_sends_none_of_the_proxys_keys(
    tmp_path: Path, stream: bool
) -> None:
    async with rig(tmp_path) as r:
        await _recorded_through_responses(r)
        r.upstream.queue(Say("Three steps."))
        kept = {"role": "assistant", "content": HALF}  # the chat client keeps the reply
        messages = [ASK, kept, {"role": "user", "content": "Say it whole."}]
        body = {"model": "gpt-4.1", "messages": messages, "stream": stream}
        answer = await r.http.post("/v1/chat/completions", json=body, headers=HEADERS)
        assert answer.status_code == 200, answer.text

        sent = r.upstream.requests[-1]
        assert sent.path.endswith("/chat/completions")
        assert [(m["role"], m["content"]) for m in sent.messages] == [
            (m["role"], m["content"]) for m in messages
        ]
        assert _own_keys_in(sent.json) == set()
        # the ledger keeps them: one session, the reply as recorded, marks and all
        live = r.service.ledger.transcript.live_messages("mixed")
        assert live[1][PROVISIONAL] == "max_output_tokens" and live[1][STUBS]
        assert [m["role"] for m in live] == ["user", "assistant", "user", "assistant"]


async def test_a_responses_continuation_sends_none_of_the_proxys_keys(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        await _recorded_through_responses(r)
        r.upstream.queue(Say("Three steps."))
        reply = {"role": "assistant", "content": HALF}
        body = {"model": "gpt-4.1", "input": [ASK, reply, {"role": "user", "content": "Go on."}]}
        assert (await r.http.post("/v1/responses", json=body, headers=HEADERS)).status_code == 200
        sent = r.upstream.requests[-1]
        assert HALF in json.dumps(sent.items) and _own_keys_in(sent.json) == set()


def _marked_view() -> list[dict[str, Any]]:
    stub = [{"id": "msg_half", "type": "message", "role": "assistant", "status": "incomplete"}]
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the plan?", STUBS: [{"role": "user"}]},
        {"role": "assistant", "content": HALF, STUBS: stub, RESPONSE_ID: "resp_half"}
        | {PROVISIONAL: "max_output_tokens", CUT_IN_A_CALL: True},
        {"role": "user", "content": "Say it whole."},
    ]


@pytest.mark.parametrize("api", [OPENAI, ANTHROPIC, RESPONSES], ids=lambda a: a.name)
def test_every_face_forwards_a_marked_view_unmarked(api: Any) -> None:
    view = _marked_view()
    before = copy.deepcopy(view)
    body = {"model": "gpt-4.1", "max_tokens": 100}
    payload = unmarked_payload(api.upstream(body, view, None))
    assert _own_keys_in(payload) == set()
    assert HALF in json.dumps(payload)
    assert view == before  # (stored messages are shared with the view's cache)


def test_an_unmarked_message_is_passed_on_as_it_is() -> None:
    plain = {"role": "user", "content": "hi", "name": "me"}
    assert unmarked(plain) is plain
    payload = {"messages": [plain]}
    assert unmarked_payload(payload)["messages"][0] is plain
