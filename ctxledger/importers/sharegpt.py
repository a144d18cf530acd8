"""ShareGPT trajectories -> ``ImportedSession`` (OpenAI message shape).

A record is ``{"conversations": [{"from": ..., "value": ...}, ...], ...}``; a file is
one record, a JSON list of records, a bare list of turns, or JSONL (one record per
line). Roles: ``system``, ``human`` (``user``), ``gpt`` (``assistant``), ``tool``
(``observation``). The first system turn becomes the system prompt.

Hermes-style tool use is recognised: a gpt turn may hold ``<think>...</think>``
(-> ``reasoning_content``) and ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``
blocks (-> ``tool_calls``; ids synthesized when absent); a tool turn holds one or
more ``<tool_response>{"tool_call_id": ..., "name": ..., "content": ...}</tool_response>``
blocks (or plain text) answering the pending calls of the preceding gpt turn. Extra
turn fields stay on the message; extra record fields go to the session extras.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from ctxledger.errors import ImportFormatError
from ctxledger.importers.common import (
    Origin,
    SessionBuilder,
    SourceText,
    dump_arguments,
    read_json,
    source_name,
    synth_call_id,
    type_name,
    unique_key,
)
from ctxledger.importers.model import ImportedSession
from ctxledger.integers import shown

THINK_RE = re.compile(r"\A\s*<think>(.*?)</think>", re.S)

#: ShareGPT ``from`` values -> OpenAI roles
ROLE_OF = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "tool": "tool",
    "observation": "tool",
}


def blocks(text: str, tag: str) -> list[tuple[int, int, str]]:
    """(start, end, inner text) of each ``<tag>...</tag>``, in order: what
    ``re.finditer(r"<tag>(.*?)</tag>", re.S)`` finds, in linear time (that pattern
    rescans the rest of the text from every opening tag without a closing one: a turn
    of 20,000 ``<tool_call>`` took 24 s)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    found: list[tuple[int, int, str]] = []
    pos = 0
    while (start := text.find(opening, pos)) >= 0:
        inner = start + len(opening)
        end = text.find(closing, inner)
        if end < 0:
            break  # no closing tag after this opening one, so none after a later one
        pos = end + len(closing)
        found.append((start, pos, text[inner:end]))
    return found


def has_tool_call(value: str) -> bool:
    return "<tool_call>" in value and bool(blocks(value, "tool_call"))


