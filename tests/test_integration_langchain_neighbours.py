"""Where LangChain's own middleware goes beside ``CtxLedgerMiddleware`` (the README's
"The same order places LangChain's other middleware"): checked with the real
middleware of the installed ``langchain`` and a scripted model (session 40's probe).

A guard of the README's advice (no behaviour changed): it fails if LangChain's
middleware or ours starts to edit the call elsewhere than the advice assumes."""

# ruff: noqa: E402  (the framework imports follow the require() that fails or skips without it)
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.frameworks import require

require("langchain.agents", "langchain")
from helpers.langchain_fakes import ScriptedChat, read_file, script
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    ModelRetryMiddleware,
    TodoListMiddleware,
)
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxledger import Ledger
from ctxledger.events import UsageReported
from ctxledger.integrations.langchain import CtxLedgerMiddleware

THREAD = {"configurable": {"thread_id": "t1"}}
SID = "langchain:t1"


class Flaky(ScriptedChat):
    """Fails its first call (a dropped connection), then answers from the script."""

    fails: int = 1

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        if self.fails > 0:
            self.fails -= 1
            raise ConnectionError("connection reset")
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)


def _run(db: Path, other: Any, *, ours_first: bool) -> tuple[Ledger, ScriptedChat]:
    model = Flaky(messages=iter([*script(1), AIMessage("bye")]), fails=0)
    if isinstance(other, ModelRetryMiddleware):
        model.fails = 1
    ours = CtxLedgerMiddleware.open(db, context_length=128_000)
    agent = create_agent(
        model,
        tools=[read_file],
        system_prompt="Be brief.",
        checkpointer=InMemorySaver(),
        middleware=[ours, other] if ours_first else [other, ours],
    )
    for ask in ("review src", "thanks"):
        agent.invoke({"messages": [{"role": "user", "content": ask}]}, THREAD)
    ours.service.ledger.close()
    return Ledger.open(db), model


def test_a_prompt_adding_middleware_before_ours_is_recorded_as_sent(tmp_path: Path) -> None:
    for ours_first in (False, True):
        ledger, model = _run(
            tmp_path / f"{ours_first}.db", TodoListMiddleware(), ours_first=ours_first
        )
        sent = model.inputs[-1][0].text
        held = ledger.transcript.session(SID).system_prompt
        assert "write_todos" in sent
        # before ours: recorded as sent (its blocks joined by a line); after ours: the
        # ledger holds the agent's prompt alone
        assert held.startswith("Be brief.") and ("write_todos" in held) is not ours_first
        ledger.close()


def test_a_history_trimming_middleware_after_ours_leaves_the_ledger_whole(tmp_path: Path) -> None:
    edit = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=10, keep=0)])
    for ours_first in (True, False):
        ledger, model = _run(tmp_path / f"{ours_first}.db", edit, ours_first=ours_first)
        tool_sent = [m.content for m in model.inputs[-1] if m.type == "tool"]
        tool_held = [m["content"] for m in ledger.api_messages(SID) if m["role"] == "tool"]
        assert tool_sent == ["[cleared]"]  # the model is sent the trimmed call either way
        assert tool_held[0].startswith("contents of src/m0.py") is ours_first
        ledger.close()


@pytest.mark.parametrize("ours_first", [True, False])
def test_a_retried_call_is_recorded_once(tmp_path: Path, ours_first: bool) -> None:
    retry = ModelRetryMiddleware(
        max_retries=2, initial_delay=0.0, jitter=False, retry_on=(ConnectionError,)
    )
    ledger, model = _run(tmp_path / "retry.db", retry, ours_first=ours_first)
    roles = [m["role"] for m in ledger.api_messages(SID)]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant"]
    usage = [r.event for r in ledger.store.read_all() if isinstance(r.event, UsageReported)]
    assert len(usage) == len(model.inputs) == 3  # one per answered call; the failed one none
    ledger.close()
