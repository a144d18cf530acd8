"""CtxLedgerMiddleware on runs without a thread id (a graph with no checkpointer, as a
server's stateless agent): each run its own ledger session, whatever its messages share
with other runs, and a bounded memory of them."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from ctxledger import CompressionConfig, ContextService, Ledger
from ctxledger.events import MessageAppended, UsageReported
from ctxledger.integrations import langchain as lc
from ctxledger.integrations import langchain_keys as lc_keys
from ctxledger.integrations.common import live_messages
from ctxledger.integrations.langchain import CtxLedgerMiddleware

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
#: module-level messages every request starts with (LangGraph gives each an id once)
SYSTEM_PREAMBLE = SystemMessage("You read code.")
FEW_SHOT_PREAMBLE = HumanMessage("Context: the repository is foo.")


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}"


class EchoChat(GenericFakeChatModel):
    """Answers from what it was sent: a tool call for the ask, then an answer (after
    `rounds` calls in all, when more); `fail_at` (a call number) raises instead."""

    calls: int = 0
    fail_at: int | None = None
    rounds: int = 1
    inputs: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> EchoChat:
        return self

    def _reply(self, messages: list[Any]) -> ChatResult:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("the provider is down")
        self.inputs.append(list(messages))
        last = next(m for m in reversed(messages) if m.type == "human")
        if messages[-1].type == "human" or self.calls <= self.rounds:
            call = {"name": "read_file", "args": {"path": last.content}, "id": f"c_{self.calls}"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage(f"read {last.content}")
        reply.usage_metadata = {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55}
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return self._reply(messages)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        await anyio.sleep(0.001)  # the other runs go on meanwhile
        return self._reply(messages)


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _usage(svc: ContextService, sid: str) -> int:
    chain = svc.ledger.chains.chain(svc.tip(sid))
    return sum(
        1
        for r in svc.ledger.store.read_all()
        if isinstance(r.event, UsageReported) and r.event.session_id in chain
    )


def _asks(svc: ContextService, sid: str) -> list[str]:
    return [m["content"] for m in live_messages(svc, sid) if m["role"] == "user"]


@pytest.mark.parametrize("preamble", [None, SYSTEM_PREAMBLE, FEW_SHOT_PREAMBLE])
def test_runs_without_a_thread_id_at_the_same_time_keep_a_session_each(service, caplog, preamble):
    """With no checkpointer every run is its own conversation; they all were thread
    ``default`` (then ``default:<id of the first message>``, which a preamble object
    every request reuses shares), so runs at the same time ended each other's session
    and appended their history again (8 sessions for 4 runs, usage reports lost)."""
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    agent = create_agent(
        model=EchoChat(messages=iter([])), tools=[read_file], middleware=[middleware]
    )
    asks = [f"q{i}.py" for i in range(4)]
    head = [] if preamble is None else [preamble]

    async def runs() -> list[Any]:
        results: list[Any] = [None] * len(asks)

        async def one(i: int) -> None:
            results[i] = await agent.ainvoke({"messages": [*head, HumanMessage(asks[i])]})

        async with anyio.create_task_group() as tg:
            for i in range(len(asks)):
                tg.start_soon(one, i)
        return results

    with caplog.at_level("WARNING", logger="ctxledger"):
        results = anyio.run(runs)
    assert "not recorded" not in caplog.text
    sessions = service.ledger.transcript.state.sessions
    assert len(sessions) == len(asks)
    by_ask = {_asks(service, s)[-1]: s for s in sessions}
    assert sorted(by_ask) == asks
    for ask, state in zip(asks, results, strict=True):
        assert state["messages"][-1].content == f"read {ask}"
        sid = by_ask[ask]
        assert _asks(service, sid) == [m.content for m in head if m.type == "human"] + [ask]
        assert len([m for m in live_messages(service, sid) if m["role"] != "system"]) == 4 + (
            preamble is FEW_SHOT_PREAMBLE
        )
        assert not service.ledger.transcript.session(sid).ended
        assert _usage(service, sid) == 2


def test_a_run_given_back_its_messages_continues_its_session_and_no_other(service):
    """A run passed the messages of an ended run (and a new ask) continues that run's
    session; a run sharing only its preamble is a session of its own."""
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    agent = create_agent(
        model=EchoChat(messages=iter([])), tools=[read_file], middleware=[middleware]
    )
    first = agent.invoke({"messages": [SYSTEM_PREAMBLE, HumanMessage("a.py")]})
    other = agent.invoke({"messages": [SYSTEM_PREAMBLE, HumanMessage("b.py")]})
    again = agent.invoke({"messages": [*first["messages"], HumanMessage("c.py")]})
    assert again["messages"][-1].content == "read c.py"
    sessions = sorted(service.ledger.transcript.state.sessions)
    assert len(sessions) == 2
    assert sorted(_asks(service, s) for s in sessions) == [["a.py", "c.py"], ["b.py"]]
    assert len(other["messages"]) == 5


def test_a_summarized_history_mid_run_is_one_line_of_sessions(service):
    """LangChain's SummarizationMiddleware replaces the history (the first message too)
    during the run: the run goes on in ``~2``, ``~3``, ... of its session, each replaced
    one ended (keyed by the first message, each summary was a new unrelated session and
    none was ended)."""
    summarizer = GenericFakeChatModel(messages=iter([AIMessage("the summary")] * 10))
    summarize = SummarizationMiddleware(
        model=summarizer, trigger=("messages", 6), keep=("messages", 2)
    )
    middleware = CtxLedgerMiddleware(service, context_length=16_000, run_ids=lambda: "r1")
    model = EchoChat(messages=iter([]), rounds=6)
    agent = create_agent(model=model, tools=[read_file], middleware=[summarize, middleware])
    state = agent.invoke({"messages": [HumanMessage("all.py")]})
    assert state["messages"][-1].content.startswith("read ") and model.calls == 7
    sessions = sorted(service.ledger.transcript.state.sessions)
    assert len(sessions) > 1
    root = "langchain:default:r1"
    assert sessions == [root, *(f"{root}~{n}" for n in range(2, len(sessions) + 1))]
    ended = [service.ledger.transcript.session(s).ended for s in sessions]
    assert ended == [True] * (len(sessions) - 1) + [False]
    assert list(middleware._runs) == ["default:r1"]


def test_runs_that_fail_or_pile_up_are_not_kept_forever(service, monkeypatch):
    """A run that raises reaches no ``after_agent``: what the middleware kept of it was
    never dropped (50 failed runs, 50 entries); a server's finished runs are kept up to
    RUNS_KEPT, the least recently used forgotten first."""
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    for i in range(3):
        model = EchoChat(messages=iter([]), fail_at=2)
        agent = create_agent(model=model, tools=[read_file], middleware=[middleware])
        with pytest.raises(RuntimeError, match="the provider is down"):
            agent.invoke({"messages": [HumanMessage(f"x{i}.py")]})
    assert len(service.ledger.transcript.state.sessions) == 3
    assert not middleware._runs and not middleware._keys

    monkeypatch.setattr(lc, "RUNS_KEPT", 2)
    agent = create_agent(
        model=EchoChat(messages=iter([])), tools=[read_file], middleware=[middleware]
    )
    states = [agent.invoke({"messages": [HumanMessage(f"y{i}.py")]}) for i in range(4)]
    assert len(middleware._runs) == 2 and len(middleware._ended) == 2
    # the latest run is still continued from memory
    again = agent.invoke({"messages": [*states[-1]["messages"], HumanMessage("z.py")]})
    assert again["messages"][-1].content == "read z.py"
    assert len(service.ledger.transcript.state.sessions) == 3 + 4


@pytest.mark.parametrize("gap", ["restart", "forgotten"])
def test_a_conversation_resent_after_a_restart_or_once_forgotten_continues_its_session(
    service, monkeypatch, gap
):
    """A stateless server passes each run the previous state's messages and a new ask.
    The run was continued only while the middleware remembered it: after a restart (a
    new middleware on the same ledger) or past RUNS_KEPT other runs it was a new session
    appending the whole history again (and paying for its compactions again)."""
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    model = EchoChat(messages=iter([]))
    agent = create_agent(model=model, tools=[read_file], middleware=[middleware])
    state = agent.invoke({"messages": [SYSTEM_PREAMBLE, HumanMessage("a.py")]})
    state = agent.invoke({"messages": [*state["messages"], HumanMessage("b.py")]})
    if gap == "restart":
        middleware = CtxLedgerMiddleware(service, context_length=16_000)
        agent = create_agent(model=model, tools=[read_file], middleware=[middleware])
    else:
        monkeypatch.setattr(lc, "RUNS_KEPT", 2)
        for i in range(3):
            agent.invoke({"messages": [SYSTEM_PREAMBLE, HumanMessage(f"other{i}.py")]})
    appended = _appended(service)
    state = agent.invoke({"messages": [*state["messages"], HumanMessage("c.py")]})
    assert state["messages"][-1].content == "read c.py"
    assert _appended(service) == appended + 4  # the ask, the call, its result, the answer
    mine = [s for s in service.ledger.transcript.state.sessions if "a.py" in _asks(service, s)]
    assert len(mine) == 1 and _asks(service, mine[0]) == ["a.py", "b.py", "c.py"]
    assert len(service.ledger.transcript.state.sessions) == 1 + 3 * (gap == "forgotten")


def test_a_conversation_of_the_one_default_thread_of_earlier_versions_goes_on(service):
    """Before runs had keys of their own every run without a thread id was the session
    ``langchain:default``: a conversation recorded there goes on there."""

    async def record() -> None:
        sid = await service.start_session(
            model="langchain-agent", context_length=16_000, session_id="langchain:default"
        )
        await service.append(sid, lc.to_chat(history))

    history = [HumanMessage("a.py", id="h1"), AIMessage("read a.py", id="r1")]
    anyio.run(record)
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    agent = create_agent(
        model=EchoChat(messages=iter([])), tools=[read_file], middleware=[middleware]
    )
    agent.invoke({"messages": [*history, HumanMessage("b.py")]})
    assert sorted(service.ledger.transcript.state.sessions) == ["langchain:default"]
    assert _asks(service, "langchain:default") == ["a.py", "b.py"]


def test_a_sync_agent_keeps_its_books_on_its_own_thread(service, monkeypatch):
    """``agent.batch`` calls the hooks from many threads while the middleware's loop
    thread changes what it remembers of runs: before_agent read it from the caller's
    thread ("Set changed size during iteration"); a failed call forgot its run there."""
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    threads: list[str] = []
    for name in ("_continued", "_forget_run"):
        step = getattr(middleware, name)

        def spy(*args: Any, _step: Any = step) -> Any:
            threads.append(threading.current_thread().name)
            return _step(*args)

        monkeypatch.setattr(middleware, name, spy)
    model = EchoChat(messages=iter([]), fail_at=2)
    agent = create_agent(model=model, tools=[read_file], middleware=[middleware])
    with pytest.raises(RuntimeError, match="the provider is down"):
        agent.invoke({"messages": [HumanMessage("a.py")]})
    assert threads == ["ctxledger-langchain"] * 2


def _appended(svc: ContextService) -> int:
    return sum(isinstance(r.event, MessageAppended) for r in svc.ledger.store.read_all())


@pytest.mark.parametrize("flow", ["round-robin", "regenerate", "thread"])
def test_two_workers_on_one_ledger_continue_what_the_ledger_holds(service, tmp_path, flow):
    """Two services on one SQLite file stand for two worker processes. Worker 1 kept
    what it had seen of a conversation that worker 2 then continued (turn 2): its next
    turn was continued from that memory, turn 2 was appended again (round-robin), or a
    regenerated turn 2 followed the abandoned one (the model was sent both)."""
    from langgraph.checkpoint.memory import InMemorySaver

    other = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    saver = InMemorySaver() if flow == "thread" else None
    models = [EchoChat(messages=iter([]), rounds=0) for _ in range(2)]
    w1, w2 = (
        create_agent(
            model=m, tools=[read_file], checkpointer=saver,
            middleware=[CtxLedgerMiddleware(svc, context_length=16_000)],
        )
        for m, svc in zip(models, (service, other), strict=True)
    )  # fmt: skip
    if flow == "thread":
        config = {"configurable": {"thread_id": "t1"}}
        for worker, ask in ((w1, "a.py"), (w2, "b.py"), (w1, "c.py")):
            worker.invoke({"messages": [HumanMessage(ask)]}, config)
        sent = [m.content for m in models[0].inputs[-1] if m.type == "human"]
        assert sent == ["a.py", "b.py", "c.py"]
        other.ledger.close()
        return
    first = w1.invoke({"messages": [HumanMessage("a.py")]})["messages"]
    second = w2.invoke({"messages": [*first, HumanMessage("b.py")]})["messages"]
    resent = (
        [*second, HumanMessage("c.py")] if flow == "round-robin" else [*first, HumanMessage("b2")]
    )
    w1.invoke({"messages": resent})
    sent = [m.content for m in models[0].inputs[-1] if m.type == "human"]
    assert sent == [m.content for m in resent if m.type == "human"]
    other.ledger.close()


def test_ended_runs_are_read_from_a_snapshot(service, monkeypatch):
    """Async hooks called from several threads change the ended runs while a look-up
    goes through them ('Set changed size during iteration')."""
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    agent = create_agent(
        model=EchoChat(messages=iter([])), tools=[read_file], middleware=[middleware]
    )
    for ask in ("a.py", "b.py"):
        agent.invoke({"messages": [HumanMessage(ask)]})
    current = middleware._current

    def meanwhile(thread: str, known: Any) -> Any:
        middleware._ended.add(f"default:other-{len(middleware._ended)}")
        return current(thread, known)

    monkeypatch.setattr(middleware, "_current", meanwhile)
    assert middleware._continued(["unknown"]) is None


def test_the_first_look_up_of_a_process_lets_the_loop_run(service, monkeypatch):
    """The first look-up in the ledger reads the whole log: it held the caller's event
    loop for all of it (0.5 s at 100,000 records); it yields every CHUNK records."""
    agent = create_agent(
        model=EchoChat(messages=iter([])),
        tools=[read_file],
        middleware=[CtxLedgerMiddleware(service, context_length=16_000)],
    )
    for ask in ("a.py", "b.py", "c.py"):
        agent.invoke({"messages": [HumanMessage(ask)]})
    monkeypatch.setattr(lc_keys, "CHUNK", 5)
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    ticks: list[int] = []

    async def main() -> None:
        done = anyio.Event()

        async def tick() -> None:
            while not done.is_set():
                ticks.append(1)
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            await anyio.lowlevel.checkpoint()
            before = len(ticks)
            await middleware._run_key(["unknown"])
            ticks[:] = ticks[before:]
            done.set()

    anyio.run(main)
    assert len(ticks) >= service.ledger.projector.last_seq // 5 - 1


def _one_turn(service: ContextService) -> tuple[CtxLedgerMiddleware, list[Any]]:
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    agent = create_agent(
        model=EchoChat(messages=iter([])), tools=[read_file], middleware=[middleware]
    )
    return middleware, agent.invoke({"messages": [HumanMessage("a.py")]})["messages"]


def _runs(service: ContextService) -> set[str | None]:
    return {lc_keys.run_of(s) for s in service.ledger.transcript.state.sessions}


def test_a_run_going_on_is_not_taken_by_a_second_resend(service):
    """Two runs resending one ended run at the same time: the first continues it, the
    second is a session of its own (it was taken too, the first then a rewrite: ~2)."""
    middleware, messages = _one_turn(service)
    state = {"messages": [*messages, HumanMessage("b.py")]}
    first, second = (middleware.before_agent(state, None) for _ in range(2))
    assert first is not None and second is not None
    assert first[lc.RUN_KEY] in _runs(service) and second[lc.RUN_KEY] not in _runs(service)


def test_a_resend_sharing_only_the_last_id_is_a_new_session(service):
    """After a restart, messages ending with a session's last id but not its history
    (an earlier message differs) are another conversation."""
    _, messages = _one_turn(service)
    fresh = CtxLedgerMiddleware(service, context_length=16_000)
    state = {"messages": [HumanMessage("z.py", id="other"), *messages[1:], HumanMessage("b")]}
    found = fresh.before_agent(state, None)
    assert found is not None and found[lc.RUN_KEY] not in _runs(service)


def test_a_superseded_generation_found_by_its_last_id_is_not_taken(service):
    """The index names a session by its last id; the run is not taken when that session
    was superseded: ended, as a history rewritten is (session 36: an open generation that
    is not the latest is taken, see below; this test took "not the latest" for
    superseded). Crafted ledger: ``~2`` and then generation 1 hold the same ids (the
    middleware's own writes never do: its prefix rule already tells them apart)."""
    history = [HumanMessage("a.py", id="h1"), AIMessage("read a.py", id="r1")]

    async def record() -> None:
        for sid in ("langchain:default:x~2", "langchain:default:x"):
            sid = await service.start_session(
                model="langchain-agent", context_length=16_000, session_id=sid
            )
            await service.append(sid, lc.to_chat(history))
        await service.end_session("langchain:default:x", "history rewritten")

    anyio.run(record)
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    found = middleware.before_agent({"messages": [*history, HumanMessage("b.py")]}, None)
    assert found is not None and found[lc.RUN_KEY] != "default:x"


class StepsChat(EchoChat):
    """`rounds` tool calls after each ask, then an answer (counted in what it was sent)."""

    def _reply(self, messages: list[Any]) -> ChatResult:
        self.inputs.append(list(messages))
        last = max(i for i, m in enumerate(messages) if m.type == "human")
        steps = sum(m.type == "tool" for m in messages[last:])
        ask = messages[last].content
        if steps < self.rounds:
            call = {"name": "read_file", "args": {"path": ask}, "id": f"c_{ask}_{steps}"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage(f"read {ask}")
        reply.usage_metadata = {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55}
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_two_workers_running_one_conversation_at_once_do_not_end_each_other(service, tmp_path):
    """A continued stateless conversation sent to two workers at once (a retry to a second
    worker): each found the other's write as a rewritten history, ended the other's
    session and started the next generation, at every model call (8 generations for
    2 runs of 3 tool steps). A divergence another process wrote is not a rewrite of this
    one's history: the worker starts its generation once and leaves the other's open."""
    other = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    models = [StepsChat(messages=iter([]), rounds=3) for _ in range(2)]
    w1, w2 = (
        create_agent(
            model=m, tools=[read_file],
            middleware=[CtxLedgerMiddleware(svc, context_length=16_000)],
        )
        for m, svc in zip(models, (service, other), strict=True)
    )  # fmt: skip
    first = w1.invoke({"messages": [HumanMessage("a.py")]})["messages"]

    async def both() -> list[Any]:
        results: list[Any] = [None, None]

        async def run(i: int, worker: Any) -> None:  # each worker decodes its own request
            out = await worker.ainvoke({"messages": [*first, HumanMessage("b.py")]})
            results[i] = out["messages"]

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, 0, w1)
            tg.start_soon(run, 1, w2)
        return results

    states = anyio.run(both)
    for model, state in zip(models, states, strict=True):
        assert state[-1].content == "read b.py"
        for sent in model.inputs[-4:]:  # each call of the run was sent its own history
            assert [m.id for m in sent] == [m.id for m in state[: len(sent)]]
    service.ledger.refresh()
    sessions = service.ledger.transcript.state.sessions
    roots = {service.ledger.chains.root(s) for s in sessions}
    assert len(roots) == 2  # the conversation's session, and one generation for the other run
    assert not any(service.ledger.transcript.session(service.tip(r)).ended for r in roots)
    assert service.ledger.verify().ok
    other.ledger.close()


def _second_worker(service: ContextService, tmp_path: Any) -> tuple[ContextService, Any, Any]:
    """Another worker's service on the same ledger file, and this worker's one-round
    model and agent (the middleware on `service`)."""
    other = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    model = StepsChat(messages=iter([]), rounds=1)
    agent = create_agent(
        model=model, tools=[read_file],
        middleware=[CtxLedgerMiddleware(service, context_length=16_000)],
    )  # fmt: skip
    return other, model, agent


@pytest.mark.parametrize("at", [1, 3])  # the ask's append (a model call), the answer's (the end)
def test_a_write_between_the_check_and_the_append_is_read_not_sent(
    service, tmp_path, monkeypatch, at
):
    """Another worker appends to the session after this one checked it and before this
    one appends (the same instant): the append at the version read is refused, the
    other's message is read, and this worker's model is never sent it, nor is this
    worker's answer recorded after it."""
    other, model, agent = _second_worker(service, tmp_path)
    original = service.append
    countdown: list[int] = []

    async def append_after_the_other(sid: str, messages: Any, **kw: Any) -> Any:
        if countdown and countdown[0] == 1:
            countdown.clear()
            other.ledger.refresh()
            foreign = {"role": "user", "content": "the other worker's ask", "lc_id": "foreign"}
            await other.append(other.tip(sid), [foreign])
        elif countdown:
            countdown[0] -= 1
        return await original(sid, messages, **kw)

    monkeypatch.setattr(service, "append", append_after_the_other)

    async def go() -> list[Any]:
        first = (await agent.ainvoke({"messages": [HumanMessage("a.py")]}))["messages"]
        countdown.append(at)
        out = await agent.ainvoke({"messages": [*first, HumanMessage("b.py")]})
        return out["messages"]

    state = anyio.run(go)
    assert not countdown  # the other worker's write happened (review s34 #9)
    assert state[-1].content == "read b.py"
    for sent in model.inputs[-2:]:
        assert "the other worker's ask" not in [m.content for m in sent]
        assert [m.id for m in sent] == [m.id for m in state[: len(sent)]]
    service.ledger.refresh()
    holding = 0
    for sid in service.ledger.transcript.state.sessions:
        said = [m.get("content") for m in live_messages(service, service.tip(sid))]
        if "the other worker's ask" in said:
            holding += 1
            assert said[-1] == "the other worker's ask"  # nothing of this worker after it
    assert holding  # ... and a session holds it
    assert service.ledger.verify().ok
    other.ledger.close()


def test_a_generation_another_worker_started_first_is_read_not_a_failed_call(
    service, tmp_path, monkeypatch
):
    """A call starts its thread's session (here a new run's: its history does not extend
    the first run's); another worker started that very session id a moment before (one
    thread on two workers; the store refuses the second start): the call reads it and
    goes on, instead of failing with ConcurrencyError."""
    other, model, agent = _second_worker(service, tmp_path)
    original = service.start_session
    armed: list[bool] = []

    async def started_by_the_other_first(**kw: Any) -> Any:
        if armed and armed.pop():
            other.ledger.refresh()
            await other.start_session(**kw)
        return await original(**kw)

    monkeypatch.setattr(service, "start_session", started_by_the_other_first)

    async def go() -> list[Any]:
        first = (await agent.ainvoke({"messages": [HumanMessage("a.py")]}))["messages"]
        armed.append(True)  # a regenerated turn: a run of its own
        out = await agent.ainvoke({"messages": [first[0], HumanMessage("b.py")]})
        return out["messages"]

    state = anyio.run(go)
    assert not armed  # the other worker's start happened (review s34 #9)
    assert state[-1].content == "read b.py"
    assert [m.id for m in model.inputs[-1]] == [m.id for m in state[:-1]]
    service.ledger.refresh()
    assert service.ledger.verify().ok
    other.ledger.close()


def test_three_workers_starting_one_generation_end_no_live_session(service, tmp_path, monkeypatch):
    """Three workers on one ledger continue one stateless conversation at once: A appends
    its ask to the first session; B and C both find that divergence and start the next
    generation, B a moment first (the store refuses C's start). C reads B's generation
    and goes on there: A's session is not ended as a history C rewrote, and no third
    generation is started (before: A's session ended, B's left empty, C in a third)."""
    path = tmp_path / "lc.ledger.db"
    worker_a, worker_b = (
        ContextService(Ledger.open(path, config=CONFIG), config=CONFIG) for _ in range(2)
    )
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    model = StepsChat(messages=iter([]), rounds=1)
    agent = create_agent(model=model, tools=[read_file], middleware=[middleware])
    first = agent.invoke({"messages": [HumanMessage("a.py")]})["messages"]
    (root,) = service.ledger.transcript.state.sessions
    appended, start = middleware._appended, service.start_session
    armed = {"append", "start"}

    async def a_appends_first(thread: str, request: Any, messages: list[Any]) -> Any:
        if "append" in armed:
            armed.discard("append")
            worker_a.ledger.refresh()
            ask = {"role": "user", "content": "A's ask", "lc_id": "a-ask"}
            await worker_a.append(worker_a.tip(root), [ask])
        return await appended(thread, request, messages)

    async def b_starts_first(**kw: Any) -> Any:
        if "start" in armed:
            armed.discard("start")
            worker_b.ledger.refresh()
            await worker_b.start_session(**kw)
        return await start(**kw)

    monkeypatch.setattr(middleware, "_appended", a_appends_first)
    monkeypatch.setattr(service, "start_session", b_starts_first)
    out = anyio.run(lambda: agent.ainvoke({"messages": [*first, HumanMessage("b.py")]}))
    assert out["messages"][-1].content == "read b.py"
    service.ledger.refresh()
    sessions = service.ledger.transcript.state.sessions
    assert sorted(sessions) == [root, f"{root}~2"]
    assert not any(service.ledger.transcript.session(s).ended for s in sessions)
    assert _asks(service, root) == ["a.py", "A's ask"]
    assert _asks(service, f"{root}~2") == ["a.py", "b.py"]
    assert [m.id for m in model.inputs[-1]] == [m.id for m in out["messages"][:-1]]
    assert service.ledger.verify().ok
    worker_a.ledger.close()
    worker_b.ledger.close()


def test_a_write_before_the_run_ends_is_not_a_history_this_worker_rewrote(
    service, tmp_path, monkeypatch
):
    """Thread "t" (the caller sends its messages): worker A appends its ask to the
    thread's session after this worker's last model call of a run and before that run's
    end. The end re-reads the session; the next run goes on from this worker's history,
    which A's ask diverged from. What this worker had seen is kept over that re-read and
    the next call's re-read (it was cleared at each re-read: A's session was ended as
    a history rewritten, with A's ask in it)."""
    worker_a = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    middleware = CtxLedgerMiddleware(service, context_length=16_000)
    model = StepsChat(messages=iter([]), rounds=1)
    agent = create_agent(model=model, tools=[read_file], middleware=[middleware])
    config: Any = {"configurable": {"thread_id": "t"}}
    first = agent.invoke({"messages": [HumanMessage("a.py")]}, config)["messages"]
    (root,) = service.ledger.transcript.state.sessions
    finish, armed = middleware._finish, [True]

    async def a_appends_before_the_end(thread: str, state: Any) -> Any:
        if armed and armed.pop():
            worker_a.ledger.refresh()
            ask = {"role": "user", "content": "A's ask", "lc_id": "a-ask"}
            await worker_a.append(worker_a.tip(root), [ask])
        return await finish(thread, state)

    monkeypatch.setattr(middleware, "_finish", a_appends_before_the_end)
    second = anyio.run(lambda: agent.ainvoke({"messages": [*first, HumanMessage("b.py")]}, config))[
        "messages"
    ]
    third = anyio.run(lambda: agent.ainvoke({"messages": [*second, HumanMessage("c.py")]}, config))[
        "messages"
    ]
    assert third[-1].content == "read c.py"
    assert [m.id for m in model.inputs[-1]] == [m.id for m in third[:-1]]
    service.ledger.refresh()
    assert not service.ledger.transcript.session(service.tip(root)).ended
    assert _asks(service, root) == ["a.py", "b.py", "A's ask"]
    assert service.ledger.verify().ok
    worker_a.ledger.close()
