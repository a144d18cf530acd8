"""CtxLedgerMiddleware's ledger session ids for LangChain thread ids (split from
test_integration_langchain.py, session 33): separators and escapes, long ids made into a
start and a digest, ids recorded whole or with controls before, and a thread named like
another thread's key."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

from typing import Any

import anyio
import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
from helpers.langchain_fakes import ScriptedChat, read_file, script
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxledger import CompressionConfig, ContextService, InvalidInput, Ledger
from ctxledger.integrations.common import live_messages
from ctxledger.integrations.langchain import CtxLedgerMiddleware

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "lc.ledger.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _agent(service: ContextService, replies: int, saver: InMemorySaver) -> Any:
    model = ScriptedChat(messages=iter(script(replies)))
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
    model = ScriptedChat(messages=iter(script(2)))
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
    from ctxledger.idkeys import digest_key

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
