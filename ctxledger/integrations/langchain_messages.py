"""LangChain messages and the ledger's chat messages: the conversions the LangChain
middleware (:mod:`ctxledger.integrations.langchain`) sends and records with, and the
ledger's view of a thread as the model is sent it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    SystemMessage,
    convert_to_messages,
    convert_to_openai_messages,
)

from ctxledger.compressor import markers
from ctxledger.integrations.langchain_keys import LC_ID
from ctxledger.limits import check_token_count

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


def system_message(host: SystemMessage | None, ledger: JSON | None) -> SystemMessage | None:
    """The system message to send: the agent's own for this call (a ``dynamic_prompt``
    or a prompt changed since the thread started applies, its content blocks kept), with
    the ledger's compaction note added when the view has one; with none from the agent,
    the ledger's (a leading system message of the state, which the ledger holds)."""
    if host is None:
        return None if ledger is None else SystemMessage(content=ledger["content"])
    if ledger is None or not markers.has_system_note(text_of(ledger.get("content"))):
        return host
    content = host.content
    if isinstance(content, str):
        return host.model_copy(update={"content": markers.add_system_note(content)})
    note = {"type": "text", "text": markers.system_note()}
    return host.model_copy(update={"content": [*content, note]})


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


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content or ()
    )


__all__ = ["View", "from_chat", "responses_usage", "system_message", "text_of", "to_chat"]
