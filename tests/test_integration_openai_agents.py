"""CtxLedgerSession against the real OpenAI Agents SDK: Runner.run with a scripted model
and a function tool, over enough turns to compact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from helpers.frameworks import require

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
require("agents", "agents")
from agents import Agent, Runner, function_tool  # noqa: E402
from agents.memory import Session  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from agents.usage import Usage  # noqa: E402

from ctxledger import CompressionConfig, ContextService, InvalidInput, Ledger  # noqa: E402
from ctxledger.analysis.agent_tools import handle_tool_call  # noqa: E402
from ctxledger.events import MessageAppended, ToolCallIdsRepaired, UsageReported  # noqa: E402
from ctxledger.integrations.common import live_messages, system_view  # noqa: E402
from ctxledger.integrations.openai_agents import CtxLedgerSession, request_usage  # noqa: E402
from ctxledger.integrations.responses import messages_to_items  # noqa: E402

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
TURNS = 12
CLI = str(Path(sys.executable).with_name("ctxledger"))


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}: " + "lorem ipsum dolor " * 150


def _usage(call) -> Usage:
    # the input the model was really sent, at ~4 chars a token, as a provider reports it
    tokens = len(json.dumps(call.input, default=str)) // 4
    return Usage(requests=1, input_tokens=tokens, output_tokens=12, total_tokens=tokens + 12)


def _script(turns: int) -> ScriptedModel:
    steps = []
    for t in range(turns):
        steps.append(
            ModelStep.respond(
                lambda call, t=t: ModelStep(
                    output=[
                        function_call("read_file", {"path": f"src/mod{t}.py"}, call_id=f"call_{t}")
                    ],
                    usage=_usage(call),
                )
            )
        )
        steps.append(
            ModelStep.respond(
                lambda call, t=t: ModelStep(
                    output=[assistant_message(f"mod{t} reviewed", item_id=f"msg_{t}")],
                    usage=_usage(call),
                )
            )
        )
    return ScriptedModel(steps)


class SpySession(CtxLedgerSession):
    """Records how the Runner calls the compaction hook."""

    calls: list[tuple[dict, bool]]

    async def run_compaction(self, args=None, *, wrapper=None) -> None:
        self.calls.append((dict(args or {}), wrapper is not None))
        await super().run_compaction(args, wrapper=wrapper)


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "agents.ledger.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _chain_events(svc: ContextService, root: str, kind):
    chain = svc.ledger.chains.chain(svc.tip(root))
    return [
        r.event
        for r in svc.ledger.store.read_all()
        if isinstance(r.event, kind) and r.event.session_id in chain
    ]


def test_it_is_a_session_the_runner_hands_its_wrapper_to(service):
    session = CtxLedgerSession("chat", service)
    assert isinstance(session, Session)
    from agents.memory.session import (
        _session_accepts_wrapper,
        is_openai_responses_compaction_aware_session,
    )

    assert _session_accepts_wrapper(session)
    assert is_openai_responses_compaction_aware_session(session)


def test_many_turns_compact_and_the_model_is_sent_the_ledger_view(service, tmp_path):
    model = _script(TURNS)
    session = SpySession("chat", service, model="scripted", context_length=16_000)
    session.calls = []
    agent = Agent(name="reviewer", instructions="Review files.", model=model, tools=[read_file])

    async def run_all() -> None:
        for t in range(TURNS):
            history = await session.get_items()  # what the next run must be sent
            first_call = len(model.calls)
            result = await Runner.run(
                agent, f"turn {t}: review src/mod{t}.py " + "now " * 120, session=session
            )
            assert result.final_output == f"mod{t} reviewed"
            sent = model.calls[first_call].input
            assert sent[: len(history)] == history
            assert sent[len(history)]["content"].startswith(f"turn {t}:")

    anyio.run(run_all)
    model.assert_complete()
    # the Runner treats the session as compaction-aware: it calls run_compaction after its
    # settled writes, with the response id and its wrapper
    assert session.calls and all(a.get("response_id") and w for a, w in session.calls)
    tip = session.ledger_session_id()
    assert tip != "chat"  # compacted at least once: the chain moved on
    assert service.ledger.chains.compression_count(tip) >= 1
    # every item ever added is in the log: 2 per model call + the user ask, per turn
    appended = _chain_events(service, "chat", MessageAppended)
    assert len(appended) == TURNS * 4
    # every model request's usage was reported, from the Runner's wrapper
    usage = _chain_events(service, "chat", UsageReported)
    assert len(usage) == len(model.calls) == TURNS * 2
    # the view is smaller than what was appended, and it is what get_items returns
    live = live_messages(service, tip)
    assert len(live) < TURNS * 4
    db = str(tmp_path / "agents.ledger.db")
    for args in (["replay", "chat", "--verify"], ["verify"], ["audit", "chat"]):
        proc = subprocess.run([CLI, "--db", db, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pop_item_and_clear_session_keep_the_log(service):
    session = CtxLedgerSession("chat", service)
    items = [
        {"role": "user", "content": "hi"},
        {
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "hello", "annotations": []}],
        },
        {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"},
    ]

    async def scenario() -> None:
        await session.add_items(items)
        assert await session.get_items() == items
        assert await session.get_items(limit=1) == items[-1:]
        assert await session.pop_item() == items[-1]
        assert await session.get_items() == items[:-1]
        assert session.ledger_session_id() == "chat~2"
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        await session.add_items([{"role": "user", "content": "again"}])
        assert await session.get_items() == [{"role": "user", "content": "again"}]
        reopened = CtxLedgerSession("chat", service)
        assert await reopened.get_items() == [{"role": "user", "content": "again"}]

    anyio.run(scenario)
    sessions = service.ledger.transcript
    assert sessions.session("chat").end_reason == "pop_item"
    assert sessions.session("chat~2").reason == "branch"
    assert sessions.session("chat~2").end_reason == "cleared"
    assert not sessions.session("chat~3").ended


def test_bad_input_is_refused_and_nothing_is_appended(service):
    session = CtxLedgerSession("chat", service)

    async def scenario() -> None:
        await session.add_items([{"role": "user", "content": "hi"}])
        before = service.ledger.refresh()
        with pytest.raises(InvalidInput):
            await session.add_items([{"type": "function_call_output", "output": "x"}])
        with pytest.raises(Exception, match="no earlier assistant message issued"):
            await session.add_items(
                [{"type": "function_call_output", "call_id": "nope", "output": "x"}]
            )
        with pytest.raises(InvalidInput):
            await session.get_items(limit=-1)
        assert service.ledger.refresh() == before
        assert messages_to_items(live_messages(service, "chat")) == [
            {"role": "user", "content": "hi"}
        ]

    anyio.run(scenario)
    with pytest.raises(InvalidInput):
        CtxLedgerSession("a~b", service)


def test_a_model_that_re_uses_call_ids_is_repaired_not_refused(service):
    """The one validation policy: a local model numbering its calls per turn (call_0 every
    turn) gets renamed calls in the ledger, recorded as ToolCallIdsRepaired, and the next
    turn's history pairs each call with its own output."""
    steps = []
    for t in range(3):
        steps.append(
            ModelStep(
                output=[function_call("read_file", {"path": f"src/m{t}.py"}, call_id="call_0")]
            )
        )
        steps.append(ModelStep(output=[assistant_message(f"m{t} read", item_id=f"msg_{t}")]))
    model = ScriptedModel(steps)
    session = CtxLedgerSession("reuse", service, model="scripted")
    agent = Agent(name="reader", instructions="Read files.", model=model, tools=[read_file])

    async def run_all() -> list:
        for t in range(3):
            result = await Runner.run(agent, f"read src/m{t}.py", session=session)
            assert result.final_output == f"m{t} read"
        return await session.get_items()

    items = anyio.run(run_all)
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert calls[0] == "call_0" and len(set(calls)) == 3 and outputs == calls
    repaired = _chain_events(service, "reuse", ToolCallIdsRepaired)
    assert len(repaired) == 2  # turns 2 and 3, each in its own append
    assert {e.original for r in repaired for e in r.repairs} == {"call_0"}


