"""A provisional reply a compaction carried into a continuation (session 44).

The proxy records a Responses answer left ``incomplete`` and marks it provisional; the
OpenAI Agents SDK fails its run on it and its next run goes on without it (session 43:
``ReplyWithdrawn``). When the proxy compacted right after recording that reply (its
usage reached the threshold), the continuation's view ends with the reply, carried
verbatim: the withdrawal goes to the continuation, the line's recorded history leaves
the reply out of the ended session's messages, and nothing branches. (The proxy
compacts in the loop after a reply that asks for calls; after a text reply it compacts
at the next request's preflight, after the withdrawal.) A compaction that
took the reply into a summary leaves nothing to withdraw: the request branches, as
before, and the proxy's log says why. A what-if of such a session reproduces it."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from helpers.frameworks import require

require("agents", "agents")
from agents import Agent, OpenAIResponsesModel, SQLiteSession
from agents.exceptions import ModelBehaviorError
from helpers.agents_runs import run_turn, todo
from helpers.fake_upstream import Say
from helpers.incomplete_replies import HALF, as_answer, incomplete_response
from helpers.server_rig import Rig, ask, rig

from ctxledger import CompressionConfig
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.analysis.undo import undo
from ctxledger.analysis.whatif import whatif
from ctxledger.events import (
    LayoutEntry,
    MessageAppended,
    ReplyWithdrawn,
    SessionStarted,
    SessionSwitched,
)
from ctxledger.ledger import compaction
from ctxledger.server.history import PROVISIONAL

pytestmark = pytest.mark.anyio

#: a small window, so the incomplete answer's usage (7,000 input tokens) compacts
CONTEXT = {"X-Ctxledger-Context-Length": "8000"}
CONFIG = CompressionConfig(threshold_floor_tokens=0)
TURNS = 6


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _recorded(r: Rig) -> list[Any]:
    r.service.ledger.refresh()
    return list(r.service.ledger.store.read_all())


def _the_reply(records: list[Any]) -> Any:
    """The incomplete reply's ``MessageAppended`` (marked provisional)."""
    (half,) = [
        rec.event
        for rec in records
        if isinstance(rec.event, MessageAppended) and rec.event.message.get(PROVISIONAL)
    ]
    return half


def _carried_then_withdrawn(r: Rig, family: str) -> tuple[str, str]:
    """Checks one compaction carried the reply into a continuation, which withdrew it
    (no branch); the reply's id and the continuation's."""
    records = _recorded(r)
    starts = [rec.event.reason for rec in records if isinstance(rec.event, SessionStarted)]
    assert starts == ["new", "compression"]
    half = _the_reply(records)
    assert half.session_id == family and HALF in json.dumps(half.message)
    (switch,) = [rec.event for rec in records if isinstance(rec.event, SessionSwitched)]
    assert switch.layout[-1].message_id == half.message_id  # carried verbatim, last
    withdrawn = [rec for rec in records if isinstance(rec.event, ReplyWithdrawn)]
    assert [(w.stream, w.event.message_ids, w.event.reason) for w in withdrawn] == [
        (switch.new_session_id, [half.message_id], "max_output_tokens")
    ]
    return half.message_id, switch.new_session_id


