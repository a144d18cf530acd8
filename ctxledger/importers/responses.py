"""Responses input items <-> chat messages, both ways, lossless for what the ledger stores.

The OpenAI Agents SDK and the proxy's ``/v1/responses`` face speak Responses input
items; the ledger stores OpenAI chat messages. (This is pure format conversion, so it
sits with the importers, below both ``integrations`` and ``server``; the old path
``ctxledger.integrations.responses`` re-exports it.) The mapping:

* a ``message`` item of role user / system / developer -> one chat message of role
  ``user`` / ``system`` / ``system``;
* a run of assistant-side items (``reasoning``, an assistant ``message``,
  ``function_call``s, and any item type chat has no place for) -> one ``assistant``
  message: the text is its ``content``, the calls its ``tool_calls`` (so parallel calls
  stay one assistant turn followed by their results, the shape the planner keeps
  together);
* ``function_call_output`` -> a ``tool`` message.

What chat has no field for (item ids, statuses, part types and annotations, reasoning
items whole, the original role) rides along in the message's ``responses_items`` key:
one stub per original item, in order, holding the item minus what was moved into chat
fields. Converting back fills each stub from the chat fields, so a message the ledger
carried unchanged comes back as the exact items it was made from, and a message the
ledger rewrote (a prune one-liner, truncated arguments, a merged summary, a stripped
orphan call) comes back with the rewrite applied. Messages the ledger wrote itself (the
summary) have no stubs and become plain easy-input messages. Stubs are extra keys: they
are stored, never counted as tokens nor shown to a summarizer.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxledger.errors import InvalidInput
from ctxledger.integers import shown
from ctxledger.messages import kind_of, refusal_text

JSON = dict[str, Any]

#: the chat-message key holding the per-item stubs
STUBS = "responses_items"
_TEXT_PARTS = frozenset({"input_text", "output_text"})
#: (a ``developer`` item was recorded as ``system`` before session 38: see server.history)
_OWN_ROLES = {"user": "user", "system": "system", "developer": "developer"}
#: output items besides ``function_call`` (which becomes ``tool_calls``) that ask the
#: client to run something and call the model again; they ride along as stubs
_CLIENT_CALLS = frozenset(
    {
        "custom_tool_call",
        "local_shell_call",
        "shell_call",
        "computer_call",
        "apply_patch_call",
        "mcp_approval_request",
    }
)


def asks_for_tools(message: Mapping[str, Any]) -> bool:
    """Whether a chat message asks the client to run tools: its ``tool_calls``, or (made
    from Responses items) a stub of an item that calls a client-side tool."""
    if message.get("tool_calls"):
        return True
    stubs = message.get(STUBS)
    return isinstance(stubs, list) and any(
        isinstance(stub, Mapping) and stub.get("type") in _CLIENT_CALLS for stub in stubs
    )


def _is_message(item: Mapping[str, Any]) -> bool:
    return item.get("type", "message") == "message" and "role" in item


def _part_to_chat(part: Any) -> tuple[Any, JSON | None]:
    """A content part as a chat part plus its stub (the part minus its text)."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    if isinstance(kind, str) and kind in _TEXT_PARTS and "text" in part:
        stub = {k: copy.deepcopy(v) for k, v in part.items() if k != "text"}
        return {"type": "text", "text": part["text"]}, stub
    return copy.deepcopy(part), None


def _content_to_chat(content: Any) -> tuple[Any, list[JSON | None] | None]:
    """Responses content (a string or parts) as chat content, plus part stubs when a list."""
    if not isinstance(content, list):
        return content, None
    pairs = [_part_to_chat(p) for p in content]
    parts = [p for p, _ in pairs]
    stubs = [s for _, s in pairs]
    if len(parts) == 1 and stubs[0] is not None:
        return parts[0]["text"], stubs  # one text part reads best as a plain string
    return parts, stubs


