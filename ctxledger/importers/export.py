"""Exporters: a system prompt and OpenAI-shape messages -> a file in another format.

* ``openai``: ``{"messages": [...]}`` with the system message first (a prompt given
  back as ``developer``: a leading developer message and ``"system_role": "developer"``,
  which the anthropic export also writes beside ``system``, and sharegpt as a
  ``ctxledger_role`` field of its system turn);
* ``anthropic``: ``{"system": ..., "messages": [...]}`` with content blocks; tool
  messages become ``tool_result`` blocks of one user message (merged with the user
  text that follows them), tool calls become ``tool_use`` blocks, reasoning becomes
  ``thinking`` blocks; a mid-conversation system (or developer) message becomes a
  user message marked ``"ctxledger_role": "system"`` (``"developer"``);
* ``sharegpt``: ``{"conversations": [{from, value}]}`` with roles system / human /
  gpt / tool, tool calls as ``<tool_call>`` JSON, results as ``<tool_response>`` JSON
  (consecutive results share one tool turn) and reasoning as ``<think>``.

Provider extras on a message ride along (as message fields, block fields or turn
fields), so importing an export of the same format gives the same messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from ctxledger.errors import InvalidInput
from ctxledger.importers.model import ImportedSession
from ctxledger.integers import shown
from ctxledger.limits import json_depth, too_deep
from ctxledger.messages import INSTRUCTION_ROLES, check_system_role, content_text

EXPORT_FORMATS = ("openai", "anthropic", "sharegpt")

Message = Mapping[str, Any]


def _load_arguments(arguments: Any) -> Any:
    """Tool-call arguments as a JSON object for formats that want one (non-JSON text wrapped)."""
    if not isinstance(arguments, str):
        return arguments
    if too_deep(arguments):  # stored before the depth limit existed: never recurse into it
        return {"_raw_arguments": arguments}
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return {"_raw_arguments": arguments}
    # NaN, Infinity and 1e999 parse, but no JSON file holds them: the text, as sent
    plain = isinstance(value, dict) and json_depth(value)[1]
    return value if plain else {"_raw_arguments": arguments}


def _extras(message: Message, known: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in known}


# --------------------------------------------------------------------------- openai


def _openai(
    system_prompt: str | None, messages: Sequence[Message], system_role: str = "system"
) -> dict[str, Any]:
    head = [{"role": system_role, "content": system_prompt}] if system_prompt is not None else []
    return {
        **_role_field(system_prompt, system_role),
        "messages": head + [dict(m) for m in messages],
    }


def _role_field(system_prompt: str | None, role: str) -> dict[str, Any]:
    """The conversation's ``system_role`` field: only for a prompt given in another role
    than ``system`` (its import reads the leading message in that role as the prompt)."""
    return {"system_role": role} if system_prompt is not None and role != "system" else {}


# --------------------------------------------------------------------------- anthropic

_ASSISTANT_KNOWN = frozenset(
    {"role", "content", "tool_calls", "reasoning_content", "thinking_blocks"}
)
_TOOL_KNOWN = frozenset({"role", "content", "tool_call_id", "is_error"})
_USER_KNOWN = frozenset({"role", "content"})


def _block(part: Any) -> Any:
    """An OpenAI content part as an Anthropic block (images converted back)."""
    if not isinstance(part, Mapping) or part.get("type") != "image_url":
        return dict(part) if isinstance(part, Mapping) else part
    image = part.get("image_url")
    # the object form, or the bare-string form some clients send; anything else (a
    # number, a url that is not text) is data the export cannot convert: kept as it is
    url = image.get("url") if isinstance(image, Mapping) else image
    if not isinstance(url, str):
        return dict(part)
    extras = {k: v for k, v in part.items() if k not in ("type", "image_url")}
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media, "data": data},
            **extras,
        }
    return {"type": "image", "source": {"type": "url", "url": url}, **extras}


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [_block(p) for p in content]
    return []


def _anthropic_assistant(m: Message) -> dict[str, Any]:
    blocks: list[Any] = []
    if isinstance(m.get("thinking_blocks"), list):
        blocks.extend(m["thinking_blocks"])
    elif isinstance(m.get("reasoning_content"), str) and m["reasoning_content"]:
        blocks.append({"type": "thinking", "thinking": m["reasoning_content"]})
    content = m.get("content")
    if not (isinstance(content, str) and not content):
        blocks.extend(_blocks(content))
    for call in m.get("tool_calls") or ():
        fn = call.get("function") or {}
        extras = {k: v for k, v in call.items() if k not in ("id", "type", "function")}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": fn.get("name"),
                "input": _load_arguments(fn.get("arguments")),
                **extras,
            }
        )
    return {**_extras(m, _ASSISTANT_KNOWN), "role": "assistant", "content": blocks}


def _tool_result(m: Message) -> dict[str, Any]:
    content = m.get("content")
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.get("tool_call_id")}
    block["content"] = (
        [_block(p) for p in content]
        if isinstance(content, list)
        else ("" if content is None else content)
    )
    if m.get("is_error"):
        block["is_error"] = True
    block.update(_extras(m, _TOOL_KNOWN))
    return block


def _anthropic(
    system_prompt: str | None, messages: Sequence[Message], system_role: str = "system"
) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            results.append(_tool_result(m))
            continue
        if role == "user" and results:
            out.append(
                {
                    **_extras(m, _USER_KNOWN),
                    "role": "user",
                    "content": results + _blocks(m.get("content")),
                }
            )
            results = []
            continue
        if results:
            out.append({"role": "user", "content": results})
            results = []
        if role == "assistant":
            out.append(_anthropic_assistant(m))
        elif role in INSTRUCTION_ROLES:
            out.append({"role": "user", "content": content_text(m), "ctxledger_role": role})
        else:
            content = m.get("content")
            out.append(
                {
                    **_extras(m, _USER_KNOWN),
                    "role": "user",
                    "content": content if isinstance(content, str) else _blocks(content),
                }
            )
    if results:
        out.append({"role": "user", "content": results})
    doc: dict[str, Any] = {} if system_prompt is None else {"system": system_prompt}
    doc.update(_role_field(system_prompt, system_role))
    doc["messages"] = out
    return doc


# --------------------------------------------------------------------------- sharegpt

_FROM = {"system": "system", "developer": "system", "user": "human", "assistant": "gpt"}
_GPT_KNOWN = frozenset({"role", "content", "tool_calls", "reasoning_content"})
_TURN_KNOWN = frozenset({"role", "content"})
_RESPONSE_KNOWN = frozenset({"role", "content", "tool_call_id", "name"})


def _gpt_value(m: Message) -> str:
    pieces: list[str] = []
    reasoning = m.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        pieces.append(f"<think>\n{reasoning}\n</think>")
    text = content_text(m)
    if text:
        pieces.append(text)
    for call in m.get("tool_calls") or ():
        fn = call.get("function") or {}
        payload = {
            "id": call.get("id"),
            "name": fn.get("name"),
            "arguments": _load_arguments(fn.get("arguments")),
        }
        payload["arguments"] = _unwrap_raw(payload["arguments"])
        pieces.append(f"<tool_call>\n{json.dumps(payload, ensure_ascii=False)}\n</tool_call>")
    return "\n".join(pieces)


def _unwrap_raw(args: Any) -> Any:
    if isinstance(args, dict) and set(args) == {"_raw_arguments"}:
        return args["_raw_arguments"]
    return args


def _tool_response(m: Message) -> str:
    content = m.get("content")
    payload: dict[str, Any] = {"tool_call_id": m.get("tool_call_id")}
    if isinstance(m.get("name"), str):
        payload["name"] = m["name"]
    payload["content"] = content if isinstance(content, str) else content_text(m)
    payload.update(_extras(m, _RESPONSE_KNOWN))
    return f"<tool_response>\n{json.dumps(payload, ensure_ascii=False)}\n</tool_response>"


def _sharegpt(
    system_prompt: str | None, messages: Sequence[Message], system_role: str = "system"
) -> dict[str, Any]:
    turns: list[dict[str, Any]] = []
    if system_prompt is not None:  # (the format has one system role: another one is marked)
        turns.append({"from": "system", "value": system_prompt, **_role_mark(system_role)})
    i = 0
    while i < len(messages):
        m = messages[i]
        role = m.get("role")
        if role == "tool":
            j = i
            while j < len(messages) and messages[j].get("role") == "tool":
                j += 1
            turns.append(
                {"from": "tool", "value": "\n".join(_tool_response(t) for t in messages[i:j])}
            )
            i = j
            continue
        if role == "assistant":
            turns.append({**_extras(m, _GPT_KNOWN), "from": "gpt", "value": _gpt_value(m)})
        else:
            turns.append(
                {
                    **_extras(m, _TURN_KNOWN),
                    "from": _FROM.get(str(role), "human"),
                    "value": content_text(m),
                }
            )
        i += 1
    return {"conversations": turns}


def _role_mark(role: str) -> dict[str, str]:
    return {} if role == "system" else {"ctxledger_role": role}


_EXPORTERS: dict[str, Callable[[str | None, Sequence[Message], str], dict[str, Any]]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "sharegpt": _sharegpt,
}


def export_messages(
    system_prompt: str | None, messages: Sequence[Message], format: str, system_role: str = "system"
) -> str:
    """The messages (and system prompt, given back in `system_role`) as one JSON document
    in `format`, newline-terminated."""
    exporter = _EXPORTERS.get(format)
    if exporter is None:
        raise InvalidInput(
            f"unknown export format {shown(format)}; expected one of {', '.join(EXPORT_FORMATS)}"
        )
    doc = exporter(system_prompt, messages, check_system_role(system_role))
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"


def export_session(session: ImportedSession, format: str) -> str:
    """Export an imported session (its system prompt and messages)."""
    return export_messages(session.system_prompt, session.messages, format, session.system_role)
