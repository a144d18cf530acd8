"""CtxLedgerMiddleware against real LangChain v1 / LangGraph: create_agent with a fake
chat model, a tool and a checkpointer, over enough turns to compact."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
from helpers.langchain_fakes import ScriptedChat, read_file, script
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.events import (
    MessageAppended,
    SessionSwitched,
    SystemPromptSet,
    ToolCallIdsRepaired,
    ToolsDeclared,
    UsageReported,
)
from ctxledger.integrations.common import live_messages
from ctxledger.integrations.langchain import CtxLedgerMiddleware, from_chat, to_chat

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
TURNS = 10
CLI = str(Path(sys.executable).with_name("ctxledger"))


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _chain_events(svc, root, kind):
    chain = svc.ledger.chains.chain(svc.tip(root))
    return [
        r.event
        for r in svc.ledger.store.read_all()
        if isinstance(r.event, kind) and r.event.session_id in chain
    ]


def _turns(invoke, model: ScriptedChat, svc: ContextService, turns: int) -> None:
    for t in range(turns):
        before = len(model.inputs)
        state = invoke(
            {"messages": [HumanMessage(f"turn {t}: review src/m{t}.py " + "now " * 120)]}
        )
        assert state["messages"][-1].content == f"m{t} reviewed"
        # the state keeps everything: 4 messages a turn, never rewritten
        assert len(state["messages"]) == 4 * (t + 1)
        assert len(model.inputs) - before == 2
        # what the model was sent is the ledger's live view at that moment, message for message
        for sent, view in zip(model.inputs[before:], model.views[before:], strict=True):
            system, *rest = sent
            assert system.content == view[0]["content"]
            assert [_plain(m) for m in to_chat(rest)] == [_plain(m) for m in view[1:]]


def _plain(message: dict) -> dict:
    """A chat message as LangChain renders it (the ledger may hold the call content as null)."""
    return to_chat([from_chat(message)])[0]


def test_state_stays_complete_while_the_model_gets_the_ledger_view(service, tmp_path):
    model = ScriptedChat(messages=iter(script(TURNS)))
    model.inputs, model.views, model.service = [], [], service
    agent = create_agent(
        model=model,
        tools=[read_file],
        system_prompt="You review code.",
        middleware=[CtxLedgerMiddleware(service, model="fake", context_length=16_000)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t1"}}
    _turns(lambda inp: agent.invoke(inp, config), model, service, TURNS)
    tip = service.tip("langchain:t1")
    assert service.ledger.chains.compression_count(tip) >= 1
    # the model's input shrank after the compaction while the state kept growing
    assert len(model.inputs[-1]) < 4 * TURNS
    state = agent.get_state(config).values["messages"]
    assert len(state) == 4 * TURNS
    # every message, the last answer too (recorded when the run ended)
    assert len(_chain_events(service, "langchain:t1", MessageAppended)) == 4 * TURNS
    usage = _chain_events(service, "langchain:t1", UsageReported)
    # each tool call, then each final answer: the in-loop check ran after the calls only
    assert [e.asked_for_tools for e in usage] == [True, False] * TURNS
    assert service.ledger.transcript.session("langchain:t1").system_prompt == "You review code."
    db = str(tmp_path / "lc.ledger.db")
    for args in (["replay", "langchain:t1", "--verify"], ["verify"], ["audit", "langchain:t1"]):
        proc = subprocess.run([CLI, "--db", db, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_async_graph_and_a_restarted_process_continue_the_same_ledger_session(service, tmp_path):
    model = ScriptedChat(messages=iter(script(4)))
    model.inputs, model.views = [], []
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t1"}}

    def build() -> Any:
        return create_agent(
            model=model,
            tools=[read_file],
            system_prompt="S",
            middleware=[CtxLedgerMiddleware(service, context_length=16_000)],
            checkpointer=saver,
        )

    agent = build()
    anyio.run(lambda: agent.ainvoke({"messages": [HumanMessage("first")]}, config))
    agent = build()  # a new middleware: it finds where the ledger left off
    anyio.run(lambda: agent.ainvoke({"messages": [HumanMessage("second")]}, config))
    appended = _chain_events(service, "langchain:t1", MessageAppended)
    assert [e.message["role"] for e in appended] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert "langchain:t1~2" not in service.ledger.transcript.state.sessions


def test_a_rewritten_history_starts_a_new_ledger_session(service):
    from langchain_core.messages import RemoveMessage

    model = ScriptedChat(messages=iter(script(2)))
    model.inputs, model.views = [], []
    config = {"configurable": {"thread_id": "t1"}}
    agent = create_agent(
        model=model,
        tools=[read_file],
        middleware=[CtxLedgerMiddleware(service, context_length=16_000)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("first")]}, config)
    first = agent.get_state(config).values["messages"][0]
    agent.update_state(config, {"messages": [RemoveMessage(id=first.id)]})
    agent.invoke({"messages": [HumanMessage("second")]}, config)
    sessions = service.ledger.transcript
    assert sessions.session("langchain:t1").end_reason == "history rewritten"
    restarted = [
        m["content"] for m in live_messages(service, "langchain:t1~2") if m["role"] == "user"
    ]
    assert restarted == ["second"]  # the state as it is now: "first" is gone from it


def test_a_model_that_re_uses_call_ids_is_repaired_not_refused(service):
    """The one validation policy: call_0 in every turn (a local model numbering calls per
    turn) is renamed in the ledger and recorded; the model is sent unique, paired ids."""
    replies = []
    for t in range(3):
        call = {"name": "read_file", "args": {"path": f"src/m{t}.py"}, "id": "call_0"}
        replies += [AIMessage("", tool_calls=[call]), AIMessage(f"m{t} reviewed")]
    model = ScriptedChat(messages=iter(replies))
    model.inputs, model.views = [], []
    agent = create_agent(
        model=model,
        tools=[read_file],
        system_prompt="You review code.",
        middleware=[CtxLedgerMiddleware(service, model="fake", context_length=16_000)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "reuse"}}
    for t in range(3):
        state = agent.invoke({"messages": [HumanMessage(f"review src/m{t}.py")]}, config)
        assert state["messages"][-1].content == f"m{t} reviewed"
    # the state keeps what the model said; the model is sent the ledger's repaired view
    assert {c["id"] for m in state["messages"] for c in getattr(m, "tool_calls", [])} == {"call_0"}
    sent = to_chat(model.inputs[-1])
    calls = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert calls[0] == "call_0" and len(set(calls)) == 3 and results == calls
    repaired = _chain_events(service, "langchain:reuse", ToolCallIdsRepaired)
    assert {e.original for r in repaired for e in r.repairs} == {"call_0"} and len(repaired) == 2


def _thread(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


class OddUsageChat(GenericFakeChatModel):
    """Answers once, with usage figures no ledger can record."""

    usage: dict[str, Any] = Field(default_factory=dict)

    def bind_tools(self, tools: Any, **kwargs: Any) -> OddUsageChat:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        result = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        result.generations[0].message.usage_metadata = self.usage
        return result


@pytest.mark.parametrize(
    "figure",
    [float("nan"), "lots", -5, "12", True],
    ids=["nan", "text", "negative", "digits", "bool"],  # "12" was 12 and True 1, silently
)
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # LangChain's, of the odd figure
def test_odd_usage_figures_keep_the_answer_and_record_no_usage(service, figure, caplog):
    """usage_metadata of a NaN raised ValueError and a negative count InvalidInput out of
    the middleware after the model had answered: the graph failed and the answer was
    lost. As the proxy does, the report is dropped (logged) and the answer kept."""
    usage = {"input_tokens": figure, "output_tokens": 3, "total_tokens": 3}
    model = OddUsageChat(messages=iter([AIMessage("the answer")]), usage=usage)
    middleware = CtxLedgerMiddleware(service)
    agent = create_agent(
        model=model, tools=[], middleware=[middleware], checkpointer=InMemorySaver()
    )
    with caplog.at_level("WARNING", logger="ctxledger.integrations"):
        state = agent.invoke({"messages": [HumanMessage("q")]}, _thread("odd"))
    assert state["messages"][-1].content == "the answer"
    assert "usage of session langchain:odd not recorded" in caplog.text
    assert not _chain_events(service, "langchain:odd", UsageReported)


@tool
def search(query: str, max_distance: float = math.inf) -> str:
    """Search places within max_distance km."""
    return "x"


def test_a_tool_with_an_infinite_default_keeps_the_agent_working(service, caplog):
    """convert_to_openai_tool gives ``"default": inf`` for this tool; the ledger refuses
    a non-finite number, so the whole graph failed with InvalidInput. The middleware
    leaves the value out of the schema it derived (logged) and the agent answers."""
    model = OddUsageChat(messages=iter([AIMessage("the answer")]))
    agent = create_agent(
        model=model,
        tools=[search],
        middleware=[CtxLedgerMiddleware(service)],
        checkpointer=InMemorySaver(),
    )
    with caplog.at_level("WARNING", logger="ctxledger.integrations"):
        state = agent.invoke({"messages": [HumanMessage("q")]}, _thread("inf"))
    assert state["messages"][-1].content == "the answer"
    assert "search.function.parameters.properties.max_distance.default" in caplog.text
    [tools] = [
        r.event.tools for r in service.ledger.store.read_all() if isinstance(r.event, ToolsDeclared)
    ]
    [declared] = [t for t in tools if t["function"]["name"] == "search"]  # (and read_persisted)
    params = declared["function"]["parameters"]["properties"]["max_distance"]
    assert params == {"type": "number"}


def test_a_finished_run_is_whole_in_the_ledger_and_the_next_turn_adds_nothing_twice(
    service, tmp_path
):
    """The final answer (and a structured response's tool message) is recorded when the
    run ends, sync and async, not only once the thread's next model call sends it."""
    from langchain.agents.structured_output import ToolStrategy
    from pydantic import BaseModel

    class Verdict(BaseModel):
        verdict: str

    replies = [
        AIMessage("", tool_calls=[{"name": "Verdict", "args": {"verdict": "ok"}, "id": "v1"}]),
        AIMessage("", tool_calls=[{"name": "Verdict", "args": {"verdict": "no"}, "id": "v2"}]),
    ]
    model = ScriptedChat(messages=iter(replies))
    model.inputs, model.views = [], []
    agent = create_agent(
        model=model,
        tools=[],
        middleware=[CtxLedgerMiddleware(service, context_length=16_000)],
        checkpointer=InMemorySaver(),
        response_format=ToolStrategy(Verdict),
    )
    config = _thread("done")
    state = agent.invoke({"messages": [HumanMessage("judge it")]}, config)
    assert state["structured_response"] == Verdict(verdict="ok")

    def roles() -> list[tuple[str, Any]]:
        live = live_messages(service, service.tip("langchain:done"))
        return [(m["role"], m.get("tool_call_id") or m.get("content")) for m in live]

    assert roles() == [("user", "judge it"), ("assistant", None), ("tool", "v1")]
    anyio.run(lambda: agent.ainvoke({"messages": [HumanMessage("and now?")]}, config))
    assert roles()[3:] == [("user", "and now?"), ("assistant", None), ("tool", "v2")]
    appended = _chain_events(service, "langchain:done", MessageAppended)
    assert len({e.message["lc_id"] for e in appended}) == len(appended) == 6
    db = str(tmp_path / "lc.ledger.db")
    proc = subprocess.run(
        [CLI, "--db", db, "replay", "langchain:done", "--verify"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_final_answer_langchain_cannot_convert_is_a_warning_not_a_failed_run(service, caplog):
    """The run has its answer: a conversion error at its end (an image block with no
    data) is told, not raised (it failed an ``invoke`` whose answer existed)."""
    odd = AIMessage(content=[{"type": "image", "source_type": "bogus"}])
    model = ScriptedChat(messages=iter([odd]))
    agent = create_agent(
        model=model,
        tools=[],
        middleware=[CtxLedgerMiddleware(service, context_length=16_000)],
        checkpointer=InMemorySaver(),
    )
    with caplog.at_level("WARNING", logger="ctxledger.integrations.langchain"):
        state = agent.invoke({"messages": [HumanMessage("draw it")]}, _thread("odd"))
    assert state["messages"][-1].content == odd.content
    assert "the end of thread odd not recorded yet" in caplog.text
    live = live_messages(service, service.tip("langchain:odd"))
    assert [m["content"] for m in live] == ["draw it"]


def test_a_state_object_with_messages_has_its_end_recorded(service):
    """A state given as an object (a pydantic schema) was skipped without a word."""
    from pydantic import BaseModel

    class State(BaseModel):
        messages: list[Any]
        ctxledger_run: str

    middleware = CtxLedgerMiddleware(service, context_length=16_000, run_ids=lambda: "r1")
    model = ScriptedChat(messages=iter([AIMessage("first")]))
    agent = create_agent(model=model, tools=[], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("hello")]})
    late = AIMessage("added after the run", id="late-1")
    # a run without a thread id has a key of its own (test_integration_langchain_runs.py)
    middleware.after_agent(
        State(messages=[*state["messages"], late], ctxledger_run="default:r1"), None
    )
    live = live_messages(service, service.tip("langchain:default:r1"))
    assert [m["content"] for m in live] == ["hello", "first", "added after the run"]


def test_a_state_with_no_readable_messages_is_told_once(service, caplog):
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    with caplog.at_level("WARNING", logger="ctxledger.integrations.langchain"):
        middleware.after_agent(object(), None)
        middleware.after_agent(object(), None)
    assert caplog.text.count("an agent state with no readable messages (object)") == 1


def test_a_dynamic_prompt_is_sent_as_the_agent_made_it_with_the_compaction_note(service):
    """The agent's system message of each call is sent (a ``dynamic_prompt`` applies), not
    the prompt the thread started with; after a compaction it carries the ledger's note."""
    from ctxledger.compressor.markers import add_system_note, has_system_note

    run = {"n": 0}
    agent, model = _dynamic_agent(service, lambda: f"You review code. This is run {run['n']}.")
    config = {"configurable": {"thread_id": "t1"}}
    compacted = False
    for t in range(TURNS):
        run["n"] = t
        before = len(model.inputs)
        agent.invoke({"messages": [HumanMessage(f"turn {t}: src/m{t}.py " + "now " * 120)]}, config)
        expected = f"You review code. This is run {t}."
        for sent, view in zip(model.inputs[before:], model.views[before:], strict=True):
            noted = has_system_note(view[0]["content"])  # the ledger's view at that call
            assert sent[0].content == (add_system_note(expected) if noted else expected)
            assert view[0]["content"] == sent[0].content  # the ledger holds what is sent
            compacted = compacted or noted
    assert compacted
    # session 34: the ledger holds the prompt sent (it counts for preflight), one
    # SystemPromptSet per change: the start's and one per later run
    tip = service.tip("langchain:t1")
    held = service.ledger.transcript.session(tip).system_prompt
    assert held in (expected, add_system_note(expected))
    recorded = _chain_events(service, "langchain:t1", SystemPromptSet)
    assert recorded[0].text == "You review code. This is run 0."
    assert len(recorded) == TURNS


def _dynamic_agent(service, prompt_of):
    from langchain.agents.middleware import dynamic_prompt

    model = ScriptedChat(messages=iter(script(TURNS)))
    model.inputs, model.views, model.service = [], [], service

    @dynamic_prompt
    def prompt(request: Any) -> str:
        return prompt_of()

    middleware = CtxLedgerMiddleware(service, model="fake", context_length=16_000)
    agent = create_agent(
        model=model,
        tools=[read_file],
        middleware=[prompt, middleware],
        checkpointer=InMemorySaver(),
    )
    return agent, model


def test_a_dynamic_prompt_that_stays_the_same_is_recorded_once(service):
    agent, model = _dynamic_agent(service, lambda: "You review code, carefully.")
    config = {"configurable": {"thread_id": "t1"}}
    for t in range(TURNS):
        agent.invoke({"messages": [HumanMessage(f"turn {t}: src/m{t}.py " + "now " * 120)]}, config)
    assert len(model.inputs) == 2 * TURNS
    assert service.tip("langchain:t1") != "langchain:t1"  # it compacted (continuations)
    recorded = _chain_events(service, "langchain:t1", SystemPromptSet)
    assert [e.text for e in recorded] == ["You review code, carefully."]


def test_a_grown_dynamic_prompt_is_counted_by_preflight_before_the_call(service):
    """A prompt that grows by ~4.4K tokens on run 6 is recorded before that run's first call,
    so preflight compacts before sending it (it used to be seen only through the usage
    the provider reported after the call)."""
    run = {"n": 0}
    agent, model = _dynamic_agent(
        service,
        lambda: "You review code." + (" Follow rule seven." * 1100 if run["n"] >= 6 else ""),
    )
    config = {"configurable": {"thread_id": "t1"}}
    for t in range(7):
        run["n"] = t
        agent.invoke({"messages": [HumanMessage(f"turn {t}: src/m{t}.py " + "now " * 120)]}, config)
    switches = _chain_events(service, "langchain:t1", SessionSwitched)
    assert [s.trigger for s in switches][:1] == ["preflight"]
    # run 6's first call was sent the compacted view, not the 24 messages of runs 0-5 + 1
    first = next(sent for sent in model.inputs if "rule seven" in sent[0].content)
    assert len(first) - 1 < 4 * 6 + 1
    assert switches[0].system_prompt.startswith("You review code. Follow rule seven.")


def test_a_grown_prompt_another_worker_recorded_first_still_compacts(service, monkeypatch):
    """Another worker records the grown prompt between this one's read and its call: the
    call writes nothing, and the middleware's read (`seen`) still runs preflight (review 2:
    a same-text call runs none otherwise)."""
    from ctxledger.ledger.prompt import set_system_prompt

    run = {"n": 0}
    agent, _ = _dynamic_agent(
        service,
        lambda: "You review code." + (" Follow rule seven." * 1100 if run["n"] >= 6 else ""),
    )
    own = service.set_system_prompt

    async def raced(sid: str, text: str, **kwargs: Any) -> Any:
        set_system_prompt(service.ledger, service.tip(sid), text)  # the other worker
        return await own(sid, text, **kwargs)

    monkeypatch.setattr(service, "set_system_prompt", raced)
    config = {"configurable": {"thread_id": "t1"}}
    for t in range(7):
        run["n"] = t
        agent.invoke({"messages": [HumanMessage(f"turn {t}: src/m{t}.py " + "now " * 120)]}, config)
    switches = _chain_events(service, "langchain:t1", SessionSwitched)
    assert [s.trigger for s in switches][:1] == ["preflight"]
    assert switches[0].system_prompt.startswith("You review code. Follow rule seven.")


@pytest.mark.parametrize(("before", "after"), [(600, 0), (0, 600)])
def test_a_changed_dynamic_prompt_is_reproduced_by_what_if(service, before, after):
    """Live and what-if take the same order: preflight, then a changed prompt is recorded
    and preflight runs again (a what-if plays the change after the user turn's preflight).
    Run 6 sends a long message with the prompt shrunk (or grown): the long prompt with that
    message is over the threshold, the short one is not; a what-if reproduces it exactly
    (the shrinking case failed when the middleware recorded before its first preflight)."""
    from ctxledger.analysis.whatif import whatif

    run = {"n": 0}
    agent, _ = _dynamic_agent(
        service,
        lambda: "You review code." + " Follow rule seven." * (before if run["n"] < 6 else after),
    )
    config = {"configurable": {"thread_id": "t1"}}
    for t in range(TURNS):
        run["n"] = t
        words = "now " * (2000 if t == 6 else 120)
        agent.invoke({"messages": [HumanMessage(f"turn {t}: src/m{t}.py " + words)]}, config)
    assert len(_chain_events(service, "langchain:t1", SystemPromptSet)) == 2
    report = whatif(service.ledger, "langchain:t1")
    assert report.reproduces_recorded, report.reproduction.differences
    assert report.reproduction.compactions[0] >= 1


def test_a_system_message_of_content_blocks_keeps_them_and_gets_the_note_as_a_block():
    from langchain_core.messages import SystemMessage

    from ctxledger.compressor.markers import add_system_note, system_note
    from ctxledger.integrations.langchain_messages import system_message as _system_message
    from ctxledger.integrations.langchain_messages import text_of
    from ctxledger.ledger.prompt import held_prompt

    blocks = [{"type": "text", "text": "You review code.", "cache_control": {"type": "ephemeral"}}]
    host = SystemMessage(content=blocks)
    assert _system_message(host, {"role": "system", "content": "You review code."}) is host
    held = add_system_note("Old prompt.")  # a compacted tip
    noted = _system_message(host, {"role": "system", "content": held})
    note = {"type": "text", "text": f"\n{system_note()}"}
    assert noted is not None and noted.content == [*blocks, note]
    # what the ledger records for these blocks is the text of what is sent (counted)
    recorded = held_prompt(held, text_of(host.content))
    assert recorded == text_of(noted.content) == add_system_note("You review code.")
    assert host.content == blocks  # the agent's message is not changed
    ledger = {"role": "system", "content": "From the state."}
    assert _system_message(None, ledger).content == "From the state."
    assert _system_message(None, None) is None


def test_a_refused_prompt_at_a_restart_ends_nothing(service, monkeypatch):
    """The host's prompt is checked before the old session ends: a history rewritten under
    a prompt over the input limit is refused with nothing appended (review 2)."""
    from langchain_core.messages import RemoveMessage

    from ctxledger.errors import InvalidInput

    model = ScriptedChat(messages=iter(script(2)))
    config = {"configurable": {"thread_id": "t1"}}
    agent = create_agent(
        model=model,
        tools=[read_file],
        system_prompt="You review code. " * 300,  # 5,100 bytes
        middleware=[CtxLedgerMiddleware(service, context_length=16_000)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("first")]}, config)
    first = agent.get_state(config).values["messages"][0]
    agent.update_state(config, {"messages": [RemoveMessage(id=first.id)]})
    monkeypatch.setenv("CTXLEDGER_MAX_INPUT_BYTES", "4096")
    events = len(list(service.ledger.store.read_all()))
    with pytest.raises(InvalidInput, match="over CTXLEDGER_MAX_INPUT_BYTES"):
        agent.invoke({"messages": [HumanMessage("second")]}, config)
    assert len(list(service.ledger.store.read_all())) == events
    assert not service.ledger.transcript.session("langchain:t1").ended
