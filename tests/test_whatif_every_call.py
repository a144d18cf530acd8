"""The every-call loop (the LangChain middleware, the proxy) where a recorded batch is not
one plain request: a run that ends on a tool result, no model call following; one append
carrying a whole history (a proxy branch, a first request with a history). Recorded
through the real LangChain agent and the proxy (session 38, review 1)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from helpers.fake_upstream import Say
from helpers.frameworks import require
from helpers.server_rig import ask, rig

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
require("langchain.agents", "langchain")
from helpers.langchain_fakes import ScriptedChat  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.structured_output import ToolStrategy  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from ctxledger import CompressionConfig, ContextService, Ledger  # noqa: E402
from ctxledger.analysis.whatif import whatif  # noqa: E402
from ctxledger.integrations.langchain import CtxLedgerMiddleware  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Review(BaseModel):
    """The review."""

    verdict: str
    notes: str


def _body(path: str, words: int) -> str:
    return f"contents of {path}: " + "lorem ipsum dolor " * words


@tool
def read_120(path: str) -> str:
    """Read a file of the project."""
    return _body(path, 120)


@tool(return_direct=True)
def read_direct(path: str) -> str:
    """Read a file of the project; its contents are the answer."""
    return _body(path, 300)


def _call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


async def _record(tmp_path: Path, replies: list[AIMessage], **agent: Any) -> tuple[Ledger, str]:
    config = CompressionConfig(threshold_floor_tokens=0, context_length=6_000)
    service = ContextService(Ledger.open(tmp_path / "lc.db", config=config), config=config)
    middleware = CtxLedgerMiddleware(service, model="scripted", context_length=6_000)
    graph = create_agent(
        ScriptedChat(messages=iter(replies)),
        system_prompt="You review.",
        checkpointer=InMemorySaver(),
        middleware=[middleware],
        **agent,
    )
    thread = {"configurable": {"thread_id": "t1"}}
    for t in range(14):
        text = f"turn {t}: read m{t}.py " + "now " * 30
        await graph.ainvoke({"messages": [HumanMessage(text)]}, thread)
    return service.ledger, service.tip("langchain:t1")


def _exact(ledger: Ledger, tip: str) -> None:
    report = whatif(ledger, tip)
    repro = report.reproduction
    assert repro is not None and repro.exact, repro and repro.differences
    assert repro.compactions[0] == repro.matching_compactions >= 1


async def test_a_run_ending_in_a_structured_answer_is_not_checked_after_it(
    tmp_path: Path,
) -> None:
    # ToolStrategy: the run ends on the answer's tool message; the middleware appends it
    # (after_agent) with no check, the next run checks after its user message
    replies = []
    for t in range(14):
        notes = {"verdict": "ok", "notes": "fine " * 200}
        replies += [
            _call("read_120", {"path": f"m{t}.py"}, f"c{t}"),
            _call("Review", notes, f"s{t}"),
        ]
    ledger, tip = await _record(
        tmp_path, replies, tools=[read_120], response_format=ToolStrategy(Review)
    )
    try:
        await anyio.to_thread.run_sync(lambda: _exact(ledger, tip))
    finally:
        ledger.close()


async def test_a_run_ending_in_a_direct_tool_result_is_not_checked_after_it(
    tmp_path: Path,
) -> None:
    replies = [_call("read_direct", {"path": f"m{t}.py"}, f"c{t}") for t in range(14)]
    ledger, tip = await _record(tmp_path, replies, tools=[read_direct])
    try:
        await anyio.to_thread.run_sync(lambda: _exact(ledger, tip))
    finally:
        ledger.close()


async def test_one_request_carrying_many_user_turns_is_checked_once(tmp_path: Path) -> None:
    # the proxy appends a branch's (an edited message's) or a new family's whole history
    # in one batch and checks once; checked after each user message, the what-if compacted
    # twice where the proxy compacted once
    async with rig(tmp_path, config=CompressionConfig(context_length=4_096)) as r:
        client = r.openai(**{"X-Ctxledger-Session": "chat"})
        history: list[Any] = [{"role": "system", "content": "You help."}]
        for i in range(24):
            history.append({"role": "user", "content": ask(i, 60)})
            res = await client.chat.completions.create(model="gpt-4.1", messages=history)
            history.append(res.choices[0].message.model_dump(exclude_none=True))
        edited = [*history[:45], {"role": "user", "content": ask(99, 60)}]
        await client.chat.completions.create(model="gpt-4.1", messages=edited)
        late = r.openai(**{"X-Ctxledger-Session": "late"})
        first = [*history, {"role": "user", "content": ask(200, 60)}]
        await late.chat.completions.create(model="gpt-4.1", messages=first)
        ledger = r.service.ledger
        tips = {r.service.tip(s) for s in ledger.chains.state.sessions}
        assert len({ledger.chains.root(t) for t in tips}) == 3  # chat, its branch, late
        for tip in tips:
            await anyio.to_thread.run_sync(lambda tip=tip: _exact(ledger, tip))


def _compacted_after(out: Path, report: Any) -> list[str]:
    """The role of the last message each what-if compaction compacted (`out`: its ledger)."""
    scratch = Ledger.open(out)
    try:
        last = [scratch.transcript.live_ids(c.session_id)[-1:] for c in report.whatif.compactions]
        return [scratch.transcript.messages_of(ids)[0]["role"] for ids in last]
    finally:
        scratch.close()


async def test_a_tool_result_is_checked_before_the_reply_it_feeds(tmp_path: Path) -> None:
    # the proxy appends a tool result and the model's reply to it with nothing recorded
    # between (a check that did not compact): under a lower threshold the what-if checks
    # after the tool result, before the call, as the proxy does, never after the reply
    async with rig(tmp_path, config=CompressionConfig(context_length=4_096)) as r:
        client = r.openai(**{"X-Ctxledger-Session": "tools"})
        history: list[Any] = [{"role": "system", "content": "You help."}]
        for i in range(10):
            history.append({"role": "user", "content": ask(i, 30)})
            r.upstream.queue(Say("looking", tool=("read_file", {"path": f"m{i}.py"})))
            res = await client.chat.completions.create(model="gpt-4.1", messages=history)
            reply = res.choices[0].message.model_dump(exclude_none=True)
            call = reply["tool_calls"][0]["id"]
            history += [reply, {"role": "tool", "tool_call_id": call, "content": ask(i, 120)}]
            res = await client.chat.completions.create(model="gpt-4.1", messages=history)
            history.append(res.choices[0].message.model_dump(exclude_none=True))
        ledger, tip = r.service.ledger, r.service.tip("tools")
        lower = msgspec.structs.replace(ledger.config, threshold=0.3)
        out = tmp_path / "whatif.db"
        report = await anyio.to_thread.run_sync(lambda: whatif(ledger, tip, config=lower, out=out))
    roles = _compacted_after(out, report)
    assert "tool" in roles and "assistant" not in roles, roles
