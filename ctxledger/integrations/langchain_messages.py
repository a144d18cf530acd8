"""LangChain messages and the ledger's chat messages: the conversions the LangChain
middleware (:mod:`ctxledger.integrations.langchain`) sends and records with, the
ledger's view of a thread as the model is sent it, and what a graph's state and config
say (its messages, its thread, its tools' schemas)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import ModelRequest
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    SystemMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxledger.compressor import markers
from ctxledger.integers import shown
from ctxledger.integrations.common import finite_schema
from ctxledger.integrations.langchain_keys import LC_ID
from ctxledger.limits import check_input_text, check_token_count
from ctxledger.runtime.toolbudget import tool_name

JSON = dict[str, Any]


class View:
    """The ledger's view of a thread, ready to be sent as LangChain messages."""

    def __init__(self, system: JSON | None, live: list[JSON], state: Sequence[AnyMessage]) -> None:
        self.system = system
        self.live = live
        self.state = state
        self.by_id = {str(m.id): m for m in state}

    def model_input(self) -> list[BaseMessage]:
        """The live view; a message the ledger carried unchanged is the state's own object."""
        out: list[BaseMessage] = []
        for msg in self.live:
            original = self.by_id.get(str(msg.get(LC_ID)))
            if original is not None and to_chat([original])[0] == msg:
                out.append(original)
            else:
                out.append(from_chat(msg))
        return out


class ModelCall:
    """One model call: the ledger session and view it sends, its output cap
    (``max_tokens``), how many times recovery lowered that cap, whether it recovered."""

    def __init__(
        self,
        sid: str,
        view: View,
        max_tokens: int | None,
        lowered: int = 0,
        recovered: bool = False,
    ) -> None:
        self.sid = sid
        self.view = view
        self.max_tokens = max_tokens
        self.lowered = lowered
        self.recovered = recovered


def system_message(host: SystemMessage | None, ledger: JSON | None) -> SystemMessage | None:
    """The system message to send: the agent's own for this call (a ``dynamic_prompt``
    or a prompt changed since the thread started applies, its content blocks kept), with
    the ledger's compaction note added when the view has one; with none from the agent,
    the ledger's (a leading system message of the state, which the ledger holds; a prompt
    held as ``developer`` marked as langchain-openai marks that role)."""
    if host is None:
        if ledger is None:
            return None
        role = {OPENAI_ROLE: "developer"} if ledger.get("role") == "developer" else {}
        return SystemMessage(content=ledger["content"], additional_kwargs=role)
    if ledger is None or not markers.has_system_note(text_of(ledger.get("content"))):
        return host
    content = host.content
    if isinstance(content, str):
        return host.model_copy(update={"content": markers.add_system_note(content)})
    # the note block starts with a line break: the blocks read as text (joined by one)
    # are then the ledger's prompt, the note added after a blank line (what is counted)
    note = {"type": "text", "text": f"\n{markers.system_note()}"}
    return host.model_copy(update={"content": [*content, note]})


def overridden(request: ModelRequest[Any], call: ModelCall, own: Any) -> ModelRequest[Any]:
    """The model call's `request` (a ``ModelRequest``) sent the ledger's view of `call`:
    its messages, the system message (:func:`system_message`), a lowered ``max_tokens``,
    the tools of :func:`sent_tools` (`own`: the middleware's ``read_persisted``)."""
    overrides: dict[str, Any] = {"messages": call.view.model_input()}
    system = system_message(request.system_message, call.view.system)
    if system is not None:
        overrides["system_message"] = system
    if len(tools := sent_tools(request.tools, own)) != len(request.tools):
        overrides["tools"] = tools
    if call.lowered:
        overrides["model_settings"] = {**request.model_settings, "max_tokens": call.max_tokens}
    return request.override(**overrides)


def to_chat(messages: Sequence[BaseMessage]) -> list[JSON]:
    """LangChain messages as OpenAI chat messages, each keeping its id under ``lc_id``."""
    converted = convert_to_openai_messages(list(messages))
    out: list[JSON] = []
    for message, chat in zip(messages, converted, strict=True):
        chat = dict(chat)
        if chat.get("role") == "assistant" and chat.get("content") == "" and chat.get("tool_calls"):
            chat["content"] = None
        if message.id is not None:
            chat[LC_ID] = str(message.id)
        out.append(chat)
    return out


def from_chat(message: JSON) -> BaseMessage:
    """One chat message as a LangChain message (its ``lc_id`` back as the id)."""
    plain = {k: v for k, v in message.items() if k != LC_ID}
    if plain.get("role") == "assistant" and plain.get("content") is None:
        plain["content"] = ""
    converted: BaseMessage = convert_to_messages([plain])[0]
    if isinstance(message.get(LC_ID), str):
        converted.id = message[LC_ID]
    return converted


