"""A LangChain redactor and CtxLedgerMiddleware: which order keeps a secret the redactor
hides out of the ledger, its summaries and the model's input (s34 left: "a summary is
made from what the session recorded"). Real create_agent, LangChain's PIIMiddleware and
a redactor of the model call's input, offline; a compaction forced after five asks."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelCallLimitMiddleware, PIIMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.integrations.common import live_messages
from ctxledger.integrations.langchain import CtxLedgerMiddleware

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
SECRET = "alice.smith@example.com"
HIDDEN = "[REDACTED_EMAIL]"


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}"


class ToolThenAnswer(GenericFakeChatModel):
    """A tool call after each ask, then an answer; keeps what it was sent."""

    inputs: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolThenAnswer:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.inputs.append(list(messages))
        if messages[-1].type == "human":
            call = {"name": "read_file", "args": {"path": "x.py"}, "id": f"c{len(self.inputs)}"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class SpySummarizer:
    """The offline summarizer, keeping the text of what it was sent (a provider, for an
    LLM summarizer)."""

    kind = "spy-offline"

    def __init__(self) -> None:
        self.inner = OfflineSummarizer()
        self.sent: list[str] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.sent.append(repr((request.turns, request.originals)))
        return await self.inner.summarize(request)


class RedactTheCall(AgentMiddleware[Any, Any]):
    """Redacts the user's messages in the model call's input only (the graph state keeps
    them), message ids kept: a filter of what the provider is sent."""

    def _redacted(self, request: Any) -> Any:
        messages = [
            m.model_copy(update={"content": str(m.content).replace(SECRET, HIDDEN)})
            if m.type == "human"
            else m
            for m in request.messages
        ]
        return request.override(messages=messages)

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(self._redacted(request))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(self._redacted(request))


def _conversation(tmp_path: Any, redactor: Any, first: bool) -> dict[str, Any]:
    """Six asks (the third holds the secret), a compaction after the fifth: where the
    secret went."""
    spy = SpySummarizer()
    service = ContextService(
        Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG, summarizer=spy
    )
    ours = CtxLedgerMiddleware(service, context_length=16_000)
    model = ToolThenAnswer(messages=iter([]))
    middleware = [redactor, ours] if first else [ours, redactor]
    agent = create_agent(model=model, tools=[read_file], middleware=middleware)
    config: Any = {"configurable": {"thread_id": "t"}}
    messages: list[Any] = []
    for n in range(6):
        ask = f"my email is {SECRET}, keep it" if n == 2 else f"ask {n} " + "words " * 40
        messages = agent.invoke({"messages": [*messages, HumanMessage(ask)]}, config)["messages"]
        if n == 4:
            anyio.run(service.compress, service.tip("langchain:t"))
    service.ledger.refresh()
    where = {
        "ledger": any(SECRET in repr(r.event) for r in service.ledger.store.read_all()),
        "summarizer": any(SECRET in text for text in spy.sent),
        "model": [i for i, sent in enumerate(model.inputs) if SECRET in repr(sent)],
        "compactions": len(spy.sent),
    }
    assert service.ledger.verify().ok
    service.ledger.close()
    return where


@pytest.mark.parametrize(
    ("redactor", "first"),
    [("pii", True), ("pii", False), ("call", True)],
    ids=["pii-before-ours", "pii-after-ours", "call-redactor-before-ours"],
)
def test_a_secret_a_redactor_hides_stays_out_of_the_ledger_summaries_and_model(
    tmp_path, redactor, first
):
    """PIIMiddleware edits the graph state (``before_model``), which our middleware
    reads at the model call whatever the order; a redactor of the call's input listed
    before ours hands ours the redacted messages: either way the ledger records, the
    summarizer is sent and the model is sent no secret, also after the compaction."""
    pii = redactor.startswith("pii")
    hider = PIIMiddleware("email", strategy="redact") if pii else RedactTheCall()
    where = _conversation(tmp_path, hider, first)
    assert where == {"ledger": False, "summarizer": False, "model": [], "compactions": 1}


def test_a_call_redactor_after_ours_lets_the_summary_carry_the_secret_to_the_model(tmp_path):
    """Listed after ours, a redactor of the call's input is handed the ledger's view: the
    ledger holds the original, the summarizer is sent it, and the summary (an assistant
    message this redactor leaves alone) brings it to the model after the compaction. The
    README's order rule is this test's contrast."""
    where = _conversation(tmp_path, RedactTheCall(), False)
    assert where["ledger"] and where["summarizer"] and where["compactions"] == 1
    assert where["model"] and min(where["model"]) >= 10  # the 10 calls before it: none


@pytest.mark.parametrize("redactor", ["call", "pii", "pii-after-the-limit"])
def test_a_run_that_ends_without_a_model_call_records_its_ask_as_the_state_holds_it(
    tmp_path, redactor
):
    """The run's end appends what the state gained since the last model call (its final
    answer, or here an ask ``ModelCallLimitMiddleware`` ends the run on): no model call
    handed it to a redactor of the call's input, so the ledger records the secret (the
    README names the case); a redactor of the state (PIIMiddleware) edits it first, when
    listed before the limit: listed after it, the limit's jump to the end skips it (the
    unsafe order the README names)."""
    service = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    pii = redactor.startswith("pii")
    hider = PIIMiddleware("email", strategy="redact") if pii else RedactTheCall()
    limit = ModelCallLimitMiddleware(thread_limit=2, exit_behavior="end")
    ours = CtxLedgerMiddleware(service, context_length=16_000)
    model = ToolThenAnswer(messages=iter([]))
    agent = create_agent(
        model=model,
        tools=[read_file],
        checkpointer=InMemorySaver(),
        middleware=[limit, hider, ours] if redactor.endswith("limit") else [hider, ours, limit],
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello")]}, config)
    agent.invoke({"messages": [HumanMessage(f"my email is {SECRET}")]}, config)
    service.ledger.refresh()
    recorded = [m["content"] for m in live_messages(service, "langchain:t") if m["role"] == "user"]
    assert len(model.inputs) == 2 and not any(SECRET in repr(sent) for sent in model.inputs)
    assert recorded[0] == "hello" and (SECRET in recorded[1]) == (redactor != "pii")
    assert service.ledger.verify().ok
    service.ledger.close()
