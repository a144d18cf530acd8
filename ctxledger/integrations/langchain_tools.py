"""The ``read_persisted`` tool :class:`~ctxledger.integrations.langchain.CtxLedgerMiddleware`
registers with the agent (``AgentMiddleware.tools``).

A tool output over the budget is stored out of the ledger's view, and the model is sent
a preview telling it to call ``read_persisted`` with the output's ref. The middleware
sends the ledger's view at every model call, so that preview reaches the model in the
same run: without the tool, LangGraph answers "read_persisted is not a valid tool" and
the output is out of the model's reach. The tool reads the slice from the thread's
session (its current generation; a run without a thread id: the run's), as the
middleware's model call would find it.
"""

from __future__ import annotations

from typing import Any, Protocol

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool

from ctxledger import ContextService
from ctxledger.integrations.common import LoopThread, read_persisted_call
from ctxledger.runtime import read_persisted_tool


class Middleware(Protocol):
    """What the tool needs of ``CtxLedgerMiddleware`` (which imports this module)."""

    service: ContextService

    def session_of(self, state: Any) -> str | None: ...

    def loop_thread(self) -> LoopThread: ...


def read_persisted(middleware: Middleware) -> BaseTool:
    """The ``read_persisted`` tool over `middleware`'s ledger: its name, description and
    JSON schema (bounds and parameter descriptions included) are the ledger's own,
    :func:`ctxledger.runtime.read_persisted_tool`. The arguments reach the tool as the
    model gave them (a schema dict is not enforced): :func:`read_persisted_call` checks
    them, and errors come back to the model as ``{"error": ...}``. A sync graph's call
    runs on the middleware's loop thread, as its model calls do."""
    function = read_persisted_tool()["function"]

    async def aread(runtime: ToolRuntime, **args: Any) -> str:
        sid = middleware.session_of(runtime.state)
        return await read_persisted_call(middleware.service, sid, args)

    def read(runtime: ToolRuntime, **args: Any) -> str:
        out: Any = middleware.loop_thread().run(lambda: aread(runtime, **args))
        return str(out)

    return StructuredTool.from_function(
        func=read,
        coroutine=aread,
        name=function["name"],
        description=function["description"],
        args_schema=function["parameters"],
    )


__all__ = ["read_persisted"]
