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

from ctxledger.importers.model import ImportedSession
from ctxledger.importers.openai import (
    Origin,
    SessionBuilder,
    SourceText,
    document_conversations,
    dump_arguments,
    read_json,
    source_name,
    synth_call_id,
    text_of_parts,
    type_name,
    unique_key,
)

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
    b.warn(f"{role} content blocks of type {kind!r} were kept as raw content parts")
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
    if raw.get("ctxledger_role") == "system":
        # a mid-conversation system message, as our exporter writes it
        b.add({"role": "system", "content": text_of_parts(raw.get("content"))}, origin)
        return None
    if role == "assistant":
        return add_assistant(b, raw, origin, index)
    if role == "user":
        add_user(b, raw, origin)
        return None
    raise b.src.error(
        f"unknown role {role!r}; Anthropic messages are 'user' or 'assistant'", origin
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


def _add_with_usage(
    b: SessionBuilder, raw: Any, origin: Origin, index: int, model: str | None
) -> None:
    usage = raw.get("usage") if isinstance(raw, dict) else None
    added = add_anthropic_message(b, raw, origin, index)
    if added is not None and usage is not None:
        b.add_usage(
            usage,
            origin,
            shape="anthropic",
            model=raw.get("model") if isinstance(raw.get("model"), str) else model,
        )


_CONVERSATION_FIELDS = ("messages", "system", "model", "tools", "title", "usage", "context_length")


def _conversation(
    src: SourceText, obj: dict[str, Any], key: str, prefix: tuple[str | int, ...] | int
) -> ImportedSession:
    def origin(*rest: str | int) -> Origin:
        return prefix if isinstance(prefix, int) else (*prefix, *rest)

    messages = obj.get("messages")
    if not isinstance(messages, list):
        raise src.error(f"'messages' must be a list, got {type_name(messages)}", origin("messages"))
    b = SessionBuilder(src, key, "anthropic")
    model = obj["model"] if isinstance(obj.get("model"), str) else None
    system = obj.get("system")
    if system is not None:
        b.system_prompt = text_of_parts(system)
        if b.system_prompt is None:
            raise src.error("'system' must be a string or a list of text blocks", origin("system"))
    for i, m in enumerate(messages):
        _add_with_usage(b, m, origin("messages", i), i, model)
    if obj.get("usage") is not None:
        b.add_usage(obj["usage"], origin("usage"), shape="anthropic", model=model)
    extras = {k: v for k, v in obj.items() if k not in _CONVERSATION_FIELDS}
    if isinstance(system, list):
        extras["system_blocks"] = system
    ctx = obj.get("context_length")
    return b.build(
        model=model,
        tools=openai_tools(obj.get("tools"), b, origin("tools")),
        title=obj["title"] if isinstance(obj.get("title"), str) else None,
        context_length=ctx if isinstance(ctx, int) and not isinstance(ctx, bool) else None,
        extras=extras,
    )


def _key(obj: Mapping[str, Any], default: str, seen: set[str]) -> str:
    value = obj.get("id")
    return unique_key(
        seen, value if isinstance(value, str) and value and "messages" in obj else default
    )


def _from_document(src: SourceText, doc: Any) -> list[ImportedSession]:
    found = document_conversations(src, doc, _conversation, _key)
    if found is not None:
        return found
    base = source_name(src.path)
    b = SessionBuilder(src, base, "anthropic")
    for i, m in enumerate(doc):
        _add_with_usage(b, m, (i,), i, None)
    return [b.build()]


def _from_lines(src: SourceText, rows: list[tuple[int, Any]]) -> list[ImportedSession]:
    base = source_name(src.path)
    seen: set[str] = set()
    first = rows[0][1]
    if isinstance(first, dict) and "messages" in first:
        out = []
        for lineno, obj in rows:
            if not isinstance(obj, dict) or "messages" not in obj:
                raise src.error(
                    "expected a conversation (an object with 'messages') on every line", lineno
                )
            out.append(_conversation(src, obj, _key(obj, f"{base}:{lineno}", seen), lineno))
        return out
    b = SessionBuilder(src, base, "anthropic")
    model = None
    for i, (lineno, obj) in enumerate(rows):
        if isinstance(obj, dict) and "messages" in obj:
            raise src.error(
                "this line holds a whole conversation, earlier lines hold one message each", lineno
            )
        if isinstance(obj, dict) and isinstance(obj.get("model"), str):
            model = obj["model"]
        _add_with_usage(b, obj, lineno, i, model)
    return [b.build(model=model)]


def parse_anthropic(text: str, *, path: str | None = None) -> list[ImportedSession]:
    """Parse Anthropic Messages-format conversations into OpenAI-shape sessions.

    Raises :class:`ImportFormatError` (with the 1-based line) for malformed input;
    nothing is returned unless every session validates.
    """
    src = SourceText(text, path)
    is_lines, data = read_json(text, path)
    sessions = _from_lines(src, data) if is_lines else _from_document(src, data)
    if not any(s.messages for s in sessions):
        raise src.error("no messages found", 1)
    return sessions