def _content_from_chat(content: Any, stubs: list[JSON | None] | None, text_type: str) -> Any:
    """Chat content back into Responses content, filling part stubs in order."""
    if stubs is None:
        if isinstance(content, list):
            return [_default_part(p, text_type) for p in content]
        return content
    chat_parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    out: list[Any] = []
    for i, part in enumerate(chat_parts or []):
        stub = stubs[i] if i < len(stubs) else None
        if stub is not None and isinstance(part, Mapping) and part.get("type") == "text":
            out.append({**copy.deepcopy(stub), "text": part["text"]})
        else:
            out.append(_default_part(part, text_type))
    return out


def _default_part(part: Any, text_type: str) -> Any:
    if isinstance(part, Mapping) and part.get("type") == "text":
        return {"type": text_type, "text": part.get("text", "")}
    return copy.deepcopy(part)


def _own_message(item: Mapping[str, Any]) -> JSON:
    role = item["role"]
    content, part_stubs = _content_to_chat(item.get("content", ""))
    stub = {k: copy.deepcopy(v) for k, v in item.items() if k != "content"}
    if part_stubs is not None:
        stub["parts"] = part_stubs
    return {"role": _OWN_ROLES[role], "content": content, STUBS: [stub]}


def _tool_message(item: Mapping[str, Any]) -> JSON:
    output = item.get("output", "")
    content, part_stubs = _content_to_chat(output)
    if not isinstance(content, str | list):
        content = str(content)
    stub = {k: copy.deepcopy(v) for k, v in item.items() if k != "output"}
    if part_stubs is not None:
        stub["parts"] = part_stubs
    return {"role": "tool", "tool_call_id": str(item["call_id"]), "content": content, STUBS: [stub]}


class _AssistantTurn:
    """Accumulates one assistant message from a run of assistant-side items."""

    def __init__(self) -> None:
        self.content: Any = None
        self.tool_calls: list[JSON] = []
        self.stubs: list[JSON] = []
        self.has_message = False

    def add(self, item: Mapping[str, Any]) -> None:
        kind = item.get("type")
        if _is_message(item):
            content, part_stubs = _content_to_chat(item.get("content", ""))
            self.content, self.has_message = content, True
            stub = {k: copy.deepcopy(v) for k, v in item.items() if k != "content"}
            if part_stubs is not None:
                stub["parts"] = part_stubs
            self.stubs.append(stub)
        elif kind == "function_call":
            self.tool_calls.append(
                {
                    "id": str(item["call_id"]),
                    "type": "function",
                    "function": {"name": item["name"], "arguments": item.get("arguments", "")},
                }
            )
            drop = ("name", "arguments")
            self.stubs.append({k: copy.deepcopy(v) for k, v in item.items() if k not in drop})
        else:  # reasoning and item types chat has no field for: kept whole
            self.stubs.append(copy.deepcopy(dict(item)))

    def message(self) -> JSON:
        msg: JSON = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        elif self.content is None:
            msg["content"] = ""  # reasoning alone: chat needs content or calls
        msg[STUBS] = self.stubs
        return msg


def _check_item(item: Any, index: int) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise InvalidInput(f"item {index} must be an object, got {type(item).__name__}")
    kind = item.get("type")
    if _is_message(item):
        if item["role"] not in (*_OWN_ROLES, "assistant"):
            raise InvalidInput(f"item {index}: unknown message role {shown(item['role'])}")
    elif kind in ("function_call", "function_call_output"):
        if not isinstance(item.get("call_id"), str) or not item["call_id"]:
            raise InvalidInput(f"item {index}: {kind} without a string call_id")
        if kind == "function_call" and not isinstance(item.get("name"), str):
            raise InvalidInput(f"item {index}: function_call without a string name")
        arguments = item.get("arguments", "") if kind == "function_call" else ""
        if not isinstance(arguments, str):  # (JSON text; an object was forwarded unrecorded)
            got = kind_of(arguments)
            raise InvalidInput(f"item {index}: function_call arguments must be a string, got {got}")
    elif not isinstance(kind, str):
        raise InvalidInput(f"item {index} has no 'type' and is not a role message")
    return item