@pytest.mark.parametrize(
    "items",
    [
        [{"type": "function_call_output", "call_id": "nope", "output": "x"}],
        [{"role": "user", "content": "hi"}, {"type": "function_call_output", "output": "x"}],
        [{"role": "user", "content": "\ud800 a lone surrogate"}],
    ],
    ids=["orphan-output", "output-without-call-id", "not-encodable"],
)
def test_a_failed_first_add_items_creates_no_session(service, items):
    """Validation comes before the ledger session is started: a refused first batch (or
    the first batch after clear_session) leaves no empty session behind."""
    session = CtxLedgerSession("fresh", service)

    async def scenario() -> None:
        before = service.ledger.refresh()
        with pytest.raises(InvalidInput):
            await session.add_items(items)
        assert service.ledger.refresh() == before
        assert "fresh" not in service.ledger.transcript.state.sessions
        assert await session.get_items() == []
        await session.add_items([{"role": "user", "content": "hi"}])
        await session.clear_session()
        before = service.ledger.refresh()
        with pytest.raises(InvalidInput):
            await session.add_items(items)
        assert service.ledger.refresh() == before
        assert "fresh~2" not in service.ledger.transcript.state.sessions
        await session.add_items([{"role": "user", "content": "again"}])
        assert await session.get_items() == [{"role": "user", "content": "again"}]
        assert "fresh~2" in service.ledger.transcript.state.sessions

    anyio.run(scenario)


