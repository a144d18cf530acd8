"""Generations of one LangChain conversation (``langchain:t``, ``~2``, ...): which one a
request goes on in, which ones end, and what finding it reads. Real create_agent,
scripted models, offline; a "worker" is its own middleware on the ledger file (one
process of a server, or one process per turn)."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers.frameworks import require
from hypothesis import given
from hypothesis import strategies as st

require("langchain.agents", "langchain")
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from test_integration_langchain_runs import CONFIG, StepsChat, read_file

from ctxledger import ContextService, Ledger
from ctxledger.integrations import langchain as lc
from ctxledger.integrations.common import live_messages
from ctxledger.integrations.langchain import CtxLedgerMiddleware
from ctxledger.integrations.langchain_keys import recorded_ids, rewrites


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _asks(svc: ContextService, sid: str) -> list[str]:
    return [m["content"] for m in live_messages(svc, sid) if m["role"] == "user"]


def _states(svc: ContextService) -> dict[str, str]:
    svc.ledger.refresh()
    sessions = svc.ledger.transcript.state.sessions
    return {s: (v.end_reason or "ended") if v.ended else "live" for s, v in sessions.items()}


def _agent(svc: ContextService, model: StepsChat, saver: Any = None) -> Any:
    """A worker (a process): its own middleware on `svc`."""
    middleware = CtxLedgerMiddleware(svc, context_length=16_000)
    return create_agent(model=model, tools=[read_file], middleware=[middleware], checkpointer=saver)


@pytest.mark.parametrize("thread", [None, "t"])  # a run without a thread id; a thread's
@pytest.mark.parametrize("workers", [1, 2])
def test_a_resend_continuing_a_branch_that_is_not_the_latest_goes_on_there(
    service, tmp_path, workers, thread
):
    """Two workers ran one conversation at once: one went on in the run's session, the
    other in its ``~2``. A resend of the first branch plus a new ask (a retry, another
    worker, a restart) was not found (the look-up took the latest generation only): a
    session of its own, its history copied. It goes on in the branch's session; two
    workers given it at once that both look it up before either appends (as here)
    append at the version read: one goes on there, the other starts the next
    generation, and no session is ended. (A run without a thread id looked up after
    the other's append is not found by its last id any more: a run of its own, its
    history copied, as before.) A thread id the caller sends
    with its messages: the worker that first read the thread after the other's append
    ended the other's session as a history it rewrote, and the resend ended ``~2``."""
    other = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    w1, w2 = (_agent(svc, StepsChat(messages=iter([]), rounds=1)) for svc in (service, other))
    config: Any = {"configurable": {"thread_id": thread}} if thread else {}
    first = w1.invoke({"messages": [HumanMessage("a.py")]}, config)["messages"]

    async def at_once(agents: list[Any], history: list[Any], ask: str) -> list[Any]:
        results: list[Any] = [None] * len(agents)

        async def run(i: int) -> None:  # each worker decodes its own request
            state = {"messages": [*history, HumanMessage(ask)]}
            results[i] = (await agents[i].ainvoke(state, config))["messages"]

        async with anyio.create_task_group() as tg:
            for i in range(len(agents)):
                tg.start_soon(run, i)
        return results

    branches = anyio.run(at_once, [w1, w2], first, "b.py")
    service.ledger.refresh()
    root = service.ledger.chains.root(next(iter(service.ledger.transcript.state.sessions)))
    base = root.split("~")[0]
    held = [str(m["lc_id"]) for m in live_messages(service, base)]
    (branch,) = [b for b in branches if [str(m.id) for m in b] == held]  # not the latest: ~2 is
    models = [StepsChat(messages=iter([]), rounds=1) for _ in range(workers)]
    agents = [_agent(svc, m) for svc, m in zip((service, other), models, strict=False)]
    states = anyio.run(at_once, agents, branch, "c.py")
    for model, state in zip(models, states, strict=True):
        assert state[-1].content == "read c.py"
        for sent in model.inputs:  # each call was sent its own run's history
            assert [m.id for m in sent] == [m.id for m in state[: len(sent)]]
    service.ledger.refresh()
    sessions = service.ledger.transcript.state.sessions
    roots = {service.ledger.chains.root(s) for s in sessions}
    assert roots == {base, *(f"{base}~{n}" for n in range(2, workers + 2))}
    assert not any(service.ledger.transcript.session(service.tip(r)).ended for r in roots)
    assert _asks(service, base) == ["a.py", "b.py", "c.py"]  # no history copied for one
    assert service.ledger.verify().ok
    other.ledger.close()


