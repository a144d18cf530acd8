"""A view as Hermes Agent will hold it once its agent has repaired it: before each model
call Hermes merges adjacent assistant messages, drops tool results that answer no call
of the assistant message before them, and merges adjacent user texts, in its own list,
which it hands back at the next hand-over. The engine hands Hermes that form and keeps,
per message, which of the ledger's messages it came from (:func:`repaired`), to
read a head of Hermes's list against the ledger's messages; and it leaves out of an
append a result whose call another writer withdrew (:func:`answerable`). The rules are
read from Hermes's behaviour (hermes-agent 0.19.0, ``repair_message_sequence``); the
code is the project's own. Loads without Hermes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxledger.integers import shown

if TYPE_CHECKING:
    from ctxledger.runtime.service import ContextService

JSON = dict[str, Any]
logger = logging.getLogger(__name__)


class Held(NamedTuple):
    """One message as Hermes holds it, and the indices of the messages it came from."""

    message: Any
    sources: tuple[int, ...]


def _interim(message: JSON) -> bool:
    """An interim assistant turn Hermes keeps apart (a Responses continuation)."""
    return bool(
        message.get("codex_reasoning_items")
        or message.get("codex_message_items")
        or message.get("finish_reason") == "incomplete"
    )


def _provisional(message: JSON) -> bool:
    """An assistant candidate the next assistant message replaces, not joins."""
    return message.get("finish_reason") in {"verification_required", "verify_hook_continue"}


def _assistants_joined(first: JSON, second: JSON) -> JSON:
    """Two adjacent assistant messages as one: their calls in order, their texts on
    separate lines (trimmed, empties left out; a list of blocks is kept as it is), the
    first's reasoning unless it has none; every other key the first's."""
    joined = dict(first)
    calls = [*_calls(first), *_calls(second)]
    if calls:
        joined["tool_calls"] = calls
    before, after = first.get("content"), second.get("content")
    if isinstance(before, str) and isinstance(after, str):
        joined["content"] = "\n".join(t for t in (before.strip(), after.strip()) if t)
    elif not before and after is not None:
        joined["content"] = after
    if not first.get("reasoning_content") and second.get("reasoning_content"):
        joined["reasoning_content"] = second["reasoning_content"]
    return joined


def _pair(held: list[Held], message: Any, role: str) -> JSON | None:
    """The last held message when it and `message` are dicts of `role` both."""
    last = held[-1].message if held else None
    if not (isinstance(message, dict) and isinstance(last, dict)):
        return None
    return last if message.get("role") == last.get("role") == role else None


def _merge_assistants(items: list[Held]) -> list[Held]:
    held: list[Held] = []
    for item in items:
        message = item.message
        last = _pair(held, message, "assistant")
        if last is None or _interim(message) or _interim(last):
            held.append(item)
            continue
        merged = message if _provisional(last) else _assistants_joined(last, message)
        held[-1] = Held(merged, (*held[-1].sources, *item.sources))
    return held


def _calls(message: JSON) -> list[Any]:
    """A message's ``tool_calls`` when they are a list (else none: any shape a stored or
    handed message may have is read without raising)."""
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


def _call_ids(message: JSON, keys: tuple[str, ...] = ("id", "call_id")) -> set[str]:
    """The ids of a message's calls under `keys`: non-empty strings only (the ledger
    checks ``id``; a stored ``call_id`` may be any JSON)."""
    return {
        call[key]
        for call in _calls(message)
        if isinstance(call, dict)
        for key in keys
        if isinstance(call.get(key), str) and call[key]
    }


def _drop_unanswerable(held: list[Held]) -> list[Held]:
    """Tool results whose id is not an open call of the assistant message before them
    (a user message closes them; a call is answered once) are dropped."""
    kept: list[Held] = []
    open_calls: set[str] = set()
    for item in held:
        message = item.message
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            open_calls = _call_ids(message)
        elif role == "tool":
            call = message.get("tool_call_id")
            if not isinstance(call, str) or call not in open_calls:
                continue
            open_calls.discard(call)
        elif role == "user":
            open_calls = set()
        kept.append(item)
    return kept


def _merge_users(held: list[Held]) -> list[Held]:
    merged: list[Held] = []
    for item in held:
        last = _pair(merged, item.message, "user")
        text = item.message.get("content", "") if last is not None else None
        before = last.get("content", "") if last is not None else None
        if last is None or not isinstance(text, str) or not isinstance(before, str):
            merged.append(item)
            continue
        joined = {k: v for k, v in last.items() if k != "api_content"}  # (stale bytes)
        joined["content"] = "\n\n".join(t for t in (before, text) if t)
        merged[-1] = Held(joined, (*merged[-1].sources, *item.sources))
    return merged


def repaired(messages: list[Any]) -> list[Held]:
    """`messages` as Hermes's repairs leave them, each with its sources: its repair
    again until it changes nothing (one pass may leave a pair it makes, two assistants
    around a dropped result, which the repair before its next model call merges; the
    view handed back is one no later repair changes). Merged messages are new dicts
    (Hermes edits its own in place); the rest are `messages`'."""
    held = [Held(message, (i,)) for i, message in enumerate(messages)]
    while True:
        again = _merge_users(_drop_unanswerable(_merge_assistants(held)))
        if len(again) == len(held):  # (every repair takes a message out)
            return held
        held = again


