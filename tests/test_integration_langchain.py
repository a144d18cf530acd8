"""CtxLedgerMiddleware against real LangChain v1 / LangGraph: create_agent with a fake
chat model, a tool and a checkpointer, over enough turns to compact."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from ctxledger import CompressionConfig, ContextService, InvalidInput, Ledger
from ctxledger.events import MessageAppended, ToolCallIdsRepaired, ToolsDeclared, UsageReported
from ctxledger.integrations.common import live_messages, system_view
from ctxledger.integrations.langchain import CtxLedgerMiddleware, from_chat, to_chat

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
TURNS = 10
CLI = str(Path(sys.executable).with_name("ctxledger"))


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}: " + "lorem ipsum dolor " * 150


class ScriptedChat(GenericFakeChatModel):
    """Replies from the script; reports usage from the size of what it was sent."""

    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    #: the ledger's view (system + live) at the moment of each call
    views: list[list[dict]] = Field(default_factory=list)
    service: Any = None

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.inputs.append(list(messages))
        if self.service is not None:
            tip = self.service.tip("langchain:t1")
            self.views.append([system_view(self.service, tip), *live_messages(self.service, tip)])
        result = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        sent = sum(len(json.dumps(m.model_dump(), default=str)) for m in messages) // 4
        message = result.generations[0].message
        message.usage_metadata = {
            "input_tokens": sent,
            "output_tokens": 10,
            "total_tokens": sent + 10,
        }
        return result


def _script(turns: int) -> list[AIMessage]:
    replies = []
    for t in range(turns):
        replies.append(
            AIMessage(
                "",
                tool_calls=[
                    {"name": "read_file", "args": {"path": f"src/m{t}.py"}, "id": f"call_{t}"}
                ],
            )
        )
        replies.append(AIMessage(f"m{t} reviewed"))
    return replies


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
    model = ScriptedChat(messages=iter(_script(TURNS)))
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
    model = ScriptedChat(messages=iter(_script(4)))
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

    model = ScriptedChat(messages=iter(_script(2)))
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


def _agent(service: ContextService, replies: int, saver: InMemorySaver) -> Any:
    model = ScriptedChat(messages=iter(_script(replies)))
    model.inputs, model.views = [], []
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    return create_agent(model=model, tools=[read_file], middleware=[middleware], checkpointer=saver)


@pytest.mark.parametrize("other", ["a~2", "a%7E2", "a%2"])
def test_a_thread_id_holding_the_separator_never_meets_another_thread(service, other):
    """Thread ``a~2`` (or one spelling an escape) and thread ``a`` keep their own ledger
    sessions: a restarted middleware of ``a`` does not take ``a~2``'s session for its second
    generation (and end it as 'history rewritten')."""
    saver = InMemorySaver()
    for thread in ("a", other):
        agent = _agent(service, 2, saver)
        agent.invoke({"messages": [HumanMessage(f"hello from {thread}")]}, _thread(thread))
    agent = _agent(service, 2, saver)  # a restarted process, thread "a" again
    agent.invoke({"messages": [HumanMessage("again")]}, _thread("a"))
    state = service.ledger.transcript.state.sessions
    roots = [s for s in state if state[s].parent_session_id is None and s.startswith("langchain:")]
    assert len(roots) == 2, roots
    for view in state.values():
        assert not view.ended, (view.session_id, view.end_reason)
    users = {
        root: [
            m["content"] for m in live_messages(service, service.tip(root)) if m["role"] == "user"
        ]
        for root in roots
    }
    assert sorted(users.values()) == sorted([["hello from a", "again"], [f"hello from {other}"]]), (
        users
    )


def test_a_thread_id_with_separators_keeps_one_session_across_a_restart(service):
    saver = InMemorySaver()
    for text in ("first", "second"):
        agent = _agent(service, 2, saver)
        agent.invoke({"messages": [HumanMessage(text)]}, _thread("x~y z/%41"))
    (root,) = [s for s in service.ledger.transcript.state.sessions if s.startswith("langchain:")]
    users = [m["content"] for m in live_messages(service, root) if m["role"] == "user"]
    assert users == ["first", "second"]
    assert root == "langchain:x%7Ey z/%2541"


@pytest.mark.parametrize("thread", ["user/42", "Zürich", "thread 1"])
def test_a_thread_recorded_before_the_escaping_is_continued(service, thread):
    """Thread ids without ``~``, ``%`` or control characters keep the session id they had
    (``langchain:<thread>``): an upgraded process continues their sessions."""
    saver = InMemorySaver()
    for text in ("first", "second"):
        agent = _agent(service, 2, saver)
        agent.invoke({"messages": [HumanMessage(text)]}, _thread(thread))
    roots = [s for s in service.ledger.transcript.state.sessions if s.startswith("langchain:")]
    assert roots == [f"langchain:{thread}"]
    users = [m["content"] for m in live_messages(service, roots[0]) if m["role"] == "user"]
    assert users == ["first", "second"]


def _thread(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def test_a_long_thread_id_gives_a_session_id_the_http_api_can_name(service):
    """A 10,000-character thread id made a 10,010-character session id, past the 200
    characters the HTTP API's routes take: now its start and a digest, the same after a
    restart, and two long ids that share their first 150 characters stay apart."""
    from ctxledger.server.routing import check_session_id

    saver = InMemorySaver()
    first, second = "t" * 10_000, "t" * 9_999 + "u"
    for text, thread in (("first", first), ("second", first), ("other", second)):
        agent = _agent(service, 2, saver)  # a restarted process each time
        agent.invoke({"messages": [HumanMessage(text)]}, _thread(thread))
    roots = sorted(s for s in service.ledger.transcript.state.sessions if s.startswith("lang"))
    assert len(roots) == 2 and all(len(root) == 170 for root in roots), roots
    for root in roots:
        assert check_session_id(root, "id") == root and root.startswith("langchain:" + "t" * 126)
    users = {
        tuple(m["content"] for m in live_messages(service, root) if m["role"] == "user")
        for root in roots
    }
    assert users == {("first", "second"), ("other",)}
    # a generation number still fits
    assert len(CtxLedgerMiddleware(service)._root(first, 10**6)) <= 200


def test_a_long_thread_recorded_under_its_whole_id_is_continued(service):
    """A session recorded before the digest under the whole long id is found again."""
    thread = "x" * 300
    anyio.run(
        lambda: service.start_session(
            model="langchain-agent", context_length=16_000, session_id=f"langchain:{thread}"
        )
    )
    agent = _agent(service, 2, InMemorySaver())
    agent.invoke({"messages": [HumanMessage("hello")]}, _thread(thread))
    roots = [s for s in service.ledger.transcript.state.sessions if s.startswith("langchain:")]
    assert roots == [f"langchain:{thread}"]
    users = [m["content"] for m in live_messages(service, roots[0]) if m["role"] == "user"]
    assert users == ["hello"]


def test_a_long_thread_recorded_whole_starts_its_next_generation(service, monkeypatch):
    """Session 33 bounded a chosen session id to 1,024 characters: a thread recorded
    whole before the digest (2,000 characters here) could not start the generation a
    rewritten history starts; its sessions keep the name they were recorded under."""
    from langchain_core.messages import RemoveMessage

    thread = "y" * 2000
    with monkeypatch.context() as patch:  # (written as the code of the time did)
        patch.setattr("ctxledger.ledger.spec.check_name", lambda value, *_: value)
        anyio.run(
            lambda: service.start_session(
                model="langchain-agent", context_length=16_000, session_id=f"langchain:{thread}"
            )
        )
    agent = _agent(service, 2, InMemorySaver())
    agent.invoke({"messages": [HumanMessage("first")]}, _thread(thread))
    first = agent.get_state(_thread(thread)).values["messages"][0]
    agent.update_state(_thread(thread), {"messages": [RemoveMessage(id=first.id)]})
    agent.invoke({"messages": [HumanMessage("second")]}, _thread(thread))
    again = [m["content"] for m in live_messages(service, f"langchain:{thread}~2")]
    assert "second" in again and "first" not in again


def test_a_long_new_thread_id_leaves_every_name_checked(service):
    """A thread id past 150 characters (its key is the digest: nothing recorded whole)
    started its sessions with every name check off: a 5,000-character model holding a
    newline, and a title holding the id's controls, were recorded. The model is refused;
    the id's title is the key made for it."""
    from ctxledger.limits import check_name

    thread = "\u202eevil\nthread\x1b" + "t" * 200
    model = ScriptedChat(messages=iter(_script(2)))
    model.inputs, model.views = [], []
    bad = CtxLedgerMiddleware(service, model="gpt-4o\n" + "x" * 5_000, context_length=16_000)
    agent = create_agent(model=model, tools=[read_file], middleware=[bad], checkpointer=None)
    with pytest.raises(InvalidInput, match="model is too long"):
        agent.invoke({"messages": [HumanMessage("hi")]}, _thread(thread))
    assert not any(s.startswith("langchain:") for s in service.ledger.transcript.state.sessions)
    _agent(service, 2, InMemorySaver()).invoke({"messages": [HumanMessage("hi")]}, _thread(thread))
    (info,) = (
        v for k, v in service.ledger.chains.state.sessions.items() if k.startswith("langchain:")
    )
    assert info.title is not None and check_name(info.title, "title", 4_096) == info.title
    assert info.title.startswith("langchain thread -evil-thread-ttt"), info.title