def test_an_empty_first_add_items_starts_no_session(service):
    """``add_items([])`` with no usage to report records nothing, so no empty session."""
    session = CtxLedgerSession("quiet", service)

    async def scenario() -> None:
        before = service.ledger.refresh()
        await session.add_items([])
        assert service.ledger.refresh() == before
        assert "quiet" not in service.ledger.transcript.state.sessions
        assert session.ledger_session_id() is None
        await session.add_items([{"role": "user", "content": "hi"}])
        await session.add_items([])  # a session exists now: still fine
        assert await session.get_items() == [{"role": "user", "content": "hi"}]

    anyio.run(scenario)


def test_odd_usage_figures_keep_the_run_and_record_no_usage(service, caplog):
    """A request's usage with a negative count raised InvalidInput out of add_items after
    the model had answered (the run failed). It is dropped (logged), the items kept."""
    model = ScriptedModel(
        [
            ModelStep(
                output=[assistant_message("the answer", item_id="msg_1")],
                usage=Usage(requests=1, input_tokens=-5, output_tokens=3, total_tokens=-2),
            )
        ]
    )
    session = CtxLedgerSession("odd", service)
    agent = Agent(name="a", instructions="Answer.", model=model)
    with caplog.at_level("WARNING", logger="ctxledger.integrations"):
        result = anyio.run(lambda: Runner.run(agent, "q", session=session))
    assert result.final_output == "the answer"
    assert "not recorded" in caplog.text and "must not be negative" in caplog.text
    assert [e.message["role"] for e in _chain_events(service, "odd", MessageAppended)] == [
        "user",
        "assistant",
    ]
    assert not _chain_events(service, "odd", UsageReported)


@pytest.mark.parametrize("figure", ["12", True, 2.5], ids=["digits", "bool", "fraction"])
def test_a_figure_that_is_no_count_is_refused_not_made_a_number(figure):
    """``int(figure or 0)`` took "12" as 12 and True as 1 (and cut 2.5 to 2), silently;
    the figure is judged as the ledger judges one, so the report is dropped (logged)."""
    entry = Usage(requests=1, input_tokens=5, output_tokens=3, total_tokens=8)
    entry.input_tokens = figure
    with pytest.raises(InvalidInput, match="usage field 'input_tokens'"):
        request_usage(entry)


def test_each_request_says_whether_it_asked_for_tools(service):
    """The in-loop check runs after a response that asked for tools only (Hermes's loop):
    a run's request followed by another asked (a tool call), its final answer did not.
    Both were reported unsaid (checked after every response) before."""
    session = CtxLedgerSession("asks", service)
    agent = Agent(name="reader", instructions="Read files.", model=_script(2), tools=[read_file])

    async def scenario() -> None:
        for turn in range(2):
            await Runner.run(agent, f"review module {turn}", session=session)

    anyio.run(scenario)
    asked = [e.asked_for_tools for e in _chain_events(service, "asks", UsageReported)]
    assert asked == [True, False, True, False]


