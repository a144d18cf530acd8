"""The OpenAI Agents SDK on ``ctxledger serve``'s Responses face: a response the output
limit left ``incomplete`` with a function call in it fails the SDK's run
(``ModelBehaviorError``) and its session keeps only the ask. The proxy had recorded the
cut call, so the next run branched, the root holding a call the agent never had
(session 42). Now it is not recorded: the next run continues the one session."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.frameworks import require

require("agents", "agents")
from agents import Agent, OpenAIResponsesModel, SQLiteSession
from agents.exceptions import ModelBehaviorError
from helpers.agents_runs import run_turn, todo
from helpers.fake_upstream import Raw, Say, raw_responses_stream
from helpers.server_rig import rig

from ctxledger.events import MessageAppended, SessionStarted, UsageReported

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _response(arguments: str, *, cut: bool) -> dict[str, Any]:
    text = {"type": "output_text", "text": "Adding.", "annotations": []}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed"}
    call = {"id": "fc_1", "type": "function_call", "name": "todo", "arguments": arguments}
    call |= {"call_id": "call_cut" if cut else "call_whole"}
    call["status"] = "incomplete" if cut else "completed"
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}}
    usage |= {"output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}}
    return {
        "id": "resp_cut" if cut else "resp_whole",
        "object": "response",
        "created_at": 1,
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": "gpt-4.1",
        "output": [{**message, "content": [text]}, call],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {**usage, "total_tokens": 15},
    }


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_incomplete_response_with_a_call_is_not_recorded(
    tmp_path: Path, streamed: bool
) -> None:
    cut, whole = _response('{"item": "bu', cut=True), _response('{"item": "milk"}', cut=False)
    async with rig(tmp_path) as r:
        answers = (
            [raw_responses_stream(cut), raw_responses_stream(whole)]
            if streamed
            else [Raw((json.dumps(cut).encode(),)), Raw((json.dumps(whole).encode(),))]
        )
        r.upstream.queue(*answers, Say("Done."))
        client = r.openai(**{"X-Ctxledger-Session": "cut"})
        model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
        agent = Agent(name="a", instructions="Be brief.", tools=[todo], model=model)
        session = SQLiteSession("s")

        with pytest.raises(ModelBehaviorError):
            await run_turn(agent, "Add milk.", session, streamed)
        assert await run_turn(agent, "Add milk.", session, streamed) == "Done."
        r.service.ledger.refresh()
        events = [x.event for x in r.service.ledger.store.read_all()]
        assert sum(isinstance(e, SessionStarted) for e in events) == 1  # no branch
        said = [e.message for e in events if isinstance(e, MessageAppended)]
        assert [m["role"] for m in said] == ["user", "user", "assistant", "tool", "assistant"]
        assert "call_cut" not in str(said)
        usage = [e for e in events if isinstance(e, UsageReported)]
        assert [u.tool_calls for u in usage] == [True, True, False]  # the cut one's too
        assert r.service.ledger.verify().ok