def items_to_messages(items: Iterable[Any]) -> list[JSON]:
    """Responses input items -> chat messages (see the module docstring for the mapping)."""
    out: list[JSON] = []
    turn: _AssistantTurn | None = None
    for index, raw in enumerate(items):
        item = _check_item(raw, index)
        kind = item.get("type")
        own = _is_message(item) and item["role"] != "assistant"
        if own or kind == "function_call_output":
            if turn is not None:
                out.append(turn.message())
                turn = None
            out.append(_own_message(item) if own else _tool_message(item))
            continue
        if turn is None or (_is_message(item) and turn.has_message):
            if turn is not None:
                out.append(turn.message())
            turn = _AssistantTurn()
        turn.add(item)
    if turn is not None:
        out.append(turn.message())
    return out


def _assistant_items(msg: Mapping[str, Any], stubs: Sequence[Mapping[str, Any]]) -> list[JSON]:
    calls = {c["id"]: c for c in msg.get("tool_calls") or ()}
    used: set[str] = set()
    out: list[JSON] = []
    content = msg.get("content")
    has_text = content not in (None, "", [])
    text_done = False
    for stub in stubs:
        if _is_message(stub):
            if content is None:
                continue
            parts = stub.get("parts")
            item = {k: copy.deepcopy(v) for k, v in stub.items() if k != "parts"}
            item["content"] = _content_from_chat(content, parts, "output_text")
            out.append(item)
            text_done = True
        elif stub.get("type") == "function_call":
            call = calls.get(str(stub.get("call_id")))
            if call is None:
                continue  # the ledger stripped this call (its result was compacted away)
            used.add(call["id"])
            fn = call["function"]
            out.append(
                {**copy.deepcopy(dict(stub)), "name": fn["name"], "arguments": fn["arguments"]}
            )
        else:
            out.append(copy.deepcopy(dict(stub)))
    if has_text and not text_done:  # text the ledger added (a merged summary)
        text = {"role": "assistant", "content": _content_from_chat(content, None, "output_text")}
        out.insert(0, text)
    refusal = refusal_text(msg)
    if not has_text and not text_done and refusal:
        # a refusal recorded by a chat face: the Responses output message says it so
        out.insert(0, {"role": "assistant", "content": [{"type": "refusal", "refusal": refusal}]})
    for call_id, call in calls.items():
        if call_id not in used:
            fn = call["function"]
            out.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": fn["name"],
                    "arguments": fn["arguments"],
                }
            )
    return out


def message_to_items(msg: Mapping[str, Any]) -> list[JSON]:
    """One chat message -> the Responses input items it stands for."""
    role = msg.get("role")
    raw = msg.get(STUBS)
    # stubs this module wrote are a list of objects; anything else (a chat client's own
    # key of that name, kept in the log) is ignored rather than failing every later turn
    stubs: list[Mapping[str, Any]] = (
        [s for s in raw if isinstance(s, Mapping)] if isinstance(raw, list) else []
    )
    content = msg.get("content")
    if role == "assistant":
        return _assistant_items(msg, stubs)
    if role == "tool":
        stub: JSON = dict(stubs[0]) if stubs else {"type": "function_call_output"}
        parts: list[JSON | None] | None = stub.pop("parts", None)
        stub["call_id"] = msg["tool_call_id"]
        stub["output"] = _content_from_chat(content, parts, "input_text")
        return [copy.deepcopy(stub)]
    if stubs:
        stub = dict(stubs[0])
        parts = stub.pop("parts", None)
        text_type = "output_text" if stub.get("role") == "assistant" else "input_text"
        return [{**copy.deepcopy(stub), "content": _content_from_chat(content, parts, text_type)}]
    return [{"role": role, "content": _content_from_chat(content, None, "input_text")}]


def messages_to_items(messages: Iterable[Mapping[str, Any]]) -> list[JSON]:
    """Chat messages -> Responses input items (the inverse of :func:`items_to_messages`)."""
    return [item for msg in messages for item in message_to_items(msg)]


__all__ = [
    "STUBS",
    "asks_for_tools",
    "items_to_messages",
    "message_to_items",
    "messages_to_items",
]
