"""A tool output over the budget in a real ``create_agent`` graph: the middleware sends
the model the stored-output preview in the same run, and registers ``read_persisted``,
so the model can read the output back (sync and async, with and without a thread id)."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from helpers.frameworks import require
from helpers.slices import parse_slice

require("langchain.agents", "langchain")
from helpers.langchain_fakes import ScriptedChat
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.integrations.langchain import CtxLedgerMiddleware
from ctxledger.runtime import read_persisted_tool

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
LINES = [f"line {i:05d}: GET /api/items/{i} 200" for i in range(900)]


@tool
def tail_log(service: str) -> str:
    """Return the service's log."""
    return "\n".join(LINES)


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "lc.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _replies(model: ScriptedChat) -> Iterator[AIMessage]:
    """Calls the log tool, then ``read_persisted`` with the ref of the preview it was sent."""
    yield AIMessage("", tool_calls=[{"name": "tail_log", "args": {"service": "api"}, "id": "c1"}])
    preview = str(model.inputs[-1][-1].content)
    ref = re.search(r"[0-9a-f]{64}", preview)
    assert ref is not None and "line 00899" not in preview  # stored out of the view
    args = {"ref": ref.group(0), "offset": 0, "limit": 300}
    yield AIMessage("", tool_calls=[{"name": "read_persisted", "args": args, "id": "c2"}])
    yield AIMessage(
        "", tool_calls=[{"name": "read_persisted", "args": {"ref": "0" * 64}, "id": "c3"}]
    )
    yield AIMessage("line 00000 it is")


@pytest.mark.parametrize("thread", ["t1", None])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_model_reads_a_stored_tool_output_back(service, mode, thread):
    model = ScriptedChat(messages=iter(()))
    model.messages = _replies(model)
    middleware = CtxLedgerMiddleware(service, model="fake", context_length=16_000)
    agent = create_agent(
        model=model,
        tools=[tail_log],
        middleware=[middleware],
        checkpointer=InMemorySaver() if thread else None,
    )
    state = {"messages": [HumanMessage("what is the first line of the api log?")]}
    config = {"configurable": {"thread_id": thread}} if thread else {}
    out = agent.invoke(state, config) if mode == "sync" else anyio.run(agent.ainvoke, state, config)
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    sliced = parse_slice(str(results[1].content))
    log = "\n".join(LINES)
    assert log.startswith(sliced.text) and len(sliced.text) == 300
    assert sliced.next_offset == 300 and sliced.total == len(log)
    assert "error" in json.loads(str(results[2].content))  # a ref this chain never stored
    assert out["messages"][-1].content == "line 00000 it is"
    assert service.ledger.verify().ok


def test_the_tool_answers_an_error_before_anything_is_recorded(service):
    middleware = CtxLedgerMiddleware(service)
    (read,) = middleware.tools
    assert read.name == "read_persisted"
    assert middleware.session_of({"messages": [HumanMessage("hi", id="m1")]}) is None


def test_an_agent_without_tools_is_sent_none_and_its_model_binds_none(service):
    # GenericFakeChatModel cannot bind tools: the middleware's own tool alone is not sent
    model = GenericFakeChatModel(messages=iter([AIMessage("hello")]))
    middleware = CtxLedgerMiddleware(service, model="fake")
    agent = create_agent(model=model, middleware=[middleware], checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}})
    assert out["messages"][-1].content == "hello"
    assert not service.ledger.transcript.session(service.tip("langchain:t")).tools


class _BindingChat(ScriptedChat):
    """Records the names of the tools each call binds."""

    bound: list[list[str]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        self.bound.append([t.name for t in tools])
        return self


@tool("read_persisted")
def own_notes(ref: str) -> str:
    """The user's own tool named read_persisted (a note store)."""
    return f"note {ref}"


def test_an_agents_own_tool_named_read_persisted_is_sent_with_a_warning(service):
    call = {"name": "read_persisted", "args": {"ref": "x"}, "id": "c1"}
    model = _BindingChat(messages=iter([AIMessage("", tool_calls=[call]), AIMessage("done")]))
    middleware = CtxLedgerMiddleware(service, model="fake", context_length=16_000)
    agent = create_agent(
        model=model, tools=[own_notes], middleware=[middleware], checkpointer=InMemorySaver()
    )
    with pytest.warns(UserWarning, match="replaces the middleware's"):
        out = agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}})
    assert model.bound == [["read_persisted"], ["read_persisted"]]  # (was sent no tools)
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["note x"]
    declared = service.ledger.transcript.session(service.tip("langchain:t")).tools
    assert [t["function"]["description"] for t in declared or []] == [own_notes.description]


def test_the_tool_has_the_ledgers_schema_and_answers_bad_arguments_with_errors(service):
    given = [{"ref": "0" * 64, "limit": 50_000}, {"offset": 3}, {"ref": "0" * 64, "extra": 1}]
    replies = [
        AIMessage("", tool_calls=[{"name": "read_persisted", "args": args, "id": f"c{i}"}])
        for i, args in enumerate(given)
    ]
    model = ScriptedChat(messages=iter([*replies, AIMessage("done")]))
    middleware = CtxLedgerMiddleware(service, model="fake", context_length=16_000)
    agent = create_agent(
        model=model, tools=[tail_log], middleware=[middleware], checkpointer=InMemorySaver()
    )
    out = agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "t"}})
    results = [json.loads(str(m.content)) for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 3 and all(set(r) == {"error"} for r in results)
    declared = service.ledger.transcript.session(service.tip("langchain:t")).tools or []
    assert [t for t in declared if t["function"]["name"] == "read_persisted"] == [
        read_persisted_tool()
    ]
