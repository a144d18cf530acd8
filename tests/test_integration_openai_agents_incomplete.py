"""The OpenAI Agents SDK on ``ctxledger serve``'s Responses face: any response left
``incomplete`` (a text cut by the output limit, whole calls) fails the SDK's run
(``ModelBehaviorError``), and its session keeps only the ask. The proxy records such a
reply (a client chaining with ``previous_response_id`` sends nothing back) but marks it
provisional; the SDK's next run, which never had it, withdraws it (``ReplyWithdrawn``)
and goes on in the same session instead of branching (session 43). The reply's original
stays in the log; a client that keeps the reply goes on from it as before."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.frameworks import require

require("agents", "agents")
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    SQLiteSession,
)
from agents.exceptions import ModelBehaviorError, ModelRefusalError
from helpers.agents_runs import run_turn, todo
from helpers.fake_upstream import Raw, Say
from helpers.incomplete_replies import HALF, as_answer, incomplete_response
from helpers.server_rig import Rig, rig

from ctxledger.events import MessageAppended, ReplyWithdrawn, SessionStarted, UsageReported
from ctxledger.server.history import PROVISIONAL

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _events_of(r: Rig) -> list[Any]:
    r.service.ledger.refresh()
    return [x.event for x in r.service.ledger.store.read_all()]


@pytest.mark.parametrize("kind", ["text", "call"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_the_sdks_next_run_withdraws_the_incomplete_reply(
    tmp_path: Path, streamed: bool, kind: str
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(
            as_answer(incomplete_response(kind), streamed), Say("Three steps: a, b, c.")
        )
        client = r.openai(**{"X-Ctxledger-Session": "half"})
        model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
        agent = Agent(name="a", instructions="Be brief.", tools=[todo], model=model)
        session = SQLiteSession("s")

        with pytest.raises(ModelBehaviorError):
            await run_turn(agent, "What is the plan?", session, streamed)
        assert (
            await run_turn(agent, "Say it whole, please.", session, streamed)
            == "Three steps: a, b, c."
        )

        events = _events_of(r)
        assert sum(isinstance(e, SessionStarted) for e in events) == 1  # no branch
        appended = [e for e in events if isinstance(e, MessageAppended)]
        half = [e for e in appended if e.message.get(PROVISIONAL) == "max_output_tokens"]
        assert len(half) == 1 and HALF in str(half[0].message)  # the original, in the log
        withdrawn = [e for e in events if isinstance(e, ReplyWithdrawn)]
        assert [(w.message_ids, w.reason) for w in withdrawn] == [
            ([half[0].message_id], "max_output_tokens")
        ]
        assert sum(isinstance(e, UsageReported) for e in events) == 2  # the incomplete one's too

        # the session is the SDK's: ask, ask, answer; the model was sent the same
        live = r.service.ledger.transcript.live_messages("half")
        assert [(m["role"], m["content"]) for m in live] == [
            ("user", "What is the plan?"),
            ("user", "Say it whole, please."),
            ("assistant", "Three steps: a, b, c."),
        ]
        sdk = await session.get_items()
        assert [i.get("role") for i in sdk] == ["user", "user", "assistant"]
        sent = r.upstream.requests[1].items
        assert HALF not in json.dumps(sent) and "call_whole" not in json.dumps(sent)
        assert [i.get("role") for i in sent] == ["user", "user"]
        assert r.service.ledger.verify().ok


async def test_a_client_that_keeps_the_incomplete_reply_goes_on_from_it(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(as_answer(incomplete_response("text"), False), Say("Three steps."))
        client = r.openai(**{"X-Ctxledger-Session": "kept"})
        first = await client.responses.create(model="gpt-4.1", input="What is the plan?")
        assert first.status == "incomplete"
        kept = [item.model_dump(exclude_none=True) for item in first.output]
        more = {"role": "user", "content": "Go on."}
        second = await client.responses.create(
            model="gpt-4.1", input=[{"role": "user", "content": "What is the plan?"}, *kept, more]
        )
        assert second.output_text == "Three steps."

        events = _events_of(r)
        assert sum(isinstance(e, SessionStarted) for e in events) == 1
        assert not any(isinstance(e, ReplyWithdrawn) for e in events)
        live = r.service.ledger.transcript.live_messages("kept")
        assert [m["role"] for m in live] == ["user", "assistant", "user", "assistant"]
        assert live[1]["content"] == HALF and live[1][PROVISIONAL] == "max_output_tokens"
        assert HALF in json.dumps(r.upstream.requests[1].items)  # the model saw it again
        assert r.service.ledger.verify().ok


async def test_a_client_chaining_from_the_incomplete_reply_goes_on_from_it(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(as_answer(incomplete_response("text"), True), Say("Three steps."))
        client = r.openai(**{"X-Ctxledger-Session": "chained"})
        stream = await client.responses.create(
            model="gpt-4.1", input="What is the plan?", stream=True
        )
        async for _ in stream:
            pass
        second = await client.responses.create(
            model="gpt-4.1", input="Go on.", previous_response_id="resp_half"
        )
        assert second.output_text == "Three steps."
        events = _events_of(r)
        assert not any(isinstance(e, ReplyWithdrawn) for e in events)
        live = r.service.ledger.transcript.live_messages("chained")
        assert [m["role"] for m in live] == ["user", "assistant", "user", "assistant"]


async def test_a_client_dropping_a_complete_reply_still_branches(tmp_path: Path) -> None:
    """Only a provisional reply is withdrawn: a client that drops a whole answer edited
    its history, which stays a branch (the root keeping the answer)."""
    async with rig(tmp_path) as r:
        r.upstream.queue(Say("A whole answer."), Say("Another."))
        client = r.openai(**{"X-Ctxledger-Session": "whole"})
        await client.responses.create(model="gpt-4.1", input="What is the plan?")
        again = [{"role": "user", "content": "What is the plan?"}]
        await client.responses.create(model="gpt-4.1", input=[*again, *again])
        events = _events_of(r)
        assert not any(isinstance(e, ReplyWithdrawn) for e in events)
        starts = [e for e in events if isinstance(e, SessionStarted)]
        assert [s.reason for s in starts] == ["new", "branch"]


@pytest.mark.parametrize(("kind", "call_id"), [("text", "call_nobody"), ("call", "call_whole")])
async def test_a_bad_message_after_an_incomplete_reply_appends_nothing(
    tmp_path: Path, kind: str, call_id: str
) -> None:
    """A result of no call, or of the call of the reply the client went on without (that
    one was accepted with the withdrawal, the view holding a result without its call)."""
    async with rig(tmp_path) as r:
        r.upstream.queue(as_answer(incomplete_response(kind), False))
        client = r.openai(**{"X-Ctxledger-Session": "bad"})
        await client.responses.create(model="gpt-4.1", input="What is the plan?")
        before = r.last_seq()
        bad = {"type": "function_call_output", "call_id": call_id, "output": "x"}
        answer = await r.http.post(
            "/v1/responses",
            json={
                "model": "gpt-4.1",
                "input": [{"role": "user", "content": "What is the plan?"}, bad],
            },
            headers={"X-Ctxledger-Session": "bad", "Authorization": "Bearer sk-client"},
        )
        assert answer.status_code in (400, 422), answer.text
        assert call_id in answer.text
        assert r.last_seq() == before  # no withdrawal, no message, no branch
        live = r.service.ledger.transcript.live_messages("bad")
        assert [m["role"] for m in live] == ["user", "assistant"]


async def test_a_client_may_not_mark_its_own_message_provisional(tmp_path: Path) -> None:
    """The mark is the proxy's: a chat client's message carrying it is recorded without
    it, so a later request that drops that message branches as any edit does."""
    async with rig(tmp_path) as r:
        r.upstream.queue(Say("One."), Say("Two."))
        client = r.openai(**{"X-Ctxledger-Session": "mark"})
        said = {"role": "assistant", "content": "mine", PROVISIONAL: "x"}
        ask = {"role": "user", "content": "Q?"}
        await client.chat.completions.create(model="gpt-4.1", messages=[ask, said, ask])  # type: ignore[list-item]
        await client.chat.completions.create(model="gpt-4.1", messages=[ask, ask])  # type: ignore[list-item]
        events = _events_of(r)
        assert not any(isinstance(e, ReplyWithdrawn) for e in events)
        recorded = [e.message for e in events if isinstance(e, MessageAppended)]
        assert recorded[1] == {"role": "assistant", "content": "mine"}
        assert [s.reason for s in events if isinstance(s, SessionStarted)] == ["new", "branch"]


def _refusal(face: str) -> Raw:
    said = "I can't help with that."
    if face == "chat":
        message = {"role": "assistant", "content": None, "refusal": said}
        body: dict[str, Any] = {"id": "c1", "object": "chat.completion", "created": 1}
        body |= {"model": "gpt-4.1", "choices": [{"index": 0, "message": message}]}
        body["choices"][0]["finish_reason"] = "stop"
        body["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return Raw((json.dumps(body).encode(),))
    response = incomplete_response("text") | {"id": "resp_no", "status": "completed"}
    response["incomplete_details"] = None
    part = {"type": "refusal", "refusal": said}
    response["output"] = [
        {"id": "msg_no", "type": "message", "role": "assistant", "status": "completed"}
        | {"content": [part]}
    ]
    return Raw((json.dumps(response).encode(),))


@pytest.mark.parametrize("face", ["chat", "responses"])
async def test_the_sdks_next_run_withdraws_a_refusal(tmp_path: Path, face: str) -> None:
    """The SDK fails its run on a refusal too (``ModelRefusalError``) and keeps the ask
    only; a refusal is recorded provisional, so the next run goes on (session 42 left
    this branching)."""
    async with rig(tmp_path) as r:
        r.upstream.queue(_refusal(face), Say("Here it is."))
        client = r.openai(**{"X-Ctxledger-Session": "no"})
        model: Any = (
            OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client)
            if face == "chat"
            else OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
        )
        agent = Agent(name="a", instructions="Be brief.", model=model)
        session = SQLiteSession("s")
        with pytest.raises(ModelRefusalError):
            await Runner.run(agent, "Tell me.", session=session)
        assert (await Runner.run(agent, "Please?", session=session)).final_output == "Here it is."
        events = _events_of(r)
        assert sum(isinstance(e, SessionStarted) for e in events) == 1  # no branch
        said = [e for e in events if isinstance(e, MessageAppended)]
        refused = [e for e in said if "help with that" in json.dumps(e.message)]
        assert len(refused) == 1 and PROVISIONAL not in refused[0].message  # stored as it came
        withdrawn = [e for e in events if isinstance(e, ReplyWithdrawn)]
        assert [(w.message_ids, w.reason) for w in withdrawn] == [
            ([refused[0].message_id], "refusal")
        ]
        live = r.service.ledger.transcript.live_messages("no")
        assert [m["role"] for m in live] == ["user", "user", "assistant"]
        assert r.service.ledger.verify().ok


async def test_a_chat_client_that_keeps_a_refusal_goes_on_from_it(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(_refusal("chat"), Say("Fine."))
        client = r.openai(**{"X-Ctxledger-Session": "kept-no"})
        ask = {"role": "user", "content": "Tell me."}
        first = await client.chat.completions.create(model="gpt-4.1", messages=[ask])  # type: ignore[list-item]
        kept = first.choices[0].message.model_dump(exclude_none=True)
        more = {"role": "user", "content": "Something else, then."}
        await client.chat.completions.create(model="gpt-4.1", messages=[ask, kept, more])  # type: ignore[list-item]
        events = _events_of(r)
        assert not any(isinstance(e, ReplyWithdrawn) for e in events)
        assert sum(isinstance(e, SessionStarted) for e in events) == 1
        live = r.service.ledger.transcript.live_messages("kept-no")
        assert [m["role"] for m in live] == ["user", "assistant", "user", "assistant"]
        assert live[1]["refusal"] == "I can't help with that."


async def test_chaining_from_a_withdrawn_reply_says_it_was_withdrawn(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.upstream.queue(as_answer(incomplete_response("text"), False), Say("ok"))
        client = r.openai(**{"X-Ctxledger-Session": "gone"})
        await client.responses.create(model="gpt-4.1", input="What is the plan?")
        ask = {"role": "user", "content": "What is the plan?"}
        await client.responses.create(model="gpt-4.1", input=[ask, ask])  # (withdraws it)
        before = r.last_seq()
        answer = await r.http.post(
            "/v1/responses",
            json={"model": "gpt-4.1", "input": "more", "previous_response_id": "resp_half"},
            headers={"Authorization": "Bearer sk-client"},
        )
        assert answer.status_code == 400, answer.text
        assert "'resp_half' was recorded, then withdrawn" in answer.text
        assert r.last_seq() == before


async def test_an_unknown_incomplete_reason_is_recorded_as_incomplete(tmp_path: Path) -> None:
    """The upstream's ``incomplete_details.reason`` is kept only when it is a known one."""
    async with rig(tmp_path) as r:
        odd = incomplete_response("text")
        odd["incomplete_details"] = {"reason": "\x1b[2Jwhatever"}
        r.upstream.queue(as_answer(odd, False), Say("ok"))
        client = r.openai(**{"X-Ctxledger-Session": "odd"})
        await client.responses.create(model="gpt-4.1", input="What is the plan?")
        ask = {"role": "user", "content": "What is the plan?"}
        await client.responses.create(model="gpt-4.1", input=[ask, ask])
        events = _events_of(r)
        marks = [e.message.get(PROVISIONAL) for e in events if isinstance(e, MessageAppended)]
        assert "incomplete" in marks
        assert [e.reason for e in events if isinstance(e, ReplyWithdrawn)] == ["incomplete"]
