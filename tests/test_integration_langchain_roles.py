"""A LangChain agent whose system message is marked ``developer`` (langchain-core's
``additional_kwargs["__openai_role__"]``, what its OpenAI conversion sends as that role):
the middleware records the prompt in that role (session 39), and the model is sent it in
that role, before and after a compaction."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

from typing import Any

import msgspec
import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
from helpers.langchain_fakes import ScriptedChat, read_file, script
from langchain.agents import create_agent
from langchain.agents.middleware import dynamic_prompt
from langchain_core.messages import HumanMessage, SystemMessage, convert_to_openai_messages
from langgraph.checkpoint.memory import InMemorySaver

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.analysis.whatif import whatif
from ctxledger.events import SessionSwitched, SystemPromptSet
from ctxledger.integrations.langchain import CtxLedgerMiddleware

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
TURNS = 10
DEVELOPER = {"__openai_role__": "developer"}


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "roles.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _agent(service: ContextService, **kwargs: Any) -> tuple[Any, ScriptedChat]:
    model = ScriptedChat(messages=iter(script(TURNS)))
    model.inputs, model.views, model.service = [], [], service
    middleware = [
        *kwargs.pop("middleware", []),
        CtxLedgerMiddleware(service, model="fake", context_length=16_000),
    ]
    agent = create_agent(
        model=model,
        tools=[read_file],
        middleware=middleware,
        checkpointer=InMemorySaver(),
        **kwargs,
    )
    return agent, model


def _run(agent: Any, turns: range) -> None:
    config = {"configurable": {"thread_id": "t1"}}
    for t in turns:
        agent.invoke({"messages": [HumanMessage(f"turn {t}: src/m{t}.py " + "now " * 120)]}, config)


def _sent_roles(model: ScriptedChat) -> list[str]:
    return [convert_to_openai_messages(sent[0])["role"] for sent in model.inputs]


def _events(service: ContextService, kind: type) -> list[Any]:
    chain = service.ledger.chains.chain(service.tip("langchain:t1"))
    return [
        r.event
        for r in service.ledger.store.read_all()
        if isinstance(r.event, kind) and r.event.session_id in chain
    ]


def test_a_developer_system_message_is_recorded_and_sent_as_developer(service):
    prompt = SystemMessage("You review code.", additional_kwargs=dict(DEVELOPER))
    agent, model = _agent(service, system_prompt=prompt)
    _run(agent, range(TURNS))
    tip = service.tip("langchain:t1")
    assert tip != "langchain:t1"  # it compacted: the continuations hold the role too
    assert _sent_roles(model) == ["developer"] * (2 * TURNS)
    (start,) = _events(service, SystemPromptSet)  # the start's: no later role change
    assert (start.text, start.role) == ("You review code.", "developer")
    assert {e.system_prompt_role for e in _events(service, SessionSwitched)} == {"developer"}
    for sid in service.ledger.chains.chain(tip):
        assert service.api_messages(sid, cache=False)[0]["role"] == "developer"
    report = whatif(service.ledger, tip)  # the role replayed with the prompt: exact
    assert report.reproduces_recorded, report.reproduction


def test_a_prompt_whose_role_changes_is_recorded_once_in_the_new_role(service):
    """The same text sent as ``system``, then as ``developer``: one ``SystemPromptSet``
    (the role alone), and the model gets what the agent made each time."""
    role: dict[str, Any] = {}

    @dynamic_prompt
    def prompt(request: Any) -> SystemMessage:
        return SystemMessage("You review code.", additional_kwargs=dict(role))

    agent, model = _agent(service, middleware=[prompt])
    _run(agent, range(2))
    role.update(DEVELOPER)
    _run(agent, range(2, 4))
    assert _sent_roles(model) == ["system"] * 4 + ["developer"] * 4
    start, change = _events(service, SystemPromptSet)
    assert (start.text, start.role) == ("You review code.", msgspec.UNSET)
    assert (change.text, change.role) == ("You review code.", "developer")
    view = service.ledger.transcript.session(service.tip("langchain:t1"))
    assert view.system_role == "developer"
