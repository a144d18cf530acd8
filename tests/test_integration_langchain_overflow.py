"""CtxLedgerMiddleware recovering a model call from the provider's overflow error, as
the proxy does: the real ``openai`` / ``anthropic`` SDKs raise their own exceptions from
a scripted upstream, the service classifies them (HERMES_SPEC §2)."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
require("openai", "openai")
require("anthropic", "anthropic")
import anthropic
import openai
from helpers.langchain_fakes import read_file, script
from helpers.provider_errors import (
    ANTHROPIC_TOO_LONG,
    OPENAI_TOO_LONG,
    OUTPUT_CAP,
    PAYLOAD_413,
    raise_from_sdk,
)
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from pydantic import Field

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.compressor import markers
from ctxledger.errors import ContextOverflowError
from ctxledger.events import CompressionChecked, CompressionSkipped, ContextLimitLearned
from ctxledger.integrations.common import live_messages, system_view
from ctxledger.integrations.langchain import CtxLedgerMiddleware, to_chat

CONFIG = CompressionConfig(
    threshold_floor_tokens=0, context_length=8_000, protect_last_n=4, tail_min_messages=4
)
THREAD = {"configurable": {"thread_id": "t1"}}


class FlakyChat(GenericFakeChatModel):
    """Replies from the script; the calls numbered in `failures` raise the provider
    SDK's error instead (the reply is kept for the next call)."""

    failures: dict[int, tuple[str, int, dict[str, Any]]] = Field(default_factory=dict)
    calls: int = 0
    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    caps: list[Any] = Field(default_factory=list)
    service: Any = None
    views: list[list[dict[str, Any]]] = Field(default_factory=list)
    usage: bool = True  # False: the responses carry no usage_metadata
    meanwhile: Any = None  # called as a refused call fails (another worker's write)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(**kwargs)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls += 1
        self.inputs.append(list(messages))
        self.caps.append(kwargs.get("max_tokens"))
        tip = self.service.tip("langchain:t1")
        self.views.append([system_view(self.service, tip), *live_messages(self.service, tip)])
        if self.calls in self.failures:
            if self.meanwhile is not None:
                self.meanwhile()
            raise_from_sdk(*self.failures[self.calls])
        result = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        if self.usage:
            result.generations[0].message.usage_metadata = {
                "input_tokens": 2_000,
                "output_tokens": 10,
                "total_tokens": 2_010,
            }
        return result


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _agent(service: ContextService, model: FlakyChat) -> Any:
    from langgraph.checkpoint.memory import InMemorySaver

    model.service = service
    middleware = CtxLedgerMiddleware(service, model="gpt-test")
    return create_agent(
        model,
        tools=[read_file],
        system_prompt="You review code.",
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def _ask(t: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"turn {t}: review src/m{t}.py " + "now " * 60)]}


def _events(svc: ContextService, kind: type) -> list[Any]:
    return [r.event for r in svc.ledger.store.read_all() if isinstance(r.event, kind)]


def _sent_the_view(model: FlakyChat, call: int) -> None:
    """Call number `call` was sent the ledger's view at that moment, message for message."""
    system, *rest = model.inputs[call - 1]
    view = model.views[call - 1]
    assert system.content == view[0]["content"]
    assert [m.get("content") or None for m in to_chat(rest)] == [
        m.get("content") or None for m in view[1:]
    ]


@pytest.mark.parametrize("failure", [OPENAI_TOO_LONG, ANTHROPIC_TOO_LONG, PAYLOAD_413])
def test_a_prompt_too_long_compacts_and_the_call_is_retried_on_the_compacted_view(service, failure):
    model = FlakyChat(messages=iter(script(4)), failures={7: failure})
    agent = _agent(service, model)
    for t in range(4):
        state = agent.invoke(_ask(t), THREAD)
        assert state["messages"][-1].content == f"m{t} reviewed"
    assert model.calls == 9  # 8 answered, the 7th call refused once and retried
    checked = [e for e in _events(service, CompressionChecked) if e.trigger == "overflow"]
    assert len(checked) == 1
    failed, retried = model.inputs[6], model.inputs[7]
    assert len(retried) < len(failed)  # the retry was sent the compacted view
    _sent_the_view(model, 7)
    _sent_the_view(model, 8)
    assert not markers.has_system_note(str(failed[0].content))
    assert markers.has_system_note(str(retried[0].content))
    learned = _events(service, ContextLimitLearned)
    if failure is OPENAI_TOO_LONG:
        assert [e.context_length for e in learned] == [4096]
    else:  # 200,000 is above the configured window; a 413 states none
        assert learned == []
    tip = service.tip("langchain:t1")
    view = live_messages(service, tip)
    assert view[-1]["content"] == "m3 reviewed"
    assert sum(m["content"] == "m3 reviewed" for m in view) == 1
    assert service.ledger.verify().ok


def test_the_async_graph_recovers_the_same_way(service):
    model = FlakyChat(messages=iter(script(4)), failures={7: ANTHROPIC_TOO_LONG})
    agent = _agent(service, model)

    async def turns() -> None:
        for t in range(4):
            state = await agent.ainvoke(_ask(t), THREAD)
            assert state["messages"][-1].content == f"m{t} reviewed"

    anyio.run(turns)
    assert model.calls == 9
    assert len(model.inputs[7]) < len(model.inputs[6])
    _sent_the_view(model, 8)
    assert [e.trigger for e in _events(service, CompressionChecked)] == ["overflow"]