def as_hermes_holds(messages: list[JSON]) -> list[JSON]:
    """`messages` (a view handed to Hermes) as Hermes will hold them after its repair.
    Handed as the ledger holds it, a view another writer made with such a shape (a
    script's user note, then Hermes's next ask; an assistant note after Hermes's reply;
    a note between a call and its result) made the engine read Hermes's repaired list
    at the next hand-over as another conversation and start a new root with the whole
    history (sessions 45, 46). A merged user message goes without ``api_content`` (the
    bytes Hermes sent for the first message alone); a missing content reads as empty,
    as Hermes reads it."""
    return [item.message for item in repaired(messages)]


def unasked(new: list[Any], issued: Callable[[str], bool]) -> set[int]:
    """The indices of `new`'s tool results (the host's messages after a view) whose call
    neither the view made (`issued`) nor a message of `new` before them: the call
    another writer withdrew. A result whose call is there is not one of them, even where
    Hermes's repair drops it (a note between them); a result of another shape is left
    to the ledger's checks to name."""
    made: set[str] = set()
    out: set[int] = set()
    for i, message in enumerate(new):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            made |= _call_ids(message, ("id",))  # (as the ledger reads a call)
        elif role == "tool":
            call = message.get("tool_call_id")
            if isinstance(call, str) and call and call not in made and not issued(call):
                out.add(i)
    return out


def answerable(svc: ContextService, sid: str, new: list[JSON]) -> list[JSON]:
    """`new` (the host's messages, to go after the view of `sid` another writer moved)
    without a tool result whose call that view no longer holds (withdrawn, or
    compacted away): the ledger would refuse it, Hermes's repair drops it unsent; logged, naming
    the call. Any other result is recorded, one Hermes's repair drops too (a note
    between it and its call; it may be the user's own answer, a ``clarify``): nothing
    is lost, and the view handed back leaves it out (:func:`as_hermes_holds`)."""
    calls = svc.ledger.call_ledger(sid)
    gone = unasked(new, lambda c: calls.was_issued(c) or calls.pending_rename(c) is not None)
    for i in sorted(gone):
        logger.warning(
            "ctxledger: tool result for call %s left out: its call is no longer in the "
            "view another writer moved (withdrawn, compacted away) (%s)",
            shown(new[i]["tool_call_id"]),
            sid,
        )
    return [m for i, m in enumerate(new) if i not in gone]


def head_counts(
    view: list[Any],
    stored: list[int],
    head: list[Any],
    *,
    same: Callable[[Any, Any], bool],
    count: Callable[[Any], int],
) -> list[int]:
    """Token counts for `head` (the first messages of Hermes's list): `stored` (the
    counts of `view`'s messages) for a message that is one of the view's as Hermes
    holds it (`same`), else `count` (a merged message, or one the view no longer holds)."""
    held = repaired(view)
    out = []
    for i, message in enumerate(head):
        item = held[i] if i < len(held) else None
        one = item is not None and len(item.sources) == 1 and same(item.message, message)
        out.append(stored[item.sources[0]] if one and item is not None else count(message))
    return out
