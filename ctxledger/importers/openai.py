"""OpenAI chat messages -> ``ImportedSession`` (documents and JSONL; one conversation or many).

Accepted shapes (``parse_openai``):

* a JSON list of messages (one session);
* ``{"messages": [...], "model": ..., "tools": [...], ...}`` (one session; other
  top-level fields become session fields or ``extras``);
* a JSON list of such conversations (one session each);
* JSONL with one message per line (one session), one conversation per line (one
  session per line) or chat-completion responses (``choices[0].message`` and its
  ``usage``).

A ``usage`` block on an assistant message is taken off the message and reported as
an :class:`ImportedUsage` after it. Legacy ``function_call`` / ``function`` pairs
become ``tool_calls`` / ``tool`` messages with synthesized ids. A ``developer`` message
is kept as one (a message role since session 37; a leading one is a message, not the
system prompt, so an export imports back as the same messages).

The helpers every importer shares live in :mod:`ctxledger.importers.common`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxledger.importers.common import (
    ConversationFormat,
    MessageReader,
    Origin,
    SessionBuilder,
    dump_arguments,
    normalize_tool_calls,
    parse_conversations,
    synth_call_id,
    text_of_parts,
    type_name,
    unique_key,
)
from ctxledger.importers.model import ImportedSession


class OpenAIReader(MessageReader):
    """The OpenAI reader: also remembers a pending legacy function call."""

    def __init__(self, builder: SessionBuilder, model: str | None = None) -> None:
        super().__init__(builder, model)
        self.legacy_call: str | None = None

    def add(self, raw: Any, origin: Origin, index: int) -> None:
        add_openai_message(self, raw, origin)

    def add_line(self, raw: dict[str, Any], lineno: int, index: int) -> None:
        if "role" in raw:
            add_openai_message(self, raw, lineno)
        elif "choices" in raw:
            _completion(self, raw, lineno)
        else:
            raise self.b.src.error(
                "expected a message (with 'role'), a conversation (with 'messages') or a chat completion (with 'choices')",
                lineno,
            )


def _legacy_function_call(st: OpenAIReader, msg: dict[str, Any]) -> None:
    fc = msg.pop("function_call")
    if not isinstance(fc, dict):
        return
    call_id = synth_call_id(st.b.key, len(st.b.messages), 0)
    args = fc.get("arguments", "{}")
    msg["tool_calls"] = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": fc.get("name"), "arguments": dump_arguments(args)},
        }
    ]
    st.legacy_call = call_id
    st.b.warn("legacy function_call messages were converted to tool_calls")


def _legacy_function_result(st: OpenAIReader, msg: dict[str, Any], origin: Origin) -> None:
    if st.legacy_call is None:
        raise st.b.src.error("a 'function' message answers no earlier function_call", origin)
    msg["role"] = "tool"
    msg["tool_call_id"] = st.legacy_call
    st.legacy_call = None


def add_openai_message(st: OpenAIReader, raw: Any, origin: Origin) -> None:
    """Normalize one OpenAI message in place and add it (leading system message -> system
    prompt; a leading developer one too when the conversation's ``system_role`` says
    developer: the prompt is kept in the role the file names)."""
    if type(raw) is not dict:
        raise st.b.src.error(f"a message must be a JSON object, got {type_name(raw)}", origin)
    role = raw.get("role")
    if role in ("system", st.b.system_role) and not st.b.messages and st.b.system_prompt is None:
        text = text_of_parts(raw.get("content"))
        if text is not None:
            st.b.system_prompt = text
            if role != st.b.system_role:
                st.b.warn(f"the leading {role} message is the prompt, kept as {st.b.system_role}")
            if set(raw) - {"role", "content"}:
                st.b.warn("fields of the system message other than its content were not kept")
            return
    usage = raw.pop("usage", None) if role == "assistant" else None
    if role == "assistant":
        if (
            "function_call" in raw
            and raw.get("function_call") is not None
            and not raw.get("tool_calls")
        ):
            _legacy_function_call(st, raw)
        elif "function_call" in raw and raw["function_call"] is None:
            del raw["function_call"]
        if raw.get("tool_calls"):
            normalize_tool_calls(st.b, raw["tool_calls"], len(st.b.messages))
    elif role == "function":
        _legacy_function_result(st, raw, origin)
    st.b.add(raw, origin)
    if usage is not None:
        st.b.add_usage(
            usage, origin, model=raw.get("model") if isinstance(raw.get("model"), str) else st.model
        )


def _completion(st: OpenAIReader, obj: dict[str, Any], lineno: int) -> None:
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise st.b.src.error("a chat completion needs a non-empty 'choices' list", lineno)
    if len(choices) > 1:
        st.b.warn("only the first choice of multi-choice completions was imported")
    if isinstance(obj.get("model"), str):
        st.model = obj["model"]
    message = choices[0].get("message")
    add_openai_message(st, message, lineno)
    if obj.get("usage") is not None:
        st.b.add_usage(obj["usage"], lineno, model=st.model)


def _conversation_key(obj: Mapping[str, Any], default: str, seen: set[str]) -> str:
    for field in ("id", "session_id", "conversation_id"):
        value = obj.get(field)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return unique_key(seen, str(value))
    return unique_key(seen, default)


def _openai_system(value: Any, b: SessionBuilder, origin: Origin) -> dict[str, Any]:
    if isinstance(value, str):
        b.system_prompt = value
    return {}


def _openai_tools(tools: Any, b: SessionBuilder, origin: Origin) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise b.src.error("'tools' must be a list", origin)
    return tools


OPENAI = ConversationFormat(
    name="openai",
    reader=OpenAIReader,
    read_system=_openai_system,
    read_tools=_openai_tools,
    key_of=_conversation_key,
)


def parse_openai(text: str, *, path: str | None = None) -> list[ImportedSession]:
    """Parse OpenAI chat messages (see the module docstring for the accepted shapes).

    Raises :class:`ImportFormatError` (with the 1-based line) for malformed input;
    nothing is returned unless every session validates.
    """
    return parse_conversations(text, path, OPENAI)
