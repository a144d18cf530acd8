"""Shapes a real LangChain ``create_agent`` graph sends through the middleware that the
earlier tests did not (session 46): a model's refusal (an empty answer carrying its
``refusal`` text, finished by ``content_filter``), and a run the caller stops while
the model answers (a stream left unread after its first token; ``ainvoke`` cancelled
during the model call). The thread goes on: the next turn records only its own messages, the
ledger verifies, and nothing half-written stays in the view."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
from helpers.langchain_fakes import ScriptedChat
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.events import MessageAppended, SessionStarted
from ctxledger.integrations.langchain import CtxLedgerMiddleware

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
REFUSAL = "I can't help with that request."


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "lc.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _agent(
    service: ContextService, replies: list[AIMessage], kind: type[ScriptedChat] = ScriptedChat
) -> tuple[Any, Any]:
    model = kind(messages=iter(replies))
    middleware = CtxLedgerMiddleware(service, model="fake", context_length=16_000)
    agent = create_agent(
        model=model, tools=[], middleware=[middleware], checkpointer=InMemorySaver()
    )
    return agent, model


def _appended(service: ContextService) -> list[dict[str, Any]]:
    events = [r.event for r in service.ledger.store.read_all()]
    assert sum(isinstance(e, SessionStarted) for e in events) == 1
    return [e.message for e in events if isinstance(e, MessageAppended)]


def test_a_refusal_is_recorded_and_the_thread_goes_on(service: ContextService) -> None:
    refused = AIMessage(
        "",
        additional_kwargs={"refusal": REFUSAL},
        response_metadata={"finish_reason": "content_filter"},
    )
    agent, model = _agent(service, [refused, AIMessage("Here is a safer answer.")])
    config = {"configurable": {"thread_id": "t1"}}
    out = agent.invoke({"messages": [HumanMessage("Do the risky thing.")]}, config)
    assert out["messages"][-1].additional_kwargs.get("refusal") == REFUSAL
    agent.invoke({"messages": [HumanMessage("Then the safe one.")]}, config)
    appended = _appended(service)
    assert [m["role"] for m in appended] == ["user", "assistant", "user", "assistant"]
    assert appended[1]["refusal"] == REFUSAL and appended[1]["content"] == ""
    sent = model.inputs[-1]  # the refusal went back to the model as the answer it was
    assert [type(m).__name__ for m in sent] == ["HumanMessage", "AIMessage", "HumanMessage"]
    assert sent[1].additional_kwargs.get("refusal") == REFUSAL
    assert service.ledger.verify().ok


def _said(service: ContextService) -> list[tuple[str, str]]:
    return [(m["role"], str(m.get("content"))) for m in _appended(service)]


def _went_on(service: ContextService, model: ScriptedChat) -> None:
    """The stopped ask stays, no answer to it; the next turn's call holds both asks, as
    the ledger does, and its answer follows."""
    assert _said(service) == [
        ("user", "Tell me a lot."),
        ("user", "Shorter, please."),
        ("assistant", "Short."),
    ]
    assert [m.content for m in model.inputs[-1]] == ["Tell me a lot.", "Shorter, please."]
    assert service.ledger.verify().ok


def test_a_stream_stopped_mid_answer_leaves_the_thread_whole(service: ContextService) -> None:
    """The caller stops reading after the first streamed token: the answer is never
    recorded (the graph never stored it either), and the next turn's call holds both
    asks, as the ledger does."""
    agent, model = _agent(service, [AIMessage("A long answer " * 20), AIMessage("Short.")])
    config = {"configurable": {"thread_id": "t1"}}
    ask = {"messages": [HumanMessage("Tell me a lot.")]}
    stream = agent.stream(ask, config, stream_mode="messages")
    next(stream)  # the first token arrived; the caller stops reading
    stream.close()
    agent.invoke({"messages": [HumanMessage("Shorter, please.")]}, config)
    _went_on(service, model)


class SlowChat(ScriptedChat):
    """Starts its answer, then waits (the caller cancels it there)."""

    started: Any = None

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        if self.started is not None and not self.started.is_set():
            self.inputs.append(list(messages))
            self.started.set()
            await asyncio.sleep(60)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def test_a_run_cancelled_during_the_model_call_leaves_the_thread_whole(
    service: ContextService,
) -> None:
    """``ainvoke`` cancelled while the model answers: nothing of the answer is
    recorded, the ask is (it was sent), and the next turn goes on from there."""
    agent, model = _agent(service, [AIMessage("Short.")], SlowChat)
    config = {"configurable": {"thread_id": "t1"}}

    async def run() -> None:
        model.started = asyncio.Event()
        task = asyncio.ensure_future(
            agent.ainvoke({"messages": [HumanMessage("Tell me a lot.")]}, config)
        )
        await model.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await agent.ainvoke({"messages": [HumanMessage("Shorter, please.")]}, config)

    asyncio.run(run())
    assert len(model.inputs) == 2
    _went_on(service, model)
