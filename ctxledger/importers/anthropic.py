"""Anthropic Messages format -> ``ImportedSession`` (OpenAI message shape).

Accepted shapes: ``{"system": ..., "messages": [...], "model": ..., "tools": [...]}``;
a JSON list of messages or of such conversations; JSONL with one message (or API
response) per line, or one conversation per line.

Mapping (also used by the Claude Code importer):

* ``text`` blocks -> content (a string when there is one plain text block, else a
  list of text parts that keeps block extras such as ``cache_control``);
* ``tool_use`` -> ``tool_calls`` (ids preserved, ``input`` encoded as the JSON
  ``arguments`` string);
* ``tool_result`` blocks inside a user message -> separate ``tool`` messages placed
  before whatever user text remains (``is_error`` and other block fields kept);
* ``thinking`` -> ``reasoning_content``; the raw thinking blocks are kept in
  ``thinking_blocks`` when they carry a signature or are redacted;
* ``image`` -> an ``image_url`` part (base64 becomes a data URI);
* a ``usage`` block on an assistant message -> an ``ImportedUsage`` (shape
  ``anthropic``, cache read / creation fields included).

Other block types are kept as raw content parts and reported in the warnings.
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
    parse_conversations,
    synth_call_id,
    text_of_parts,
    type_name,
    unique_key,
)
from ctxledger.importers.model import ImportedSession
from ctxledger.integers import shown
from ctxledger.messages import INSTRUCTION_ROLES

_MESSAGE_META = ("role", "content", "usage", "type")
_THINKING = ("thinking", "redacted_thinking")


def image_part(block: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic image block as an OpenAI ``image_url`` part (other block fields kept)."""
    source = block.get("source")
    extras = {k: v for k, v in block.items() if k not in ("type", "source")}
    if isinstance(source, Mapping):
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
            return {"type": "image_url", "image_url": {"url": url}, **extras}
        if source.get("type") == "url" and isinstance(source.get("url"), str):
            return {"type": "image_url", "image_url": {"url": source["url"]}, **extras}
    return dict(block)


def content_from_parts(parts: list[dict[str, Any]], empty: str | None) -> Any:
    """One plain text part -> its string; no parts -> `empty`; otherwise the list."""
    if not parts:
        return empty
    if len(parts) == 1 and parts[0].get("type") == "text" and set(parts[0]) == {"type", "text"}:
        return parts[0]["text"]
    return parts


def _check_block(b: SessionBuilder, block: Any, j: int, origin: Origin) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise b.src.error(f"content block {j} must be an object with a string 'type'", origin)
    kind: str = block["type"]
    if kind == "text" and not isinstance(block.get("text"), str):
        raise b.src.error(f"text block {j} has no string 'text'", origin)
    return kind


def _tool_call(
    b: SessionBuilder, block: dict[str, Any], index: int, j: int, origin: Origin
) -> dict[str, Any]:
    name = block.get("name")
    if not isinstance(name, str) or not name:
        raise b.src.error(f"tool_use block {j} has no 'name'", origin)
    call_id = block.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = synth_call_id(b.key, index, j)
        b.warn("tool_use blocks without an id got a synthesized id")
    extras = {k: v for k, v in block.items() if k not in ("type", "id", "name", "input")}
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": dump_arguments(block.get("input", {}))},
        **extras,
    }


def add_assistant(
    b: SessionBuilder, raw: dict[str, Any], origin: Origin, index: int
) -> dict[str, Any]:
    """Convert one Anthropic assistant message and add it; returns the OpenAI message."""
    content = raw.get("content")
    msg: dict[str, Any] = {k: v for k, v in raw.items() if k not in _MESSAGE_META}
    msg["role"] = "assistant"
    if isinstance(content, str):
        msg["content"] = content
    elif isinstance(content, list):
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        thinking: list[dict[str, Any]] = []
        for j, block in enumerate(content):
            kind = _check_block(b, block, j, origin)
            if kind == "tool_use":
                calls.append(_tool_call(b, block, index, j, origin))
            elif kind in _THINKING:
                thinking.append(block)
            else:
                if calls:
                    b.warn(
                        "assistant content after a tool_use block was moved before the tool calls"
                    )
                parts.append(_content_part(b, block, kind, "assistant"))
        msg["content"] = content_from_parts(parts, None if calls else "")
        if calls:
            msg["tool_calls"] = calls
        _add_thinking(msg, thinking)
    else:
        raise b.src.error(
            f"assistant content must be a string or a list of blocks, got {type_name(content)}",
            origin,
        )
    b.add(msg, origin)
    return msg


def _add_thinking(msg: dict[str, Any], thinking: list[dict[str, Any]]) -> None:
    texts = [t["thinking"] for t in thinking if isinstance(t.get("thinking"), str)]
    if texts:
        msg["reasoning_content"] = "\n\n".join(texts)
    if any(t.get("signature") or t.get("type") == "redacted_thinking" for t in thinking):
        msg["thinking_blocks"] = thinking


def _content_part(b: SessionBuilder, block: dict[str, Any], kind: str, role: str) -> dict[str, Any]:
    if kind == "text":
        return dict(block)
    if kind == "image":
        return image_part(block)
    b.warn(f"{role} content blocks of type {shown(kind)} were kept as raw content parts")
    return dict(block)


