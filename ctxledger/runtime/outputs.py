"""The tool-output budget applied to a batch of messages about to be appended (HERMES_SPEC §6).

:mod:`~ctxledger.runtime.toolbudget` decides from plain numbers; this module gathers
those numbers from a session's live view: the tool names of calls issued in earlier
appends, and the results an assistant turn already has in the log (an agent often
appends each result as it arrives, and the per-turn budget is about the whole turn,
not one append). It returns what to persist and the preview block to show instead;
the service appends the events and blobs atomically with the messages.

Blobs are keyed by the sha256 of the output, never by the model's tool call id, so
no id ever becomes a path or a key (the id only appears JSON-escaped in the block).
Pure: reads a projection, writes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ctxledger.messages import JSON, content_text
from ctxledger.projections.transcript import TranscriptProjection
from ctxledger.runtime.toolbudget import (
    PersistReason,
    ToolBudget,
    ToolResult,
    plan_persistence,
    preview_block,
)


class PlannedOutput(msgspec.Struct, frozen=True, kw_only=True):
    """Store message `index`'s output under `ref`; the live window shows `block`."""

    index: int
    tool_call_id: str
    tool_name: str
    ref: str
    block: str
    chars: int
    reason: PersistReason


class _Issuer(msgspec.Struct, frozen=True):
    """Who issued a call: the tool's name and the turn (assistant message) it belongs to."""

    name: str
    turn: int


def _calls(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(call id, tool name) of an assistant message's tool calls (validated shape)."""
    return [(str(c["id"]), str(c["function"]["name"])) for c in message.get("tool_calls") or ()]


def _earlier_turns(
    transcript: TranscriptProjection, session_id: str, wanted: set[str]
) -> tuple[dict[str, _Issuer], list[ToolResult]]:
    """Issuers of `wanted` call ids in the live view, and the results their turns already have.

    Walks back from the end and stops once every wanted call is found, so an append
    answering the latest assistant message reads a handful of messages, whatever the
    session's length. Turns found here get negative keys (batch turns use indices).
    """
    issuers: dict[str, _Issuer] = {}
    seen_results: list[tuple[str, str]] = []  # (call id, shown content) after the walk point
    earlier: list[ToolResult] = []
    live = transcript.session(session_id).live
    remaining = set(wanted)
    for back in range(1, len(live) + 1):
        if not remaining:
            break
        message = transcript.stored(live[-back]).message
        role = message.get("role")
        if role == "tool":
            seen_results.append((str(message.get("tool_call_id")), content_text(message)))
        elif role == "assistant" and message.get("tool_calls"):
            calls = dict(_calls(message))
            if not remaining & calls.keys():
                continue
            turn = -back
            for call_id, name in calls.items():
                issuers[call_id] = _Issuer(name, turn)
            remaining -= calls.keys()
            for call_id, content in seen_results:
                if call_id in calls:
                    # already in the log: counts toward the turn's total, never re-persisted here
                    earlier.append(
                        ToolResult(
                            index=-1 - len(earlier),
                            tool_call_id=call_id,
                            tool_name=calls[call_id],
                            content=content,
                            already_persisted=True,
                            assistant_index=turn,
                        )
                    )
    return issuers, earlier


def _batch_results(messages: Sequence[JSON], issuers: dict[str, _Issuer]) -> list[ToolResult]:
    results: list[ToolResult] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            for call_id, name in _calls(message):
                issuers[call_id] = _Issuer(name, i)
        elif role == "tool":
            call_id = str(message["tool_call_id"])
            issuer = issuers.get(call_id)
            content = message.get("content")
            results.append(
                ToolResult(
                    index=i,
                    tool_call_id=call_id,
                    tool_name=issuer.name if issuer is not None else "unknown",
                    content=content if isinstance(content, str) else content_text(message),
                    # only string outputs can be replaced by a text block; parts still count
                    already_persisted=not isinstance(content, str),
                    assistant_index=issuer.turn if issuer is not None else None,
                )
            )
    return results


def plan_outputs(
    transcript: TranscriptProjection, session_id: str, messages: Sequence[JSON], budget: ToolBudget
) -> tuple[list[PlannedOutput], dict[str, bytes]]:
    """Which tool results of `messages` (validated, about to be appended) to store out of the context.

    Returns the plan (by message index) and the blobs to store (sha256 hex -> bytes).
    """
    issued_here = {
        call_id for m in messages if m.get("role") == "assistant" for call_id, _ in _calls(m)
    }
    wanted = {
        str(m["tool_call_id"])
        for m in messages
        if m.get("role") == "tool" and m["tool_call_id"] not in issued_here
    }
    issuers, earlier = _earlier_turns(transcript, session_id, wanted) if wanted else ({}, [])
    results = _batch_results(messages, issuers)
    if not results:
        return [], {}
    planned: list[PlannedOutput] = []
    blobs: dict[str, bytes] = {}
    for decision in plan_persistence([*earlier, *results], budget):
        if decision.index < 0:
            continue  # an earlier result (never chosen: marked already persisted)
        content = str(messages[decision.index]["content"])
        data = content.encode("utf-8")
        ref = hashlib.sha256(data).hexdigest()
        blobs[ref] = data
        block = preview_block(
            content, ref=ref, tool_call_id=decision.tool_call_id, preview_chars=budget.preview_chars
        )
        planned.append(
            PlannedOutput(
                index=decision.index,
                tool_call_id=decision.tool_call_id,
                tool_name=decision.tool_name,
                ref=ref,
                block=block,
                chars=len(content),
                reason=decision.reason,
            )
        )
    return planned, blobs


__all__ = ["PlannedOutput", "plan_outputs"]