@pytest.mark.parametrize("rewrite", ["remove-the-first", "summary-and-tail"])
def test_a_rewrite_after_a_restart_ends_the_generation_it_replaces(tmp_path, rewrite):
    """A thread first read from the ledger (a restart, a worker per request) left what
    its history diverged from open, as another worker's branch may be: also a rewrite
    (``update_state`` with a ``RemoveMessage``), so every such rewrite left one more
    "live" generation. A rewrite keeps a message it had after the one it dropped or
    replaced, which a branch never does: the replaced generation is ended."""
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "t"}}

    def worker() -> tuple[ContextService, Any]:
        svc = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
        return svc, _agent(svc, StepsChat(messages=iter([]), rounds=1), saver)

    svc, agent = worker()
    for ask in ("a.py", "b.py"):
        agent.invoke({"messages": [HumanMessage(ask)]}, config)
    svc.ledger.close()
    svc, agent = worker()  # restarted
    held = agent.get_state(config).values["messages"]
    update: list[Any] = [RemoveMessage(id=str(held[0].id))]
    if rewrite == "summary-and-tail":
        update = [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("summary"), *held[4:]]
    agent.update_state(config, {"messages": update})
    agent.invoke({"messages": [HumanMessage("c.py")]}, config)
    assert _states(svc) == {"langchain:t": "history rewritten", "langchain:t~2": "live"}
    kept = ["b.py", "c.py"] if rewrite == "remove-the-first" else ["summary", "b.py", "c.py"]
    assert _asks(svc, "langchain:t~2") == kept
    assert svc.ledger.verify().ok
    svc.ledger.close()


def test_regenerates_in_a_worker_per_turn_stay_open_and_finding_the_one_continued_is_cheap(
    tmp_path, monkeypatch
):
    """One process per turn: the second answer regenerated three times, then the first
    version taken up again. A regenerate only adds after what the generations share, as a
    second worker's branch does: each stays open (the README says so). The conversation
    goes on in generation 1, found by its messages; finding it read every generation's
    chain at every later turn (4 here, growing with generations and history): now the
    latest (where the thread is looked up first) and the one continued."""
    reads: list[str] = []
    monkeypatch.setattr(
        lc, "recorded_ids", lambda svc, root: reads.append(root) or recorded_ids(svc, root)
    )

    def turn(messages: list[Any]) -> list[Any]:
        svc = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
        agent = _agent(svc, StepsChat(messages=iter([]), rounds=1))
        state = agent.invoke({"messages": messages}, {"configurable": {"thread_id": "t"}})
        svc.ledger.close()
        return list(state["messages"])

    first = turn([HumanMessage("a.py")])
    state = turn([*first, HumanMessage("b.py")])
    for ask in ("b2.py", "b3.py", "b4.py"):
        turn([*first, HumanMessage(ask)])
    for ask in ("c.py", "d.py", "e.py"):
        reads.clear()
        state = turn([*state, HumanMessage(ask)])
        assert reads == ["langchain:t~4", "langchain:t"]
    svc = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    assert _states(svc) == {f"langchain:t{g}": "live" for g in ("", "~2", "~3", "~4")}
    assert _asks(svc, "langchain:t") == ["a.py", "b.py", "c.py", "d.py", "e.py"]
    assert _asks(svc, "langchain:t~3") == ["a.py", "b3.py"]
    assert svc.ledger.verify().ok
    svc.ledger.close()


