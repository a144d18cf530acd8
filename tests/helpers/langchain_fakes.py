"""Shared LangChain test doubles: a tool, a scripted chat model that reports usage from
what it was sent, and its script of tool calls and answers.

Import it after ``helpers.frameworks.require("langchain.agents", "langchain")``: it imports
the framework at module level."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from pydantic import Field

from ctxledger.integrations.common import live_messages, system_view


@tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return f"contents of {path}: " + "lorem ipsum dolor " * 150


class ScriptedChat(GenericFakeChatModel):
    """Replies from the script; reports usage from the size of what it was sent."""

    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    #: the ledger's view (system + live) at the moment of each call
    views: list[list[dict]] = Field(default_factory=list)
    service: Any = None

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.inputs.append(list(messages))
        if self.service is not None:
            tip = self.service.tip("langchain:t1")
            self.views.append([system_view(self.service, tip), *live_messages(self.service, tip)])
        result = super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        sent = sum(len(json.dumps(m.model_dump(), default=str)) for m in messages) // 4
        message = result.generations[0].message
        message.usage_metadata = {
            "input_tokens": sent,
            "output_tokens": 10,
            "total_tokens": sent + 10,
        }
        return result


def script(turns: int) -> list[AIMessage]:
    """`turns` rounds of a ``read_file`` call of ``src/m<t>.py`` and its answer."""
    replies = []
    for t in range(turns):
        call = {"name": "read_file", "args": {"path": f"src/m{t}.py"}, "id": f"call_{t}"}
        replies += [AIMessage("", tool_calls=[call]), AIMessage(f"m{t} reviewed")]
    return replies