def _tool_message(
    b: SessionBuilder, block: dict[str, Any], j: int, origin: Origin
) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise b.src.error(f"tool_result block {j} has no 'tool_use_id'", origin)
    content = block.get("content", "")
    if content is None:
        content = ""
    elif isinstance(content, list):
        content = [
            _content_part(b, p, _check_block(b, p, k, origin), "tool_result")
            for k, p in enumerate(content)
        ]
    elif not isinstance(content, str):
        raise b.src.error(
            f"tool_result block {j}: content must be a string or a list, got {type_name(content)}",
            origin,
        )
    msg: dict[str, Any] = {
        k: v for k, v in block.items() if k not in ("type", "tool_use_id", "content", "is_error")
    }
    msg.update(role="tool", tool_call_id=call_id, content=content)
    if block.get("is_error"):
        msg["is_error"] = True
    return msg


def add_user(b: SessionBuilder, raw: dict[str, Any], origin: Origin) -> None:
    """Convert one Anthropic user message: tool results first (as tool messages), then the user text."""
    content = raw.get("content")
    extras = {k: v for k, v in raw.items() if k not in _MESSAGE_META}
    if isinstance(content, str):
        b.add({**extras, "role": "user", "content": content}, origin)
        return
    if not isinstance(content, list):
        raise b.src.error(
            f"user content must be a string or a list of blocks, got {type_name(content)}", origin
        )
    parts: list[dict[str, Any]] = []
    results = 0
    for j, block in enumerate(content):
        kind = _check_block(b, block, j, origin)
        if kind == "tool_result":
            b.add(_tool_message(b, block, j, origin), origin)
            results += 1
        else:
            parts.append(_content_part(b, block, kind, "user"))
    if parts or not results:
        b.add({**extras, "role": "user", "content": content_from_parts(parts, "")}, origin)
    elif extras:
        b.warn("fields of user messages holding only tool results were not kept")


def add_anthropic_message(
    b: SessionBuilder, raw: Any, origin: Origin, index: int
) -> dict[str, Any] | None:
    """Convert and add one Anthropic message; returns the assistant message (for usage), else None."""
    if not isinstance(raw, dict):
        raise b.src.error(f"a message must be a JSON object, got {type_name(raw)}", origin)
    role = raw.get("role")
    if raw.get("ctxledger_role") in INSTRUCTION_ROLES:
        # a mid-conversation system (developer) message, as our exporter writes it
        b.add({"role": raw["ctxledger_role"], "content": text_of_parts(raw.get("content"))}, origin)
        return None
    if role == "assistant":
        return add_assistant(b, raw, origin, index)
    if role == "user":
        add_user(b, raw, origin)
        return None
    raise b.src.error(
        f"unknown role {shown(role)}; Anthropic messages are 'user' or 'assistant'", origin
    )


def openai_tools(tools: Any, b: SessionBuilder, origin: Origin) -> list[dict[str, Any]]:
    """Anthropic tool definitions as OpenAI function tools (server tools kept raw)."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise b.src.error("'tools' must be a list", origin)
    out: list[dict[str, Any]] = []
    for tool in tools:
        if isinstance(tool, dict) and "input_schema" in tool and isinstance(tool.get("name"), str):
            fn = {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool["input_schema"],
            }
            out.append({"type": "function", "function": fn})
        else:
            b.warn("tool definitions without an input_schema (server tools) were kept as given")
            out.append(tool)
    return out


class AnthropicReader(MessageReader):
    """Adds Anthropic messages; an assistant message's ``usage`` is reported after it."""

    usage_shape = "anthropic"

    def add(self, raw: Any, origin: Origin, index: int) -> None:
        usage = raw.get("usage") if isinstance(raw, dict) else None
        added = add_anthropic_message(self.b, raw, origin, index)
        if added is not None and usage is not None:
            model = raw.get("model") if isinstance(raw.get("model"), str) else self.model
            self.b.add_usage(usage, origin, shape=self.usage_shape, model=model)

    def add_line(self, raw: dict[str, Any], lineno: int, index: int) -> None:
        """One message or API response per line; the latest ``model`` is the session's."""
        if isinstance(raw.get("model"), str):
            self.model = raw["model"]
        self.add(raw, lineno, index)


def _system(value: Any, b: SessionBuilder, origin: Origin) -> dict[str, Any]:
    """A conversation's ``system`` as the system prompt; system blocks are also kept raw."""
    b.system_prompt = text_of_parts(value)
    if b.system_prompt is None:
        raise b.src.error("'system' must be a string or a list of text blocks", origin)
    return {"system_blocks": value} if isinstance(value, list) else {}


def _key(obj: Mapping[str, Any], default: str, seen: set[str]) -> str:
    value = obj.get("id")
    return unique_key(
        seen, value if isinstance(value, str) and value and "messages" in obj else default
    )


ANTHROPIC = ConversationFormat(
    name="anthropic",
    reader=AnthropicReader,
    read_system=_system,
    read_tools=openai_tools,
    key_of=_key,
)


def parse_anthropic(text: str, *, path: str | None = None) -> list[ImportedSession]:
    """Parse Anthropic Messages-format conversations into OpenAI-shape sessions.

    Raises :class:`ImportFormatError` (with the 1-based line) for malformed input;
    nothing is returned unless every session validates.
    """
    return parse_conversations(text, path, ANTHROPIC)
