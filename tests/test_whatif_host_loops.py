"""A what-if with the recorded settings reproduces a chain recorded through each host.

Each host checks for compaction at its own points and names its loop when it starts a
session (``SessionStarted.config["agent_loop"]``): the Agents SDK session ``per_run``,
the LangChain middleware and the proxy's faces ``every_call``. The what-if reads it from
the chain's root and checks at the same points, so every recorded compaction is
reproduced; under the loop it ran before (``hermes``: hygiene before a user turn,
preflight only right after it) none of these chains was (session 38).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers.fake_upstream import Say
from helpers.frameworks import require
from helpers.server_rig import ask, rig

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
require("agents", "agents")
require("langchain.agents", "langchain")
from agents import Agent, Runner, function_tool  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from agents.usage import Usage  # noqa: E402
from helpers.langchain_fakes import ScriptedChat  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from ctxledger import CompressionConfig, ContextService, Ledger  # noqa: E402
from ctxledger.analysis.whatif import WhatIfReport, whatif  # noqa: E402
from ctxledger.integrations.langchain import CtxLedgerMiddleware  # noqa: E402
from ctxledger.integrations.openai_agents import CtxLedgerSession  # noqa: E402
from ctxledger.ledger.spec import LOOP_KEY  # noqa: E402

SYSTEM = "You review code."


def _loops(ledger: Ledger, tip: str) -> list[Any]:
    """The loop each session of `tip`'s chain names in its start's config snapshot."""
    return [ledger.transcript.session(s).config.get(LOOP_KEY) for s in ledger.chains.chain(tip)]


async def _reproduced(ledger: Ledger, tip: str, loop: str, at_least: int) -> None:
    """:func:`_reproduces` out of the test's event loop (a what-if runs its own)."""
    await anyio.to_thread.run_sync(lambda: _reproduces(ledger, tip, loop, at_least))


def _reproduces(ledger: Ledger, tip: str, loop: str, at_least: int) -> WhatIfReport:
    """The what-if with the recorded settings reproduces every one of the chain's (at least
    `at_least`) compactions, and every session of the chain names `loop`; the loop the
    what-if ran before (``hermes``) does not reproduce the chain."""
    assert set(_loops(ledger, tip)) == {loop}  # the root's, carried by each continuation
    report = whatif(ledger, tip)
    repro = report.reproduction
    assert repro is not None and report.reproduces_recorded, repro.differences
    assert repro.compactions[0] == repro.matching_compactions >= at_least
    assert not any("ran preflight" in w or "hygiene" in w for w in repro.warnings)
    shown = loop.replace("_", "-")
    assert report.notes[0].startswith(f"the what-if checked for compaction where the {shown}")
    before = whatif(ledger, tip, loop="hermes").reproduction
    assert before is not None and not before.exact
    assert before.matching_compactions < repro.matching_compactions
    return report


# --------------------------------------------------------------------------- Agents SDK


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\n" + "\n".join(f"line {i}: value_{i} = compute({i})" for i in range(40))


def _sdk_step(output: list[Any]) -> ModelStep:
    def respond(call: Any) -> ModelStep:
        # the input the model was sent, at ~4 chars a token, as a provider counts it
        n = len(json.dumps(call.input, default=str)) // 4 + 30
        usage = Usage(requests=1, input_tokens=n, output_tokens=12, total_tokens=n + 12)
        return ModelStep(output=output, usage=usage)

    return ModelStep.respond(respond)


async def test_an_agents_sdk_chain_is_reproduced_by_its_per_run_loop(tmp_path: Path) -> None:
    config = CompressionConfig(threshold_floor_tokens=0, context_length=6_000)
    service = ContextService(Ledger.open(tmp_path / "sdk.db", config=config), config=config)
    session = CtxLedgerSession("user-1", service, model="gpt-4.1", context_length=6_000)
    steps = []
    for t in range(14):
        call = function_call("read_file", {"path": f"src/m{t}.py"}, call_id=f"r{t}")
        steps += [_sdk_step([call]), _sdk_step([assistant_message(f"m{t} fixed", item_id=f"a{t}")])]
    agent = Agent(name="coder", instructions=SYSTEM, model=ScriptedModel(steps), tools=[read_file])
    for t in range(14):
        ask_t = f"Turn {t}: fix the parse bug in src/m{t}.py " + "now " * 40
        if t % 2:
            streamed = Runner.run_streamed(agent, ask_t, session=session)
            async for _ in streamed.stream_events():
                pass
        else:
            await Runner.run(agent, ask_t, session=session)
    try:
        await _reproduced(service.ledger, service.tip("user-1"), "per_run", 3)
    finally:
        service.ledger.close()


# --------------------------------------------------------------------------- LangChain


@tool
def lc_read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}: " + "lorem ipsum dolor " * 60


@tool
def lc_grep(pattern: str) -> str:
    """Search the project."""
    return "\n".join(f"src/f{i}.py:{i}: {pattern}" for i in range(30))


