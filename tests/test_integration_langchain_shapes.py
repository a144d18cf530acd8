"""Shapes a real LangChain ``create_agent`` graph sends through the middleware that the
other tests do not (session 45): a human message with an image part, two parallel tool
calls in one answer, a tool whose result is a list of content blocks (text and an
image); the next turn on the same thread adds only its own messages, the model gets
each block as the tool returned it, and the ledger verifies."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

from typing import Any

import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
from helpers.langchain_fakes import ScriptedChat
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.events import MessageAppended, SessionStarted
from ctxledger.integrations.langchain import CtxLedgerMiddleware

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
PIXEL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"


@tool
def look(part: str) -> list[dict[str, Any]]:
    """Look at a part of the screen."""
    return [
        {"type": "text", "text": f"part {part}:"},
        {"type": "image_url", "image_url": {"url": PIXEL}},
    ]


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "lc.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def test_images_parallel_calls_and_block_results(service: ContextService) -> None:
    calls = [{"name": "look", "args": {"part": p}, "id": f"c_{p}"} for p in ("left", "right")]
    model = ScriptedChat(
        messages=iter([AIMessage("", tool_calls=calls), AIMessage("Both seen."), AIMessage("Ok.")])
    )
    middleware = CtxLedgerMiddleware(service, model="fake", context_length=16_000)
    agent = create_agent(
        model=model, tools=[look], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t1"}}
    ask = HumanMessage(
        content=[
            {"type": "text", "text": "What is on it?"},
            {"type": "image_url", "image_url": {"url": PIXEL}},
        ]
    )
    out = agent.invoke({"messages": [ask]}, config)
    assert out["messages"][-1].content == "Both seen."
    agent.invoke({"messages": [HumanMessage("Thanks.")]}, config)

    sent = model.inputs[-1]  # the second turn's call: the whole history
    asked = [m for m in sent if isinstance(m, HumanMessage)]
    assert asked[0].content == ask.content  # the image part as sent
    results = [m for m in sent if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["c_left", "c_right"]
    for m, part in zip(results, ("left", "right"), strict=True):
        blocks = m.content if isinstance(m.content, list) else None
        assert blocks is not None, m.content
        texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        assert texts == [f"part {part}:"], blocks
        assert any(PIXEL in str(b) for b in blocks), blocks
    events = [r.event for r in service.ledger.store.read_all()]
    assert sum(isinstance(e, SessionStarted) for e in events) == 1
    appended = [e for e in events if isinstance(e, MessageAppended)]
    assert len(appended) == 7  # ask, calls, 2 results, answer, thanks, ok: none twice
    assert service.ledger.verify().ok
