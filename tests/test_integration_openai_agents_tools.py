"""A tool output over the budget, in an Agents SDK run on a ``CtxLedgerSession``: the
next run is sent the stored-output preview, and the model reads the output back with
``read_persisted_tool(session)`` (real Runner, scripted model, offline)."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import anyio
import pytest
from helpers.frameworks import require
from helpers.slices import parse_slice

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
require("agents", "agents")
from agents import Agent, Runner, function_tool  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

from ctxledger import CompressionConfig, ContextService, InvalidInput, Ledger  # noqa: E402
from ctxledger.integrations.openai_agents import CtxLedgerSession  # noqa: E402
from ctxledger.integrations.openai_agents_hooks import (  # noqa: E402
    CtxLedgerRunHooks,
    read_persisted_tool,
)

CONFIG = CompressionConfig(threshold_floor_tokens=0, context_length=16_000)
ROWS = [{"row": i, "name": f"item-{i:04d}", "note": "padding " * 6} for i in range(300)]


@function_tool
def dump_table(table: str) -> list[dict[str, Any]]:
    """Dump a table as structured rows."""
    return ROWS


@pytest.fixture
def service(tmp_path):
    svc = ContextService(Ledger.open(tmp_path / "agents.db", config=CONFIG), config=CONFIG)
    yield svc
    svc.ledger.close()


def _output_sent(call: Any, call_id: str) -> str:
    """The function_call_output of `call_id` a model call was sent."""
    for item in call.input:
        if isinstance(item, dict) and item.get("call_id") == call_id and "output" in item:
            return str(item["output"])
    raise AssertionError(f"no output of {call_id} was sent")


def _read_back(session: CtxLedgerSession, ref: str) -> str:
    """The whole stored output, read page by page with the tool as a model would."""
    tool, offset, pages = read_persisted_tool(session), 0, []
    while offset is not None:
        args = json.dumps({"ref": ref, "offset": offset})
        page = parse_slice(anyio.run(tool.on_invoke_tool, None, args))
        pages.append(page.text)
        offset = page.next_offset
    assert len(pages) > 1  # (more than one page)
    return "".join(pages)


def test_the_model_reads_a_stored_tool_output_back_with_read_persisted(service):
    session = CtxLedgerSession("ops", service, model="scripted", context_length=16_000)
    first = ScriptedModel(
        [
            ModelStep(output=[function_call("dump_table", {"table": "t"}, call_id="c1")]),
            ModelStep(output=[assistant_message("dumped")]),
        ]
    )
    agent = Agent(name="ops", instructions="Answer.", model=first, tools=[dump_table])
    agent.tools.append(read_persisted_tool(session))

    def read_call(call: Any) -> ModelStep:
        ref = re.search(r"[0-9a-f]{64}", _output_sent(call, "c1"))
        assert ref is not None  # the next run is sent the preview, not the rows
        args = {"ref": ref.group(0), "offset": 0, "limit": 500}
        return ModelStep(output=[function_call("read_persisted", args, call_id="c2")])

    second = ScriptedModel(
        [
            ModelStep.respond(read_call),
            ModelStep(output=[function_call("read_persisted", {"ref": "0" * 64}, call_id="c3")]),
            ModelStep(output=[function_call("read_persisted", "{not json", call_id="c4")]),
            ModelStep(output=[assistant_message("item-0000 it is")]),
        ]
    )

    async def runs() -> None:
        await Runner.run(agent, "dump t", session=session, hooks=CtxLedgerRunHooks(session))
        agent.model = second
        await Runner.run(agent, "first row?", session=session, hooks=CtxLedgerRunHooks(session))

    anyio.run(runs)
    stored = str(ROWS)  # (the SDK sends a structured output as its str())
    preview = _output_sent(second.calls[0], "c1")
    assert "read_persisted" in preview and "item-0299" not in preview  # (stored out of it)
    sliced = parse_slice(_output_sent(second.calls[1], "c2"))
    assert sliced.text in stored and sliced.text.startswith(stored[:100])
    assert sliced.offset == 0 and sliced.next_offset == 500
    assert len(sliced.text) == 500 and sliced.total == len(stored)
    assert _read_back(session, re.findall(r"[0-9a-f]{64}", preview)[0]) == stored
    assert "error" in json.loads(_output_sent(second.calls[2], "c3"))
    assert "not valid JSON" in json.loads(_output_sent(second.calls[3], "c4"))["error"]
    assert service.ledger.verify().ok


def test_before_anything_is_recorded_the_tool_answers_an_error(service):
    session = CtxLedgerSession("empty", service)
    tool = read_persisted_tool(session)
    out = anyio.run(tool.on_invoke_tool, None, json.dumps({"ref": "0" * 64}))
    assert "nothing is recorded" in json.loads(out)["error"]
    with pytest.raises(InvalidInput):
        read_persisted_tool(object())  # type: ignore[arg-type]


def test_deeply_nested_arguments_come_back_as_an_error(service):
    session = CtxLedgerSession("deep", service)
    anyio.run(session.add_items, [{"role": "user", "content": "hi"}])
    tool = read_persisted_tool(session)
    out = anyio.run(tool.on_invoke_tool, None, "[" * 3000 + "]" * 3000)
    assert "not valid JSON" in json.loads(out)["error"]  # (a RecursionError ended the run)