def test_a_thread_recorded_with_a_bidi_control_in_its_key_goes_on(service, monkeypatch):
    """Session 33 escapes bidi and C1 controls in a key too (a key holding one is no
    session id the ledger takes); a thread recorded before with U+202E in its key is
    continued under it, and its next generation starts."""
    from langchain_core.messages import RemoveMessage

    thread = "a\u202eb"
    with monkeypatch.context() as patch:  # (written as the code of the time did)
        patch.setattr("ctxledger.ledger.spec.check_name", lambda value, *_: value)
        anyio.run(
            lambda: service.start_session(
                model="langchain-agent", context_length=16_000, session_id=f"langchain:{thread}"
            )
        )
    agent = _agent(service, 2, InMemorySaver())
    agent.invoke({"messages": [HumanMessage("first")]}, _thread(thread))
    assert live_messages(service, f"langchain:{thread}")[0]["content"] == "first"
    first = agent.get_state(_thread(thread)).values["messages"][0]
    agent.update_state(_thread(thread), {"messages": [RemoveMessage(id=first.id)]})
    agent.invoke({"messages": [HumanMessage("second")]}, _thread(thread))
    again = [m["content"] for m in live_messages(service, f"langchain:{thread}~2")]
    assert "second" in again and "first" not in again
    agent = _agent(service, 2, InMemorySaver())
    agent.invoke({"messages": [HumanMessage("new")]}, _thread("c\u202ed"))
    assert "langchain:c%E2%80%AEd" in service.ledger.transcript.state.sessions