def responses_usage(usage: Any) -> JSON:
    """LangChain ``usage_metadata`` as a Responses usage dict: LangChain's input_tokens is
    the whole prompt (cache reads and writes included), as in the Responses API."""
    details = usage.get("input_token_details") or {}
    out_details = usage.get("output_token_details") or {}

    def count(block: Any, key: str) -> int:  # text and bools are refused, not made numbers
        return check_token_count(block.get(key), f"usage_metadata field {key!r}")

    return {
        "input_tokens": count(usage, "input_tokens"),
        "output_tokens": count(usage, "output_tokens"),
        "input_tokens_details": {
            "cached_tokens": count(details, "cache_read"),
            "cache_creation_tokens": count(details, "cache_creation"),
        },
        "output_tokens_details": {"reasoning_tokens": count(out_details, "reasoning")},
    }


#: the mark of a ``SystemMessage`` that langchain-core's OpenAI conversion sends in the
#: role it names (``developer``: ``convert_to_openai_messages``, ``convert_to_messages``)
OPENAI_ROLE = "__openai_role__"


def host_prompt(system: SystemMessage | None) -> str | None:
    """The text of the agent's system message (checked as a start's ``system_prompt``)."""
    return None if system is None else check_input_text(text_of(system.content), "system_prompt")


def prompt_role(system: SystemMessage | None) -> str:
    """The role the agent's system message is sent in: ``developer`` when it carries
    langchain-core's mark for it (:data:`OPENAI_ROLE`), else ``system``."""
    marked = None if system is None else system.additional_kwargs.get(OPENAI_ROLE)
    return "developer" if marked == "developer" else "system"


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content or ()
    )


def sent_tools(tools: Sequence[Any], own: Any) -> list[Any]:
    """A request's tools as the model is sent them: none when `own`, the middleware's
    ``read_persisted`` (the very object), is the only one (an agent without tools of its
    own has no tool output to store, and its model need not bind tools). An agent's own
    tool of that name took the middleware's place (the tool node keeps one tool a name):
    it is sent, with a warning that a stored output cannot be read back."""
    if all(t is own for t in tools):
        return []
    if not any(t is own for t in tools) and any(_named(t) == own.name for t in tools):
        warnings.warn(
            f"ctxledger: the agent's own tool {shown(own.name)} replaces the middleware's: "
            "a tool output stored out of the context cannot be read back by the model",
            UserWarning,
            stacklevel=2,
        )
    return list(tools)


def _named(tool: Any) -> Any:
    """A tool's name: a ``BaseTool``'s, or a provider tool dict's (either shape)."""
    if isinstance(tool, dict):
        return tool_name(tool)
    return getattr(tool, "name", None)


def tool_schemas(tools: Sequence[Any], own: Any) -> list[JSON] | None:
    """The function schemas of a request's tools as sent (:func:`sent_tools`), as
    preflight counts them."""
    schemas: list[JSON] = []
    for tool in sent_tools(tools, own):
        try:
            schema = dict(tool) if isinstance(tool, dict) else convert_to_openai_tool(tool)
        except (TypeError, ValueError, NotImplementedError):
            continue  # a provider-native tool without a function schema: not estimable
        name = getattr(tool, "name", None) or f"tool {len(schemas)}"
        schemas.append(finite_schema(schema, str(name)))
    return schemas or None


def state_messages(state: Any) -> list[Any] | None:
    """The messages of an agent state: a dict (``AgentState``) or an object with a
    ``messages`` attribute (a pydantic state schema); None when it has no list of them."""
    if isinstance(state, dict):
        messages = state.get("messages") or []
    else:
        messages = getattr(state, "messages", None)
    return list(messages) if isinstance(messages, list | tuple) else None


def configured_thread() -> str | None:
    """The running graph's thread id (``config["configurable"]["thread_id"]``), if any."""
    try:
        from langgraph.config import get_config

        thread = (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:
        thread = None
    return None if thread is None or thread == "" else str(thread)


def new_run(state: Any, key: str) -> list[str] | None:
    """The message ids of a run that needs its own key (no thread id, no key yet)."""
    if configured_thread() is not None or state_field(state, key):
        return None
    return [str(m.id) for m in state_messages(state) or ()]


def state_field(state: Any, name: str) -> Any:
    return state.get(name) if isinstance(state, dict) else getattr(state, name, None)


def thread_id(state: Any, messages: Sequence[Any] | None, key: str) -> str:
    """The running graph's thread id; without one (a graph with no checkpointer: each
    run is a conversation of its own) the run's key that ``before_agent`` put in the
    state (field `key`) (runs shared ``default``: each one ended the other's session and appended
    their history again). A state without the key (the hooks called outside a graph):
    ``default:`` and the id of its first message, else ``default``."""
    thread = configured_thread()
    if thread is not None:
        return thread
    run = state_field(state, key)
    if isinstance(run, str) and run:
        return run
    first = getattr(messages[0], "id", None) if messages else None
    return f"default:{first}" if isinstance(first, str) and first else "default"


__all__ = [
    "ModelCall",
    "View",
    "configured_thread",
    "from_chat",
    "host_prompt",
    "new_run",
    "overridden",
    "prompt_role",
    "responses_usage",
    "sent_tools",
    "state_field",
    "state_messages",
    "system_message",
    "text_of",
    "thread_id",
    "to_chat",
    "tool_schemas",
]
