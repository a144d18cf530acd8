"""Run hooks that record an Agents SDK agent's system prompt on its ``CtxLedgerSession``.

``Runner.run(agent, text, session=session, hooks=CtxLedgerRunHooks(session))``: before
each model call the SDK hands ``on_llm_start`` the instructions it sends (the agent's
static text, its dynamic callable's result, a handoff's agent's, after any
``call_model_input_filter``). A text that differs from the ledger's prompt is recorded
(``SystemPromptSet``, then preflight: :meth:`CtxLedgerSession.record_system_prompt`);
the same text writes nothing. An agent with no instructions (a handoff's) after one that
had them is recorded as an empty prompt (session 36). Give the caller's own hooks as
``hooks=``: each hook is passed on to them after the recording.

That is after the run's ``get_items``, where the run's history was read and preflight
ran: a changed prompt is counted from here on (its recording runs preflight, and a
compaction it triggers shapes the next run's input), but this call is sent the history
as read, so the first call of a run whose dynamic prompt changed is counted with the
previous prompt. The session never calls a dynamic ``instructions`` callable itself
(it runs when the SDK calls it, once per call), so what is recorded is what was sent,
also when a run starts with another agent (``result.last_agent``). A session's
``agent=`` only gives the prompt it starts with (static ``instructions``).
"""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, RunHooks
from agents.lifecycle import RunHooksBase

from ctxledger import InvalidInput
from ctxledger.integrations.common import read_persisted_call
from ctxledger.integrations.openai_agents import CtxLedgerSession
from ctxledger.runtime import read_persisted_tool as read_persisted_schema


class CtxLedgerRunHooks(RunHooks[Any]):
    """The SDK's run hooks recording each model call's system prompt on `session`,
    then passing every hook on to `hooks` (the caller's own), when given."""

    def __init__(self, session: CtxLedgerSession, hooks: RunHooks[Any] | None = None) -> None:
        if not isinstance(session, CtxLedgerSession):
            raise InvalidInput(f"session must be a CtxLedgerSession, got {type(session).__name__}")
        if hooks is not None and not isinstance(hooks, RunHooksBase):
            raise InvalidInput(f"hooks must be the SDK's RunHooks, got {type(hooks).__name__}")
        self.session = session
        self.hooks = hooks

    async def on_llm_start(
        self, context: Any, agent: Any, system_prompt: Any, input_items: Any
    ) -> None:
        await self.session.record_system_prompt(system_prompt)  # (None: no instructions)
        if self.hooks is not None:
            await self.hooks.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        if self.hooks is not None:
            await self.hooks.on_llm_end(context, agent, response)

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        if self.hooks is not None:
            await self.hooks.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        if self.hooks is not None:
            await self.hooks.on_agent_end(context, agent, output)

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        if self.hooks is not None:
            await self.hooks.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        if self.hooks is not None:
            await self.hooks.on_tool_start(context, agent, tool)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        if self.hooks is not None:
            await self.hooks.on_tool_end(context, agent, tool, result)


def read_persisted_tool(session: CtxLedgerSession) -> FunctionTool:
    """The ``read_persisted`` tool over `session`'s conversation, for the agent's
    ``tools=[...]``: a tool output over the budget is stored out of the context, and the
    next run is sent a preview telling the model to call ``read_persisted`` with its ref
    (without the tool, the SDK ends that run: the tool is not found in the agent).
    Errors come back to the model as ``{"error": ...}``."""
    if not isinstance(session, CtxLedgerSession):
        raise InvalidInput(f"session must be a CtxLedgerSession, got {type(session).__name__}")
    schema = read_persisted_schema()["function"]

    async def invoke(context: Any, arguments: str) -> str:
        return await read_persisted_call(session.service, session.ledger_session_id(), arguments)

    return FunctionTool(
        name=schema["name"],
        description=schema["description"],
        params_json_schema=schema["parameters"],
        on_invoke_tool=invoke,
        strict_json_schema=False,  # (offset and limit have defaults)
    )


__all__ = ["CtxLedgerRunHooks", "read_persisted_tool"]
