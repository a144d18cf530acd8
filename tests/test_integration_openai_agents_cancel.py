"""A streamed Agents SDK run cancelled right after its model asked for a tool
(``cancel(mode="immediate")`` / ``"after_turn"``), on a ``CtxLedgerSession``: the
conversation the ledger gives the next run is the one the SDK's own session
(``SQLiteSession``) holds, item for item, and the cancelled request's usage reaches the
ledger once (session 39, decided: s39-reach.md). An immediate cancel at ``tool_called``
stops the tool before it runs and the SDK saves neither the call nor an output: a call
recorded without its output would have to be given an invented one (real Runner,
scripted model, offline)."""

from __future__ import annotations

import os
from typing import Any

import anyio
import pytest
from helpers.frameworks import require

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
require("agents", "agents")
from agents import Agent, Runner, SQLiteSession, function_tool  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from agents.usage import Usage  # noqa: E402

from ctxledger import CompressionConfig, ContextService, Ledger  # noqa: E402
from ctxledger.events import MessageAppended, UsageReported  # noqa: E402
from ctxledger.integrations.openai_agents import CtxLedgerSession  # noqa: E402
from ctxledger.integrations.openai_agents_hooks import CtxLedgerRunHooks  # noqa: E402

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)


def _step(output: Any, prompt: int) -> ModelStep:
    usage = Usage(requests=1, input_tokens=prompt, output_tokens=5, total_tokens=prompt + 5)
    return ModelStep(output=[output], usage=usage)


async def _conversation(session: Any, mode: str, event: str, hooks: Any = None) -> list[Any]:
    """Run 1 asks for ``lookup`` and is cancelled at `event`; run 2 is answered. The
    items the session gives back after both, as (kind, call id or text), and the tool's runs."""
    ran: list[str] = []

    @function_tool
    def lookup(key: str) -> str:
        """Look a key up."""
        ran.append(key)
        return f"{key} = 42"

    steps = [
        _step(function_call("lookup", {"key": "k"}, call_id="c1"), 101),
        _step(assistant_message("k = 42"), 202),
        _step(assistant_message("done"), 303),
    ]
    agent = Agent(name="a", instructions="A.", model=ScriptedModel(steps), tools=[lookup])
    run = Runner.run_streamed(agent, "q1", session=session, hooks=hooks)
    async for item in run.stream_events():
        if item.type == "run_item_stream_event" and item.name == event:
            run.cancel(mode=mode)
    await Runner.run(agent, "q2", session=session, hooks=hooks)
    return [[_kind(i) for i in await session.get_items()], ran]


def _ledger_log(service: ContextService) -> list[tuple[Any, ...]]:
    """The recording in order: (role, text) per message, ("usage", prompt, tool_calls)."""
    log: list[tuple[Any, ...]] = []
    for r in service.ledger.store.read_all():
        e = r.event
        if isinstance(e, UsageReported):
            log.append(("usage", e.usage.prompt, e.asked_for_tools))
        elif isinstance(e, MessageAppended):
            content = e.message.get("content")
            log.append((e.message.get("role"), content if isinstance(content, str) else "call"))
    return log


def _kind(item: dict[str, Any]) -> tuple[Any, Any]:
    if "call_id" in item:
        return item["type"], item["call_id"]
    content = item.get("content")
    text = content if isinstance(content, str) else content[0].get("text")
    return item.get("role"), text


@pytest.mark.parametrize("mode", ["immediate", "after_turn"])
@pytest.mark.parametrize("event", ["tool_called", "tool_output"])
def test_a_cancelled_streamed_run_leaves_the_conversation_the_sdk_session_holds(
    tmp_path, mode, event
):
    own = anyio.run(_conversation, SQLiteSession("sdk"), mode, event)
    service = ContextService(Ledger.open(tmp_path / "c.db", config=CONFIG), config=CONFIG)
    try:
        session = CtxLedgerSession("u", service, model="m", context_length=16_000)
        ours = anyio.run(_conversation, session, mode, event, CtxLedgerRunHooks(session))
        assert ours == own
        if (mode, event) == ("immediate", "tool_called"):  # the tool never ran
            assert own == [[("user", "q1"), ("user", "q2"), ("assistant", "k = 42")], []]
        else:
            assert ("function_call_output", "c1") in own[0] and own[1] == ["k"]
        # the cancelled request was billed: its usage recorded once (at the next run)
        log = _ledger_log(service)
        assert [x[1] for x in log if x[0] == "usage"] == [101, 202]
        if (mode, event) == ("immediate", "tool_called"):  # before q2, asking no tool
            assert log == [
                ("user", "q1"),
                ("usage", 101, None),
                ("user", "q2"),
                ("assistant", "k = 42"),
                ("usage", 202, False),
            ]
    finally:
        service.ledger.close()