@pytest.mark.parametrize("resent_to", ["a-new-worker", "the-worker-of-the-latest"])
def test_a_trimmed_resend_of_the_older_of_two_open_generations_ends_that_one_only(
    tmp_path, resent_to
):
    """Two open generations (a regenerate in a worker of its own; two workers at once leave
    the same). The older one resent with its oldest message trimmed (a client's window)
    rewrites it, but was judged against the latest generation, which shares the trimmed
    history's first answer: the latest (another worker's branch) was ended, the one
    rewritten left open. Only generations whose last recorded message the history holds
    are judged (it comes from them); the one it rewrites ends, the other stays open."""
    workers: list[tuple[ContextService, Any]] = []

    def turn(messages: list[Any], fresh: bool = True) -> list[Any]:
        if fresh:
            svc = ContextService(
                Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG
            )
            workers.append((svc, _agent(svc, StepsChat(messages=iter([]), rounds=1))))
        state = workers[-1][1].invoke({"messages": messages}, {"configurable": {"thread_id": "t"}})
        return list(state["messages"])

    first = turn([HumanMessage("a.py")])
    state = turn([*first, HumanMessage("b.py")], fresh=False)
    turn([*first, HumanMessage("b2.py")])  # a worker of its own: langchain:t~2
    svc = workers[0][0]
    assert _states(svc) == {"langchain:t": "live", "langchain:t~2": "live"}
    turn([*state[1:], HumanMessage("d.py")], fresh=resent_to == "a-new-worker")
    assert _states(svc) == {
        "langchain:t": "history rewritten",
        "langchain:t~2": "live",
        "langchain:t~3": "live",
    }
    assert _asks(svc, "langchain:t~2") == ["a.py", "b2.py"]
    assert _asks(svc, "langchain:t~3") == ["b.py", "d.py"]
    assert svc.ledger.verify().ok
    for worker, _ in workers:
        worker.ledger.close()


def test_a_session_another_worker_ends_before_the_append_goes_on_in_the_next_generation(
    service, tmp_path, monkeypatch
):
    """Another worker ended the thread's session between this worker's check and its
    append (as it ends a history it rewrote): the ``SessionEndedError`` failed the user's
    run. It is read again as a refused append is: the next generation is started from
    the state and the run goes on."""
    other = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    model = StepsChat(messages=iter([]), rounds=1)
    agent, config = _agent(service, model), {"configurable": {"thread_id": "t"}}
    first = agent.invoke({"messages": [HumanMessage("a.py")]}, config)["messages"]
    append = service.append

    async def ended_first(sid: str, *args: Any, **kwargs: Any) -> Any:
        if sid == "langchain:t":  # the other worker's end comes first
            other.ledger.refresh()
            if not other.ledger.transcript.session(sid).ended:
                await other.end_session(sid, "history rewritten")
        return await append(sid, *args, **kwargs)

    monkeypatch.setattr(service, "append", ended_first)
    state = agent.invoke({"messages": [*first, HumanMessage("b.py")]}, config)["messages"]
    assert state[-1].content == "read b.py"
    for sent in model.inputs[2:]:  # the calls of the run were sent its history
        assert [m.id for m in sent] == [m.id for m in state[: len(sent)]]
    assert _states(service) == {"langchain:t": "history rewritten", "langchain:t~2": "live"}
    assert _asks(service, "langchain:t~2") == ["a.py", "b.py"]
    assert service.ledger.verify().ok
    other.ledger.close()


_IDS = st.lists(st.integers(0, 10**6).map(str), unique=True, min_size=2, max_size=12)


@given(pool=_IDS, data=st.data())
def test_a_branch_adds_after_what_it_shares_a_rewrite_drops_before_what_it_keeps(pool, data):
    """:func:`rewrites`: a history sharing a prefix with a recorded one and adding only
    new ids after it is no rewrite (a branch, a regenerate, a resend cut short); one
    that dropped any recorded message but the last, with or without new ones after,
    is."""
    cut = data.draw(st.integers(1, len(pool) - 1))
    seen, new = pool[:cut], pool[cut:]
    shared = data.draw(st.integers(0, len(seen)))
    added = data.draw(st.integers(0, len(new)))
    assert not rewrites(seen[:shared] + new[:added], seen)
    if len(seen) >= 2:
        dropped = data.draw(st.integers(0, len(seen) - 2))
        assert rewrites(seen[:dropped] + seen[dropped + 1 :] + new[:added], seen)