class _Pending:
    """The calls of the latest gpt turn that have no response yet."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], bool]] = []  # (call, id was synthesized)

    def take(self, call_id: str | None, name: str | None) -> tuple[dict[str, Any], bool] | None:
        for pair in self.calls:
            if call_id is not None and pair[0]["id"] == call_id:
                self.calls.remove(pair)
                return pair
        for pair in self.calls:
            if name is not None and pair[0]["function"]["name"] == name:
                self.calls.remove(pair)
                return pair
        return self.calls.pop(0) if self.calls else None


def _decode_object(raw: str) -> dict[str, Any] | None:
    try:
        value = msgspec.json.decode(raw.strip())
    except (msgspec.DecodeError, RecursionError):  # nested too deep: not a call either
        return None
    return value if isinstance(value, dict) else None


#: how many calls of the assistant turns so far hold each id (kept as calls are added and
#: renamed: reading every message again for each tool response was quadratic)
_Issued = collections.Counter[str]


def _gpt_turn(
    b: SessionBuilder, value: str, extras: dict[str, Any], i: int, origin: Origin, issued: _Issued
) -> _Pending:
    think = THINK_RE.match(value)
    rest = value[think.end() :] if think else value
    pending = _Pending()
    calls: list[dict[str, Any]] = []
    found = blocks(rest, "tool_call")
    for j, (_, _, raw) in enumerate(found):
        obj = _decode_object(raw)
        if obj is None or not isinstance(obj.get("name"), str) or not obj["name"]:
            raise b.src.error(
                f"turn {i}: <tool_call> {j} is not a JSON object with a 'name'", origin
            )
        args = obj.get("arguments", obj.get("parameters", {}))
        synthesized = not (isinstance(obj.get("id"), str) and obj["id"])
        call_id = synth_call_id(b.key, i, j) if synthesized else obj["id"]
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": obj["name"], "arguments": dump_arguments(args)},
        }
        calls.append(call)
        pending.calls.append((call, synthesized))
    text = _without(rest, found).strip() if (think or calls) else value
    msg: dict[str, Any] = {
        **extras,
        "role": "assistant",
        "content": text if text or not calls else None,
    }
    if calls:
        msg["tool_calls"] = calls
    if think:
        msg["reasoning_content"] = think.group(1).strip()
    b.add(msg, origin)
    _issue(issued, msg.get("tool_calls"))
    return pending


def _issue(issued: _Issued, calls: Any) -> None:
    """Count the ids of an assistant turn's `calls`. A turn's other fields are kept as
    they came (a ``tool_calls`` of text too): one of another shape issues nothing, the
    message check at the end names it."""
    if isinstance(calls, list):
        issued.update(
            c["id"] for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str)
        )


def _without(text: str, found: list[tuple[int, int, str]]) -> str:
    """`text` without the `found` blocks."""
    pieces, done = [], 0
    for start, end, _ in found:
        pieces.append(text[done:start])
        done = end
    return "".join(pieces) + text[done:]


#: (call id, name, content, other fields, whether it is a JSON object) of a response
_Response = tuple[str | None, str | None, Any, dict[str, Any], bool]


def _responses(value: str) -> list[_Response]:
    """The responses (:data:`_Response`) in a tool turn."""
    found = [raw for _, _, raw in blocks(value, "tool_response")]
    if not found:
        return [(None, None, value, {}, False)]
    out: list[_Response] = []
    for raw in found:
        obj = _decode_object(raw)
        if obj is None or "content" not in obj:
            out.append((None, None, raw.strip(), {}, False))
            continue
        cid = obj.get("tool_call_id")
        name = obj.get("name")
        rest = {k: v for k, v in obj.items() if k not in ("tool_call_id", "name", "content")}
        out.append(
            (
                cid if isinstance(cid, str) and cid else None,
                name if isinstance(name, str) else None,
                obj["content"],
                rest,
                True,
            )
        )
    return out


def _tool_turn(
    b: SessionBuilder,
    value: str,
    extras: dict[str, Any],
    pending: _Pending,
    i: int,
    origin: Origin,
    issued: _Issued,
) -> None:
    for call_id, name, content, rest, structured in _responses(value):
        pair = pending.take(call_id, name)
        if pair is None:
            raise b.src.error(
                f"turn {i}: a tool response with no pending <tool_call> before it", origin
            )
        call, synthesized = pair
        if call_id is not None and call["id"] != call_id:
            if synthesized and not issued[call_id]:
                issued[call["id"]] -= 1
                issued[call_id] += 1
                call["id"] = call_id  # the response knows the real id the call lacked
            else:
                b.warn("tool responses whose tool_call_id matched no call were paired by position")
        msg: dict[str, Any] = {**extras, **rest, "role": "tool", "tool_call_id": call["id"]}
        msg["content"] = (
            content if isinstance(content, str) else msgspec.json.encode(content).decode()
        )
        if name is not None or not structured:
            # text alone is named after its call; a JSON response keeps what it says:
            # an export, which names no response its message did not, imports as it was
            msg["name"] = name if name is not None else call["function"]["name"]
        b.add(msg, origin)


def add_turns(
    b: SessionBuilder, turns: Any, origin_of: Callable[[int], Origin], where: Origin
) -> None:
    """Convert ShareGPT turns into `b` (first system turn -> system prompt)."""
    if not isinstance(turns, list):
        raise b.src.error(f"'conversations' must be a list of turns, got {type_name(turns)}", where)
    pending, issued = _Pending(), _Issued()
    for i, turn in enumerate(turns):
        origin = origin_of(i)
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise b.src.error(f"turn {i} must be an object with string 'from' and 'value'", origin)
        role = ROLE_OF.get(str(turn.get("from")))
        if role is None:
            raise b.src.error(
                f"turn {i}: unknown 'from' {shown(turn.get('from'))}; expected system, human, gpt or tool",
                origin,
            )
        value: str = turn["value"]
        extras = {k: v for k, v in turn.items() if k not in ("from", "value")}
        if role == "system" and not b.messages and b.system_prompt is None:
            b.system_prompt = value
            if "ctxledger_role" in extras:  # (see importers.export)
                b.system_role = b.checked_role(extras.pop("ctxledger_role"), origin)
            if extras:
                b.warn("fields of the system turn other than its value were not kept")
        elif role in ("system", "user"):
            b.add({**extras, "role": role, "content": value}, origin)
        elif role == "assistant":
            pending = _gpt_turn(b, value, extras, i, origin, issued)
        else:
            _tool_turn(b, value, extras, pending, i, origin, issued)


def turns_to_messages(
    turns: Sequence[Mapping[str, Any]], key: str = "turns"
) -> list[dict[str, Any]]:
    """ShareGPT turns as OpenAI messages (a system turn first stays a system message).

    Tool calls and responses are parsed when well-formed; otherwise every turn maps
    to a plain message (tool output as user text) so a summarizer still sees it all.
    """
    b = SessionBuilder(SourceText("", None), key, "sharegpt")
    try:
        add_turns(b, [dict(t) for t in turns], lambda i: None, None)
    except ImportFormatError:
        plain = {"system": "system", "user": "user", "assistant": "assistant", "tool": "user"}
        return [
            {
                "role": plain[ROLE_OF.get(str(t.get("from")), "user")],
                "content": str(t.get("value", "")),
            }
            for t in turns
        ]
    head = [{"role": "system", "content": b.system_prompt}] if b.system_prompt is not None else []
    return head + b.messages


_RECORD_FIELDS = ("conversations", "tools")


def _record(
    src: SourceText, rec: Any, key: str, prefix: tuple[str | int, ...] | int
) -> ImportedSession:
    def origin(*rest: str | int) -> Origin:
        return prefix if isinstance(prefix, int) else (*prefix, *rest)

    b = SessionBuilder(src, key, "sharegpt")
    if isinstance(rec, list):
        add_turns(b, rec, lambda i: origin(i), origin())
        return b.build()
    if not isinstance(rec, dict) or "conversations" not in rec:
        raise src.error(
            "expected a record with 'conversations' (a list of {from, value} turns)", origin()
        )
    add_turns(
        b, rec["conversations"], lambda i: origin("conversations", i), origin("conversations")
    )
    tools = rec.get("tools")
    if isinstance(tools, str):
        tools = msgspec.json.decode(tools) if _decode_list(tools) else tools
    extras = {k: v for k, v in rec.items() if k not in _RECORD_FIELDS}
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
    ):
        extras["tools"] = tools
        tools = None
    return b.build(tools=tools or [], extras=extras)


def _decode_list(text: str) -> bool:
    try:
        return isinstance(msgspec.json.decode(text), list)
    except msgspec.DecodeError:
        return False


def _key(rec: Any, default: str, seen: set[str]) -> str:
    value = rec.get("id") if isinstance(rec, dict) else None
    ok = isinstance(value, str | int) and not isinstance(value, bool) and str(value)
    return unique_key(seen, str(value) if ok else default)


def parse_sharegpt(text: str, *, path: str | None = None) -> list[ImportedSession]:
    """Parse ShareGPT records (one session per record).

    Raises :class:`ImportFormatError` (with the 1-based line) for malformed input;
    nothing is returned unless every session validates.
    """
    src = SourceText(text, path)
    base = source_name(src.path)
    seen: set[str] = set()
    is_lines, data = read_json(text, path)
    if is_lines:
        sessions = [_record(src, rec, _key(rec, f"{base}:{n}", seen), n) for n, rec in data]
    elif (
        isinstance(data, list)
        and data
        and all(isinstance(el, dict) and "from" in el for el in data)
    ):
        sessions = [_record(src, data, base, ())]
    elif isinstance(data, list):
        sessions = [
            _record(src, rec, _key(rec, f"{base}#{i + 1}", seen), (i,))
            for i, rec in enumerate(data)
        ]
    else:
        sessions = [_record(src, data, _key(data, base, seen), ())]
    if not any(s.messages for s in sessions):
        raise src.error("no turns found", 1)
    return sessions
