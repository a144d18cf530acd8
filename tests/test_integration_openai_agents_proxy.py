"""The OpenAI Agents SDK pointed at ``ctxledger serve``: a Runner whose model's client
is the proxy's, with the SDK's own session, gets the proxy's overflow recovery (the
session integration alone does not: the Runner sends each model call its own input)."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

from pathlib import Path

import pytest
from helpers.frameworks import require

require("agents", "agents")
from agents import Agent, OpenAIResponsesModel, Runner, SQLiteSession, function_tool
from helpers.fake_upstream import Error, Say
from helpers.server_rig import ask, rig

pytestmark = pytest.mark.anyio

OVERFLOW = {
    "error": {
        "message": "Your input exceeds the context window of this model.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path} " + "x " * 200


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_runner_through_the_proxy_recovers_from_an_overflow(
    tmp_path: Path, streamed: bool
) -> None:
    async with rig(tmp_path) as r:
        headers = {"X-Ctxledger-Session": "agent-1", "X-Ctxledger-Context-Length": "8192"}
        client = r.openai(**headers)
        model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
        agent = Agent(name="a", instructions="Be brief.", tools=[read_file], model=model)
        session = SQLiteSession("s")
        for i in range(8):
            r.upstream.queue(Say("", tool=("read_file", {"path": f"f{i}.py"})), Say(f"done {i}"))
            await Runner.run(agent, ask(i, 80), session=session)
        r.upstream.queue(Error(400, OVERFLOW), Say("after the overflow"))
        if streamed:
            run = Runner.run_streamed(agent, "what next?", session=session)
            async for _ in run.stream_events():
                pass
        else:
            run = await Runner.run(agent, "what next?", session=session)
        assert run.final_output == "after the overflow"
        refused, retried = r.upstream.requests[-2:]
        assert len(retried.items) < len(refused.items)
        ledger = r.service.ledger
        tip = ledger.tip("agent-1")
        assert ledger.chains.compression_count(tip) == 1
        assert ledger.transcript.live_messages(tip)[-1]["content"] == "after the overflow"
        r.upstream.queue(Say("next"))  # the next run goes on on the compacted line
        assert (await Runner.run(agent, "and then?", session=session)).final_output == "next"
        assert ledger.tip("agent-1") == tip and ledger.verify().ok