def test_a_long_thread_whose_digest_key_kept_a_bidi_control_goes_on(service, monkeypatch):
    """A thread past 150 characters holding U+2066, recorded before session 33: its key was
    the digest with the control kept as itself. It is found under that key and goes on."""
    from ctxledger.limits import digest_key

    thread = "p\u2066q" + "z" * 200
    old_key = digest_key(thread, thread)  # (nothing but the control was escaped then)
    with monkeypatch.context() as patch:  # (written as the code of the time did)
        patch.setattr("ctxledger.ledger.spec.check_name", lambda value, *_: value)
        anyio.run(
            lambda: service.start_session(
                model="langchain-agent", context_length=16_000, session_id=f"langchain:{old_key}"
            )
        )
    _agent(service, 2, InMemorySaver()).invoke({"messages": [HumanMessage("hi")]}, _thread(thread))
    roots = [s for s in service.ledger.transcript.state.sessions if s.startswith("langchain:")]
    assert roots == [f"langchain:{old_key}"]
    assert live_messages(service, roots[0])[0]["content"] == "hi"


def test_a_thread_named_like_another_threads_key_does_not_take_its_session(service):
    """A long thread's key is 160 safe characters; another thread whose id is exactly that
    key found the session as one "recorded whole", ended it and wrote its messages there
    (the victim's next call then failed). A whole key shaped like a made key is taken only
    when its session's title is this thread's."""
    victim = "victim-thread-" + "v" * 200
    saver = InMemorySaver()
    _agent(service, 4, saver).invoke({"messages": [HumanMessage("mine")]}, _thread(victim))
    (root,) = [s for s in service.ledger.transcript.state.sessions if s.startswith("langchain:")]
    other = root.removeprefix("langchain:")
    _agent(service, 2, InMemorySaver()).invoke({"messages": [HumanMessage("x")]}, _thread(other))
    assert not service.ledger.transcript.session(service.tip(root)).ended
    _agent(service, 4, saver).invoke({"messages": [HumanMessage("again")]}, _thread(victim))
    users = [m["content"] for m in live_messages(service, root) if m["role"] == "user"]
    assert users == ["mine", "again"]
    # the same id recorded whole by its own thread (its title says so) goes on
    assert CtxLedgerMiddleware(service)._key(other) != other
    anyio.run(
        lambda: service.start_session(
            model="m",
            context_length=16_000,
            session_id="langchain:" + "k" * 126 + ".h" + "0" * 32,
            title="langchain thread " + "k" * 126 + ".h" + "0" * 32,
        )
    )
    assert (
        CtxLedgerMiddleware(service)._key("k" * 126 + ".h" + "0" * 32)
        == "k" * 126 + ".h" + "0" * 32
    )


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
    params = tools[0]["function"]["parameters"]["properties"]["max_distance"]
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
    from langchain.agents.middleware import dynamic_prompt

    from ctxledger.compressor.markers import add_system_note, has_system_note

    model = ScriptedChat(messages=iter(_script(TURNS)))
    model.inputs, model.views, model.service = [], [], service
    run = {"n": 0}

    @dynamic_prompt
    def prompt(request: Any) -> str:
        return f"You review code. This is run {run['n']}."

    middleware = CtxLedgerMiddleware(service, model="fake", context_length=16_000)
    agent = create_agent(
        model=model,
        tools=[read_file],
        middleware=[prompt, middleware],
        checkpointer=InMemorySaver(),
    )
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
            compacted = compacted or noted
    assert compacted
    # the ledger keeps the prompt the thread started with (it counts for preflight)
    assert service.ledger.transcript.session("langchain:t1").system_prompt == (
        "You review code. This is run 0."
    )


def test_a_system_message_of_content_blocks_keeps_them_and_gets_the_note_as_a_block():
    from langchain_core.messages import SystemMessage

    from ctxledger.compressor.markers import add_system_note, system_note
    from ctxledger.integrations.langchain import _system_message

    blocks = [{"type": "text", "text": "You review code.", "cache_control": {"type": "ephemeral"}}]
    host = SystemMessage(content=blocks)
    assert _system_message(host, {"role": "system", "content": "You review code."}) is host
    noted = _system_message(host, {"role": "system", "content": add_system_note("Old prompt.")})
    assert noted is not None and noted.content == [*blocks, {"type": "text", "text": system_note()}]
    assert host.content == blocks  # the agent's message is not changed
    ledger = {"role": "system", "content": "From the state."}
    assert _system_message(None, ledger).content == "From the state."
    assert _system_message(None, None) is None