async def _replays_as_recorded(r: Rig, family: str) -> None:
    ledger = r.service.ledger
    assert ledger.verify().ok
    assert rebuild_check(ledger, family).equal
    assert not verify_compactions(ledger, family).drifted
    report = await anyio.to_thread.run_sync(lambda: whatif(ledger, family))
    assert report.reproduces_recorded, report.reproduction.differences
    assert not any("withdrawal" in note for note in report.notes), report.notes


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_sdks_next_run_withdraws_a_reply_a_compaction_carried(
    tmp_path: Path, streamed: bool
) -> None:
    async with rig(tmp_path, config=CONFIG) as r:
        half = as_answer(incomplete_response("call", input_tokens=7000), streamed)
        earlier = [Say(f"ok {i} " + ask(i, 60)) for i in range(TURNS)]
        r.upstream.queue(*earlier, half, Say("Three steps: a, b, c."), Say("Welcome."))
        client = r.openai(**{"X-Ctxledger-Session": "carried", **CONTEXT})
        model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
        agent = Agent(name="a", instructions="Be brief.", tools=[todo], model=model)
        session = SQLiteSession("s")
        for i in range(TURNS):
            await run_turn(agent, ask(i, 60), session, streamed)

        with pytest.raises(ModelBehaviorError):
            await run_turn(agent, "What is the plan?", session, streamed)
        said = await run_turn(agent, "Say it whole, please.", session, streamed)
        assert said == "Three steps: a, b, c."
        assert await run_turn(agent, "Thanks.", session, streamed) == "Welcome."

        reply, continuation = _carried_then_withdrawn(r, "carried")
        ledger = r.service.ledger
        assert ledger.tip("carried") == continuation  # the third run went on there too
        live = ledger.transcript.live_ids(continuation)
        assert reply not in live and ledger.transcript.original(reply)["content"] == HALF
        tail = [(m["role"], m["content"]) for m in ledger.transcript.live_messages(continuation)]
        assert tail[-5:] == [
            ("user", "What is the plan?"),
            ("user", "Say it whole, please."),
            ("assistant", "Three steps: a, b, c."),
            ("user", "Thanks."),
            ("assistant", "Welcome."),
        ]
        sdk = await session.get_items()
        assert [i.get("role") for i in sdk][-5:] == [
            "user",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        for sent in r.upstream.requests[-2:]:  # what the model saw after the withdrawal
            assert HALF not in json.dumps(sent.items)
        await _replays_as_recorded(r, "carried")


HEADERS = {"Authorization": "Bearer sk-client", "X-Ctxledger-Session": "cp", **CONTEXT}


async def _post(r: Rig, history: list[dict[str, Any]], **extra: Any) -> Any:
    body = {"model": "gpt-4.1", "input": history, **extra}
    return await r.http.post("/v1/responses", json=body, headers=HEADERS)


async def _up_to_the_incomplete_reply(r: Rig) -> list[dict[str, Any]]:
    """Plain HTTP turns through the Responses face, the last answer incomplete, with a
    whole call (the proxy compacts in the loop after recording it: an answer without
    calls leaves that to the next request's preflight, after the withdrawal); the
    client's history, which keeps only the asks."""
    half = as_answer(incomplete_response("call", input_tokens=7000), False)
    r.upstream.queue(*[Say(f"ok {i} " + ask(i, 60)) for i in range(TURNS)], half)
    history: list[dict[str, Any]] = []
    for i in range(TURNS):
        history.append({"role": "user", "content": ask(i, 60)})
        answer = await _post(r, history)
        assert answer.status_code == 200, answer.text
        said = answer.json()["output"][0]["content"][0]["text"]
        history.append({"role": "assistant", "content": said})
    history.append({"role": "user", "content": "What is the plan?"})
    assert (await _post(r, history)).status_code == 200
    return history


async def test_a_plain_client_goes_on_without_a_carried_reply(tmp_path: Path) -> None:
    async with rig(tmp_path, config=CONFIG) as r:
        history = await _up_to_the_incomplete_reply(r)
        r.upstream.queue(Say("Three steps."), Say("Welcome."))
        history.append({"role": "user", "content": "Say it whole."})
        assert (await _post(r, history)).status_code == 200
        history += [
            {"role": "assistant", "content": "Three steps."},
            {"role": "user", "content": "Thanks."},
        ]
        assert (await _post(r, history)).status_code == 200

        _carried_then_withdrawn(r, "cp")
        assert "call_whole" not in json.dumps(r.upstream.requests[-1].items)
        # chaining from the withdrawn reply says so (the line no longer holds it)
        gone = await _post(r, "more", previous_response_id="resp_half")  # type: ignore[arg-type]
        assert gone.status_code == 400 and "was recorded, then withdrawn" in gone.text
        await _replays_as_recorded(r, "cp")


async def test_an_undo_after_the_withdrawal_keeps_the_reply_out(tmp_path: Path) -> None:
    """Undoing the compaction restores the ended session's view, which still holds the
    reply: the undo leaves it out (as the line's history does), so the next turn goes
    on without a branch and the model is not sent the reply again."""
    async with rig(tmp_path, config=CONFIG) as r:
        history = await _up_to_the_incomplete_reply(r)
        r.upstream.queue(Say("Three steps."), Say("Welcome."))
        history.append({"role": "user", "content": "Say it whole."})
        assert (await _post(r, history)).status_code == 200
        reply, continuation = _carried_then_withdrawn(r, "cp")
        ledger = r.service.ledger
        compaction_id = ledger.chains.lineage(continuation).compaction_id
        assert compaction_id is not None
        reverted = undo(ledger, compaction_id).new_session_id
        assert reply not in ledger.transcript.live_ids(reverted)

        history += [
            {"role": "assistant", "content": "Three steps."},
            {"role": "user", "content": "Thanks."},
        ]
        assert (await _post(r, history)).status_code == 200
        records = _recorded(r)
        starts = [rec.event.reason for rec in records if isinstance(rec.event, SessionStarted)]
        assert starts[:3] == ["new", "compression", "revert"] and "branch" not in starts
        sent = json.dumps(r.upstream.requests[-1].items)
        assert HALF not in sent and "call_whole" not in sent and "Say it whole." in sent
        assert reply not in ledger.transcript.live_ids(ledger.tip("cp"))
        assert ledger.verify().ok


async def test_a_result_for_the_carried_replys_call_appends_nothing(tmp_path: Path) -> None:
    async with rig(tmp_path, config=CONFIG) as r:
        history = await _up_to_the_incomplete_reply(r)
        before = r.last_seq()
        result = {"type": "function_call_output", "call_id": "call_whole", "output": "added"}
        answer = await _post(r, [*history, result])
        assert answer.status_code in (400, 422) and "call_whole" in answer.text
        assert r.last_seq() == before
        assert not any(isinstance(rec.event, ReplyWithdrawn) for rec in _recorded(r))


def _fold_the_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compactions whose layout ends with a summary of the last message instead of the
    message (the ledger's own planner always carries its last messages: another tool's
    layout, or a future planner's)."""
    real = compaction.append_recorded

    def folded(ledger: Any, recorded: Any) -> None:
        switch = recorded.switch
        last = switch.layout[-1]
        summary = LayoutEntry(
            message_id=last.message_id + "_folded",
            origin="summary",
            message={"role": "assistant", "content": "(an unfinished plan, summarized)"},
            tokens=9,
        )
        layout = [*switch.layout[:-1], summary]
        new = msgspec.structs.replace(switch, layout=layout)
        old_events = [new if e is switch else e for e in recorded.old_events]
        real(ledger, msgspec.structs.replace(recorded, switch=new, old_events=old_events))

    monkeypatch.setattr(compaction, "append_recorded", folded)


async def test_a_reply_a_compaction_folded_branches_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _fold_the_reply(monkeypatch)
    async with rig(tmp_path, config=CONFIG) as r:
        history = await _up_to_the_incomplete_reply(r)
        r.upstream.queue(Say("Three steps."))
        history.append({"role": "user", "content": "Say it whole."})
        with caplog.at_level(logging.INFO, logger="ctxledger.server"):
            assert (await _post(r, history)).status_code == 200
        records = _recorded(r)
        starts = [rec.event.reason for rec in records if isinstance(rec.event, SessionStarted)]
        assert starts == ["new", "compression", "branch"]
        assert not any(isinstance(rec.event, ReplyWithdrawn) for rec in records)
        assert "no longer ends the view (a compaction replaced it): a branch" in caplog.text
        assert r.service.ledger.verify().ok