def _two_calls_a_turn(turns: int) -> list[AIMessage]:
    replies = []
    for t in range(turns):
        read = {"name": "lc_read_file", "args": {"path": f"src/m{t}.py"}, "id": f"c{t}a"}
        grep = {"name": "lc_grep", "args": {"pattern": f"bug{t}"}, "id": f"c{t}b"}
        replies += [AIMessage("", tool_calls=[read, grep]), AIMessage(f"m{t} reviewed")]
    return replies


async def test_a_langchain_chain_is_reproduced_by_its_every_call_loop(tmp_path: Path) -> None:
    # (tool results push the view over the threshold: the middleware's preflight before the
    # next call compacts there, which the hermes loop never checks)
    config = CompressionConfig(threshold_floor_tokens=0, context_length=6_000)
    service = ContextService(Ledger.open(tmp_path / "lc.db", config=config), config=config)
    middleware = CtxLedgerMiddleware(service, model="scripted", context_length=6_000)
    agent = create_agent(
        ScriptedChat(messages=iter(_two_calls_a_turn(12))),
        tools=[lc_read_file, lc_grep],
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=[middleware],
    )
    thread = {"configurable": {"thread_id": "t1"}}
    for t in range(12):
        text = f"turn {t}: review src/m{t}.py " + "now " * 80
        await agent.ainvoke({"messages": [HumanMessage(text)]}, thread)
    try:
        await _reproduced(service.ledger, service.tip("langchain:t1"), "every_call", 3)
    finally:
        service.ledger.close()


# --------------------------------------------------------------------------- the proxy

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_proxied_chat_chain_is_reproduced_by_its_every_call_loop(tmp_path: Path) -> None:
    async with rig(tmp_path, config=CompressionConfig(context_length=4_096)) as r:
        client = r.openai(**{"X-Ctxledger-Session": "chat"})
        history: list[Any] = [{"role": "system", "content": SYSTEM}]
        for i in range(14):
            history.append({"role": "user", "content": ask(i, 60)})
            if i % 2 == 0:  # a tool round: the call, then its result in the next request
                r.upstream.queue(Say("looking", tool=("read_file", {"path": f"m{i}.py"})))
                res = await client.chat.completions.create(model="gpt-4.1", messages=history)
                reply = res.choices[0].message.model_dump(exclude_none=True)
                history.append(reply)
                call = reply["tool_calls"][0]["id"]
                history.append({"role": "tool", "tool_call_id": call, "content": ask(i, 80)})
            res = await client.chat.completions.create(model="gpt-4.1", messages=history)
            history.append(res.choices[0].message.model_dump(exclude_none=True))
        await _reproduced(r.service.ledger, r.service.tip("chat"), "every_call", 2)


async def test_a_proxied_responses_chain_is_reproduced(tmp_path: Path) -> None:
    async with rig(tmp_path, config=CompressionConfig(context_length=4_096)) as r:
        client = r.openai(**{"X-Ctxledger-Session": "resp"})
        history: list[Any] = []
        for i in range(14):
            history.append({"role": "user", "content": ask(i, 60)})
            if i % 2 == 0:
                r.upstream.queue(Say("looking", tool=("grep", {"pattern": f"x{i}"})))
                res = await client.responses.create(
                    model="gpt-4.1", instructions=SYSTEM, input=history
                )
                history += [item.model_dump(exclude_none=True) for item in res.output]
                out = {"type": "function_call_output", "call_id": res.output[-1].call_id}
                history.append({**out, "output": ask(i, 80)})
            res = await client.responses.create(model="gpt-4.1", instructions=SYSTEM, input=history)
            history += [item.model_dump(exclude_none=True) for item in res.output]
        await _reproduced(r.service.ledger, r.service.tip("resp"), "every_call", 2)


async def test_a_proxied_anthropic_chain_is_reproduced(tmp_path: Path) -> None:
    config = CompressionConfig(context_length=4_096)
    async with rig(tmp_path, api="anthropic", config=config) as r:
        client = r.anthropic(**{"X-Ctxledger-Session": "anth"})
        history: list[Any] = []
        for i in range(14):
            history.append({"role": "user", "content": ask(i, 60)})
            if i % 2 == 0:
                r.upstream.queue(Say("looking", tool=("read_file", {"path": f"m{i}.py"})))
                res = await client.messages.create(
                    model="claude-sonnet-4", max_tokens=256, system=SYSTEM, messages=history
                )
                use = next(b for b in res.content if b.type == "tool_use")
                history.append(
                    {"role": "assistant", "content": [b.model_dump() for b in res.content]}
                )
                result = {"type": "tool_result", "tool_use_id": use.id, "content": ask(i, 80)}
                history.append({"role": "user", "content": [result]})
            res = await client.messages.create(
                model="claude-sonnet-4", max_tokens=256, system=SYSTEM, messages=history
            )
            history.append({"role": "assistant", "content": [b.model_dump() for b in res.content]})
        await _reproduced(r.service.ledger, r.service.tip("anth"), "every_call", 2)