def test_an_id_the_http_api_cannot_name_gets_a_key_it_can(service):
    # session 31: the SDK id was the ledger's id as given: one past 200 characters, or
    # with a slash or blanks around it, could not be named by the HTTP API's routes
    from ctxledger.integrations.openai_agents import ledger_key
    from ctxledger.server.routing import SESSION_ID

    long_id, odd_id = "u" * 10_000, " Bob Smith/chat #1"
    for sdk_id in (long_id, odd_id, "é" * 300, "x.h" + "0" * 32):
        key = ledger_key(sdk_id)  # (and a generation's ~N after it)
        assert SESSION_ID.fullmatch(key) and len(key) <= 160, key
    assert ledger_key(long_id) != ledger_key("u" * 10_001)
    assert ledger_key(odd_id).startswith("s-Bob-Smith-chat--1.h")
    assert ledger_key("chat") == "chat"
    assert ledger_key("x.h" + "0" * 32) != "x.h" + "0" * 32  # could be another id's key
    assert SESSION_ID.fullmatch(ledger_key(""))

    async def scenario() -> None:
        session = CtxLedgerSession(long_id, service)
        await session.add_items([{"role": "user", "content": "hi"}])
        await session.clear_session()
        await session.add_items([{"role": "user", "content": "again"}])
        assert session.ledger_session_id() == ledger_key(long_id) + "~2"
        reopened = CtxLedgerSession(long_id, service)
        assert await reopened.get_items() == [{"role": "user", "content": "again"}]

    anyio.run(scenario)
    assert long_id not in service.ledger.transcript.state.sessions


def test_an_id_shaped_like_another_ids_key_never_gets_that_ids_session(service):
    # review of session 31: an SDK id equal to the key made for another id continued the
    # session recorded under that key ("recorded under the whole id goes on")
    from ctxledger.integrations.openai_agents import ledger_key

    other = "u" * 300
    key_shaped = ledger_key(other)

    async def scenario() -> None:
        mine = CtxLedgerSession(key_shaped, service)
        await mine.add_items([{"role": "user", "content": "mine"}])
        theirs = CtxLedgerSession(other, service)
        await theirs.add_items([{"role": "user", "content": "theirs"}])
        assert theirs.ledger_session_id() == key_shaped
        reopened = CtxLedgerSession(key_shaped, service)
        assert await reopened.get_items() == [{"role": "user", "content": "mine"}]
        assert reopened.ledger_session_id() == ledger_key(key_shaped)

    anyio.run(scenario)


def test_a_key_shaped_session_recorded_under_its_whole_id_is_continued(service):
    # before keys were made, the SDK id was the ledger's id (titled with it)
    key_shaped = "x.h" + "0" * 32
    anyio.run(
        lambda: service.start_session(
            model="agent", session_id=key_shaped, title=f"openai-agents session {key_shaped}"
        )
    )
    anyio.run(lambda: service.append(key_shaped, [{"role": "user", "content": "before"}]))

    async def scenario() -> None:
        session = CtxLedgerSession(key_shaped, service)
        assert await session.get_items() == [{"role": "user", "content": "before"}]
        assert session.ledger_session_id() == key_shaped

    anyio.run(scenario)


def test_a_session_recorded_under_a_whole_long_id_is_continued(service):
    long_id = "v" * 300
    anyio.run(lambda: service.start_session(model="agent", session_id=long_id))
    anyio.run(lambda: service.append(long_id, [{"role": "user", "content": "before"}]))

    async def scenario() -> None:
        session = CtxLedgerSession(long_id, service)
        assert await session.get_items() == [{"role": "user", "content": "before"}]
        await session.add_items([{"role": "user", "content": "after"}])
        assert session.ledger_session_id() == long_id

    anyio.run(scenario)


