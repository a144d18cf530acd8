"""The agent tools over recall and expand: ``recall`` and ``expand_compaction`` as
function-calling schemas, and :func:`handle_tool_call`, which runs one call and always
answers JSON the model can read (an error included)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from ctxledger.analysis.compactions import find_compaction
from ctxledger.analysis.conversation import in_conversation
from ctxledger.analysis.expand import expand
from ctxledger.analysis.recall import recall
from ctxledger.errors import CtxLedgerError, InvalidInput, NotFound, UnknownCompaction
from ctxledger.integers import shown
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import JSON

RECALL_TOOL: JSON = {
    "type": "function",
    "function": {
        "name": "recall",
        "description": (
            "Search the full history of this conversation, including earlier messages that were "
            "compacted into a summary and are no longer in your context. Use it when the summary "
            "lacks a detail you need (an exact path, command, error line, value). Returns matching "
            "messages with a snippet; a hit with compacted_by can be read in full with expand_compaction."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": (
                        "Words to find, e.g. a file path or an error (at most 64 different "
                        "words; give the few that matter)."
                    ),
                },
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 8},
            },
            "required": ["query"],
        },
    },
}

EXPAND_TOOL: JSON = {
    "type": "function",
    "function": {
        "name": "expand_compaction",
        "description": (
            "Read the original messages that a compaction replaced with its summary. Give the "
            "compaction id from a recall hit (compacted_by). Long messages are cut to max_chars; "
            "page with offset and limit."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "compaction_id": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0, "default": 0},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20},
                "max_chars": {
                    "type": "integer",
                    "minimum": 100,
                    "maximum": 50_000,
                    "default": 4000,
                },
            },
            "required": ["compaction_id"],
        },
    },
}

_TOOL_LIMITS = {"limit": (1, 50), "offset": (0, 10**9), "max_chars": (100, 50_000)}


def _int_arg(args: Mapping[str, Any], name: str, default: int) -> int:
    value = args.get(name, default)
    low, high = _TOOL_LIMITS[name]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an integer from {low} to {high}, got {shown(value)}")
    return value


def _cut(message: JSON, max_chars: int) -> JSON:
    content = message.get("content")
    if isinstance(content, str) and len(content) > max_chars:
        return {
            **message,
            "content": content[:max_chars] + f"\n… [{len(content) - max_chars:,} more chars]",
        }
    return message


def _tool_recall(ledger: Ledger, session_id: str, args: Mapping[str, Any]) -> JSON:
    result = recall(ledger, session_id, str(args.get("query") or ""), _int_arg(args, "limit", 8))
    # (`more`: older messages match too; the agent may ask again with a larger limit)
    return {"match": result.match, "hits": msgspec.to_builtins(result.hits), "more": result.more}


def _tool_expand(ledger: Ledger, session_id: str, args: Mapping[str, Any]) -> JSON:
    offset, limit = _int_arg(args, "offset", 0), _int_arg(args, "limit", 20)
    max_chars = _int_arg(args, "max_chars", 4000)
    expansion = expand(ledger, str(args.get("compaction_id") or "").strip())
    sid = ledger.resolve(session_id)
    if expansion.session_id not in ledger.chains.chain(sid) and not in_conversation(
        ledger, sid, expansion.session_id, find_compaction(ledger, expansion.compaction_id).seq
    ):
        # an agent only reads its own conversation's history (with what it branched from)
        raise UnknownCompaction(
            f"no compaction {shown(expansion.compaction_id)} in this conversation"
        )
    page = expansion.messages[offset : offset + limit]
    end = offset + len(page)
    return {
        "compaction_id": expansion.compaction_id,
        "total": len(expansion.messages),
        "next_offset": end if end < len(expansion.messages) else None,
        "messages": [
            {
                "message_id": m.message_id,
                "origin": m.origin,
                "compaction_id": m.compaction_id,
                "message": _cut(m.message, max_chars),
            }
            for m in page
        ],
    }


_TOOLS = {"recall": _tool_recall, "expand_compaction": _tool_expand}


def tool_arguments(arguments_json: Any) -> dict[str, Any]:
    """A tool call's arguments as an object: JSON text, or the object a framework already
    decoded. InvalidInput (its message for the model to read) when they are no object."""
    try:
        if isinstance(arguments_json, Mapping):
            return dict(arguments_json)
        if not isinstance(arguments_json, str | bytes | bytearray | None):
            raise ValueError(f"expected a JSON string, got {type(arguments_json).__name__}")
        args = json.loads(arguments_json or "{}")
    except RecursionError:
        raise InvalidInput("arguments are not valid JSON: they nest too deeply") from None
    except ValueError as exc:
        raise InvalidInput(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(args, dict):
        raise InvalidInput("arguments must be a JSON object")
    return args


def handle_tool_call(ledger: Ledger, session_id: str, name: str, arguments_json: str) -> str:
    """Run a ``recall`` / ``expand_compaction`` tool call; the JSON string to return to the model.

    Bad arguments, unknown ids and unknown tools come back as ``{"error": ...}`` for the
    model to read and correct, rather than raising into the agent loop.
    """
    handler = _TOOLS.get(name) if isinstance(name, str) else None  # a list is unhashable
    if handler is None:
        return json.dumps({"error": f"unknown tool {shown(name)}; available: {', '.join(_TOOLS)}"})
    try:
        args = tool_arguments(arguments_json)
    except InvalidInput as exc:
        return json.dumps({"error": str(exc)})
    try:
        return json.dumps(handler(ledger, session_id, args), ensure_ascii=False)
    except (InvalidInput, NotFound) as exc:
        return json.dumps({"error": str(exc)})
    except CtxLedgerError as exc:
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"})


__all__ = ["EXPAND_TOOL", "RECALL_TOOL", "handle_tool_call", "tool_arguments"]
