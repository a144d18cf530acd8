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
from ctxledger.runtime.toolbudget import DEFAULT_MAX_SLICE_CHARS


class Middleware(Protocol):
    """What the tool needs of ``CtxLedgerMiddleware`` (which imports this module)."""

    service: ContextService

    def session_of(self, state: Any) -> str | None: ...

    def loop_thread(self) -> LoopThread: ...


def read_persisted(middleware: Middleware) -> BaseTool:
    """The ``read_persisted`` tool over `middleware`'s ledger (its schema and description
    are the ledger's own, :func:`ctxledger.runtime.read_persisted_tool`). A sync graph's
    call runs on the middleware's loop thread, as its model calls do; errors come back to
    the model as ``{"error": ...}``."""
    description = read_persisted_tool()["function"]["description"]

    async def aread(
        ref: str, runtime: ToolRuntime, offset: int = 0, limit: int = DEFAULT_MAX_SLICE_CHARS
    ) -> str:
        sid = middleware.session_of(runtime.state)
        args = {"ref": ref, "offset": offset, "limit": limit}
        return await read_persisted_call(middleware.service, sid, args)

    def read(
        ref: str, runtime: ToolRuntime, offset: int = 0, limit: int = DEFAULT_MAX_SLICE_CHARS
    ) -> str:
        loop = middleware.loop_thread()
        out: Any = loop.run(lambda: aread(ref, runtime, offset, limit))
        return str(out)

    return StructuredTool.from_function(
        func=read, coroutine=aread, name="read_persisted", description=description
    )


__all__ = ["read_persisted"]