@pytest.mark.parametrize("sdk_id", ["chat\nline \u202eevil", "c" * 5000])
def test_pop_item_of_an_id_no_title_may_hold_still_branches(service, sdk_id):
    """Session 33: a title may hold no control character and at most 4,096 characters;
    the adapter's titles name such an SDK id by its key instead (pop_item's too)."""
    session = CtxLedgerSession(sdk_id, service)

    async def scenario() -> None:
        await session.add_items(
            [{"role": "user", "content": "hi"}, {"role": "user", "content": "x"}]
        )
        assert await session.pop_item() == {"role": "user", "content": "x"}
        assert await session.get_items() == [{"role": "user", "content": "hi"}]

    anyio.run(scenario)
    titles = [i.title for i in service.ledger.chains.state.sessions.values()]
    assert len(titles) == 2 and all(t and t.startswith("openai-agents session ") for t in titles)
    assert titles[1].endswith(" (after pop_item)")


def _as_recorded_before(service, monkeypatch, **start) -> None:
    """A chain written as the code before session 33's name checks did."""
    with monkeypatch.context() as patch:
        patch.setattr("ctxledger.ledger.spec.check_name", lambda value, *_: value)
        patch.setattr("ctxledger.ledger.facade.check_session_id", lambda value, *_: value)
        anyio.run(lambda: service.start_session(context_length=16_000, **start))
    items = [{"role": "user", "content": t} for t in ("a", "b", "c")]
    anyio.run(lambda: service.append(start["session_id"], items))


def test_pop_item_goes_on_with_a_chain_whose_recorded_model_is_refused_now(service, monkeypatch):
    """An old chain's recorded model (``gpt-4o`` and a newline) failed pop_item's branch,
    and the failure, after the generation was counted, emptied the session's view. The
    branch goes on with the model as recorded (a value the ledger holds, not new input);
    the agent's own model is still checked."""
    _as_recorded_before(service, monkeypatch, model="gpt-4o\n", session_id="conv-1")

    async def scenario() -> None:
        session = CtxLedgerSession("conv-1", service, model="gpt-4o")
        assert await session.pop_item() == {"role": "user", "content": "c"}
        assert [i["content"] for i in await session.get_items()] == ["a", "b"]
        await session.add_items([{"role": "user", "content": "d"}])
        assert [i["content"] for i in await session.get_items()] == ["a", "b", "d"]
        assert service.ledger.transcript.session("conv-1~2").model == "gpt-4o\n"

    anyio.run(scenario)


def test_pop_item_branches_with_the_prompt_in_its_role(service):
    """The branch pop_item starts takes the chain's prompt in its role (session 38)."""

    async def scenario() -> None:
        await service.start_session(
            model="gpt-5",
            context_length=16_000,
            system_prompt="Be brief.",
            system_role="developer",
            session_id="conv-d",
        )
        await service.append("conv-d", [{"role": "user", "content": t} for t in ("a", "b")])
        session = CtxLedgerSession("conv-d", service)
        assert await session.pop_item() == {"role": "user", "content": "b"}
        assert session.ledger_session_id() == "conv-d~2"

    anyio.run(scenario)
    assert system_view(service, "conv-d~2") == {"role": "developer", "content": "Be brief."}


def test_a_whole_id_over_todays_limit_branches_and_starts_again(service, monkeypatch):
    """An SDK id recorded whole (before keys were made) past today's 1,024 characters of a
    chosen id: pop_item and the session after clear_session go on under it."""
    long_id = "w" * 2_000
    _as_recorded_before(service, monkeypatch, model="agent", session_id=long_id)

    async def scenario() -> None:
        session = CtxLedgerSession(long_id, service)
        assert await session.pop_item() == {"role": "user", "content": "c"}
        assert session.ledger_session_id() == f"{long_id}~2"
        await session.clear_session()
        await session.add_items([{"role": "user", "content": "new"}])
        assert session.ledger_session_id() == f"{long_id}~3"
        assert [i["content"] for i in await session.get_items()] == ["new"]

    anyio.run(scenario)