def test_an_output_cap_error_lowers_max_tokens_and_compacts_nothing(service):
    model = FlakyChat(messages=iter(script(1)), failures={1: OUTPUT_CAP}, max_tokens=4096)
    agent = _agent(service, model)
    state = agent.invoke(_ask(0), THREAD)
    assert state["messages"][-1].content == "m0 reviewed"
    assert model.caps[:2] == [None, 1000]  # the model's own max_tokens, then the lowered cap
    assert model.inputs[0] == model.inputs[1]  # the same view: nothing compacted
    assert _events(service, CompressionChecked) == []
    skipped = _events(service, CompressionSkipped)
    assert [e.details["max_tokens"] for e in skipped] == [1000]


def test_a_never_clearing_overflow_ends_with_a_clear_error_and_nothing_half_appended(service):
    model = FlakyChat(
        messages=iter(script(4)), failures={n: ANTHROPIC_TOO_LONG for n in range(7, 40)}
    )
    agent = _agent(service, model)
    for t in range(3):
        agent.invoke(_ask(t), THREAD)
    with pytest.raises(ContextOverflowError) as raised:
        agent.invoke(_ask(3), THREAD)
    assert isinstance(raised.value.__cause__, anthropic.BadRequestError)
    assert "Start a new session" in str(raised.value)
    attempts = CONFIG.max_compression_attempts
    assert 7 < model.calls <= 6 + attempts  # retried, and each retry followed a compaction
    tip = service.tip("langchain:t1")
    view = live_messages(service, tip)
    assert view[-1]["role"] == "user" and view[-1]["content"].startswith("turn 3")
    assert sum(str(m.get("content", "")).startswith("turn 3") for m in view) == 1
    assert any("gave up" in e.reason for e in _events(service, CompressionSkipped))
    assert service.ledger.verify().ok


def test_an_error_that_is_no_overflow_is_raised_as_it_was_and_recorded_nowhere(service):
    rate = ("openai", 429, {"error": {"message": "Rate limit reached", "code": "rate_limit"}})
    model = FlakyChat(messages=iter(script(1)), failures={1: rate})
    agent = _agent(service, model)
    events = len(list(service.ledger.store.read_all()))
    with pytest.raises(openai.RateLimitError):
        agent.invoke(_ask(0), THREAD)
    assert model.calls == 1
    later = [type(r.event) for r in list(service.ledger.store.read_all())[events:]]
    assert CompressionChecked not in later and CompressionSkipped not in later


def test_a_session_the_ledger_cannot_act_on_leaves_the_providers_error_standing(service):
    from ctxledger.integrations.recovery import recover

    async def go() -> Any:
        sid = await service.start_session(model="m", context_length=8_000)
        await service.end_session(sid, "gone")
        try:
            raise_from_sdk(*OPENAI_TOO_LONG)
        except openai.BadRequestError as exc:
            return await recover(service, sid, exc, requested_max_tokens=None)

    assert anyio.run(go) is None  # the caller re-raises the SDK's error, not the ledger's


def test_turns_each_recovering_once_all_go_through_when_the_model_reports_no_usage(service):
    """The first call of every turn from the fourth on is refused once; the model reports
    no usage (the counter of a turn's compaction attempts was cleared by a usage report
    only): each turn recovers, none counts against the next (before: the fourth
    recovery, in turn 6, failed with ContextOverflowError and no compaction tried)."""
    turns = 7
    failures = {7 + 3 * (t - 3): OPENAI_TOO_LONG for t in range(3, turns)}
    model = FlakyChat(messages=iter(script(turns)), failures=failures, usage=False)
    agent = _agent(service, model)
    for t in range(turns):
        assert agent.invoke(_ask(t), THREAD)["messages"][-1].content == f"m{t} reviewed"
    assert model.calls == 2 * turns + len(failures)
    overflow = [e for e in _events(service, CompressionChecked) if e.trigger == "overflow"]
    assert len(overflow) == len(failures) > CONFIG.max_compression_attempts


def test_a_write_of_another_worker_while_a_call_fails_is_read_after_the_compaction(
    service, tmp_path
):
    """Another worker appends its ask to the thread's session while a call of this one
    is refused as too long: the compaction that follows is this worker's write, but the
    other's is read at its next call (the run goes on in its own generation), not taken
    as this worker's history (before: the compaction marked the session as this
    worker's, and its next call was sent the other worker's ask)."""
    other = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    model = FlakyChat(messages=iter(script(4)), failures={7: OPENAI_TOO_LONG})
    agent = _agent(service, model)
    for t in range(3):
        agent.invoke(_ask(t), THREAD)

    def the_other_writes() -> None:
        other.ledger.refresh()
        ask = {"role": "user", "content": "the other's ask", "lc_id": "other-ask"}
        anyio.run(lambda: other.append(other.tip("langchain:t1"), [ask]))

    model.meanwhile = the_other_writes
    assert agent.invoke(_ask(3), THREAD)["messages"][-1].content == "m3 reviewed"
    assert model.calls == 9
    assert "the other's ask" not in [m.content for m in model.inputs[8]]
    service.ledger.refresh()
    assert not service.ledger.transcript.session(service.tip("langchain:t1")).ended
    assert service.ledger.verify().ok
    other.ledger.close()
