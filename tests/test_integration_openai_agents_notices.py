"""The real OpenAI Agents SDK client reads the proxy's notices (session 45): its run
fails on a response left ``incomplete``, its next run goes on without it, and the proxy
tells what it did (the reply withdrawn) in ``X-Ctxledger-Notice`` and its log, while the
SDK reads the answer as ever (the headers leave the wire format alone)."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from helpers.frameworks import require

require("agents", "agents")
from agents import Agent, OpenAIResponsesModel, SQLiteSession
from agents.exceptions import ModelBehaviorError
from helpers.agents_runs import run_turn, todo
from helpers.fake_upstream import Say
from helpers.incomplete_replies import as_answer, incomplete_response
from helpers.server_rig import rig

from ctxledger.events import MessageAppended, ReplyWithdrawn
from ctxledger.server.history import PROVISIONAL
from ctxledger.server.notices import NOTICE_HEADER, read_notice_headers

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_sdk_gets_the_withdrawal_notice(
    tmp_path: Path, streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async with rig(tmp_path) as r:
        told: list[list[str]] = []

        async def headers_of(response: Any) -> None:  # what the SDK's HTTP client received
            told.append(read_notice_headers(response.headers.get_list(NOTICE_HEADER)))

        r.http.event_hooks["response"].append(headers_of)
        r.upstream.queue(as_answer(incomplete_response("text"), streamed), Say("Whole now."))
        client = r.openai(**{"X-Ctxledger-Session": "told"})
        model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
        agent = Agent(name="a", instructions="Be brief.", tools=[todo], model=model)
        session = SQLiteSession("s")
        with pytest.raises(ModelBehaviorError):
            await run_turn(agent, "What is the plan?", session, streamed)
        with caplog.at_level(logging.INFO, logger="ctxledger.server"):
            assert await run_turn(agent, "Say it whole.", session, streamed) == "Whole now."

        r.service.ledger.refresh()
        events = [x.event for x in r.service.ledger.store.read_all()]
        (half,) = [
            e for e in events if isinstance(e, MessageAppended) and e.message.get(PROVISIONAL)
        ]
        assert any(isinstance(e, ReplyWithdrawn) for e in events)
        notice = f"the client went on without reply {half.message_id}"
        assert told == [[], [notice]]
        assert f"session told: {notice}" in caplog.text