def test_a_refused_start_leaves_the_session_where_it_was(service):
    """A new generation the ledger refuses (the agent's model is no name it takes) is
    not counted: the session still shows its last chain."""

    async def scenario() -> None:
        session = CtxLedgerSession("conv-2", service, model="agent")
        await session.add_items([{"role": "user", "content": "a"}])
        await session.clear_session()
        session.model = "bad\nmodel"
        with pytest.raises(InvalidInput, match="model holds the control character"):
            await session.add_items([{"role": "user", "content": "b"}])
        assert session._generation == 1
        session.model = "agent"
        await session.add_items([{"role": "user", "content": "b"}])
        assert session.ledger_session_id() == "conv-2~2"

    anyio.run(scenario)


def test_a_limit_that_cuts_a_call_off_its_output_sends_no_orphan(service):
    """``SessionSettings(limit=N)``: ``get_items(limit)`` gives exactly the last N items,
    as the SDK's own sessions do (its pending-write reconciliation and tail rewinds
    compare that many), even when the cut leaves a ``function_call_output`` whose call
    is cut off; the Runner drops such an output from what it sends (SDK >= 0.24)."""
    from agents.memory import SessionSettings

    model = _script(2)
    session = CtxLedgerSession("chat", service, session_settings=SessionSettings(limit=2))
    agent = Agent(name="reviewer", instructions="Review files.", model=model, tools=[read_file])

    async def scenario() -> list:
        await Runner.run(agent, "turn 0", session=session)
        tail = await session.get_items(limit=2)
        assert [i.get("type") for i in tail] == ["function_call_output", "message"]
        await Runner.run(agent, "turn 1", session=session)
        return list(model.calls[2].input)

    sent = anyio.run(scenario)
    calls = {i.get("call_id") for i in sent if i.get("type") == "function_call"}
    outputs = [i for i in sent if i.get("type") == "function_call_output"]
    assert all(o["call_id"] in calls for o in outputs)
    assert sent[-1]["content"] == "turn 1" and sent[-2]["type"] == "message"


def test_pop_item_and_clear_session_on_a_compacted_session(service):
    """pop_item on a compacted chain: the branch holds the compacted view minus the item
    (the summary included), so the next run is sent what it was, less the popped item."""
    model = _script(TURNS)
    session = CtxLedgerSession("chat", service, model="scripted", context_length=16_000)
    agent = Agent(name="reviewer", instructions="Review files.", model=model, tools=[read_file])

    async def scenario() -> None:
        for t in range(TURNS):
            await Runner.run(agent, f"turn {t}: src/mod{t}.py " + "now " * 120, session=session)
        tip = session.ledger_session_id()
        assert service.ledger.chains.compression_count(tip) >= 1
        before = await session.get_items()
        popped = await session.pop_item()
        assert popped == before[-1]
        assert session.ledger_session_id() == "chat~2"
        assert await session.get_items() == before[:-1]
        assert service.ledger.transcript.session(tip).end_reason == "pop_item"
        assert system_view(service, "chat~2") == system_view(service, tip)  # the note kept
        reopened = CtxLedgerSession("chat", service)
        assert await reopened.get_items() == before[:-1]
        await reopened.clear_session()
        assert await session.get_items() == [] and await reopened.pop_item() is None

    anyio.run(scenario)


def test_recall_on_the_branch_pop_item_starts_after_a_compaction_leaves_the_item_out(service):
    """The popped item was in the compacted view's kept tail, below the summary's seq."""
    session = CtxLedgerSession("chat", service)

    async def scenario() -> str:
        for i in range(TURNS):
            await session.add_items(
                [
                    {"role": "user", "content": f"where is walrus{i}"},
                    {"role": "assistant", "content": f"walrus{i} is in crate{i}"},
                ]
            )
        await service.compress(session.ledger_session_id())
        assert (await session.pop_item())["content"] == f"walrus{TURNS - 1} is in crate{TURNS - 1}"
        return session.ledger_session_id()

    branch = anyio.run(scenario)
    recalled = handle_tool_call(service.ledger, branch, "recall", json.dumps({"query": "crate11"}))
    assert json.loads(recalled)["hits"] == []  # before: the parent's original
    kept = handle_tool_call(service.ledger, branch, "recall", json.dumps({"query": "crate10"}))
    assert json.loads(kept)["hits"]
