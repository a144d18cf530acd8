"""Oracle for the planner's speed work (issue 14): main's layout scan as it was before.

A verbatim copy of ``ctxledger/compressor/layout.py`` (one full scan per call) with
the duplicate search and phase-1 pass of ``prune.py`` (``newest_copies``,
``prune_messages``) as they were, kept so property tests can check that the
incremental, memoized planner gives the very same plans. Do not "fix" it: it is
the reference.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxledger.compressor import markers
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.copies import comparable as _comparable
from ctxledger.compressor.markers import split_merged
from ctxledger.compressor.prune import (
    Prune,
    call_index,
    call_info,
    prune_tool_result,
    truncate_call_arguments,
)
from ctxledger.errors import InvalidMessage
from ctxledger.messages import is_text_content_empty


@dataclass(slots=True)
class Layout:
    """What planning needs to know about the list, gathered in one linear pass."""

    n: int
    roles: list[Any]
    # tool groups as spans: cuts in (span_start[k], span_end[k]] would split a group
    span_start: list[int] = field(default_factory=list)
    span_end: list[int] = field(default_factory=list)
    call_of: dict[str, Any] = field(default_factory=dict)  # call id -> the call object
    call_ids: dict[int, list[str]] = field(default_factory=dict)  # assistant -> its call ids
    result_owner: dict[int, int] = field(default_factory=dict)  # tool msg -> calling assistant
    answered: set[str] = field(default_factory=set)
    # (session 44: the layout's re-used call ids; the reference's lists re-use none)
    superseded: dict[tuple[int, str], bool] = field(default_factory=dict)
    long_args: list[int] = field(default_factory=list)  # assistants with oversized arguments
    long_results: list[int] = field(default_factory=list)  # tool msgs with >= prune_min_chars
    summaries: list[int] = field(default_factory=list)  # messages carrying a summary
    merged: set[int] = field(default_factory=set)  # ... of which merged into a real message
    last_user: int | None = None
    last_reply: int | None = None
    has_system: bool = False

    def _span(self, i: int) -> int:
        """Index of the group span that a cut at i would split, or -1."""
        k = bisect.bisect_left(self.span_start, i) - 1
        return k if k >= 0 and i <= self.span_end[k] else -1

    def prev_cut(self, i: int) -> int:
        """Largest valid cut <= i (0 is always valid)."""
        k = self._span(i)
        return self.span_start[k] if k >= 0 else max(0, i)

    def next_cut(self, i: int) -> int:
        """Smallest valid cut >= i (n when none)."""
        k = self._span(i)
        return min(self.n, self.span_end[k] + 1 if k >= 0 else i)

    def block(self, i: int) -> tuple[int, int]:
        """The unsplittable run [start, end) holding message i (a tool group, or i alone)."""
        return self.prev_cut(i), self.next_cut(i + 1)


def _summary_starts() -> frozenset[str]:
    return frozenset(
        p.lstrip()[:1] for p in (markers.summary_prefix(), *markers.LEGACY_PREFIXES) if p.strip()
    )


def _maybe_summary(content: Any, starts: frozenset[str], end: str) -> bool:
    """Cheap test before the real check: a summary's first character, or a merged
    summary's end marker at the very end (today's merge order puts it last)."""
    if isinstance(content, list):
        if not content:
            return False
        last = content[-1]
        last_text = last.get("text") if isinstance(last, Mapping) else None
        if isinstance(last_text, str) and last_text.endswith(end):
            return True
        first = content[0]
        content = first.get("text") if isinstance(first, Mapping) else None
    if not isinstance(content, str) or not content:
        return False
    head = content[:1]
    return (
        head in starts
        or (head.isspace() and content.lstrip()[:1] in starts)
        or content.endswith(end)
    )


def _scan(messages: Sequence[Mapping[str, Any]], config: CompressionConfig) -> Layout:
    """The single pass over every message; kept tight because it dominates planning time."""
    n = len(messages)
    layout = Layout(n=n, roles=[m.get("role") for m in messages])
    call_of, call_ids = layout.call_of, layout.call_ids
    result_owner, answered = layout.result_owner, layout.answered
    owner_of: dict[str, int] = {}
    group_last: dict[int, int] = {}  # assistant -> index of its last result
    starts = _summary_starts()
    end_marker = markers.summary_end_marker()
    last_char = end_marker[-1:]
    min_chars, args_over = config.prune_min_chars, config.args_truncate_over
    for i, role in enumerate(layout.roles):
        msg = messages[i]
        if role == "tool":
            call_id = msg["tool_call_id"]
            owner = owner_of.get(call_id, -1)
            if 0 <= owner < i and call_id not in answered:
                result_owner[i] = owner
                answered.add(call_id)
                group_last[owner] = i
            content = msg.get("content")
            if (len(content) >= min_chars) if type(content) is str else isinstance(content, list):
                layout.long_results.append(i)
            continue
        content = msg.get("content")
        # the first-character test is inlined: it runs for every message
        if (
            content
            and (
                type(content) is not str
                or content[:1] in starts
                or content[:1].isspace()
                or content[-1:] == last_char
            )
            and role in ("user", "assistant")
            and _maybe_summary(content, starts, end_marker)
        ):
            layout.summaries.append(i)
        if role == "assistant":
            tool_calls = msg.get("tool_calls")
            if tool_calls:
                ids = call_ids[i] = []
                long = False
                for call in tool_calls:
                    call_id = call["id"]
                    call_of[call_id] = call
                    owner_of[call_id] = i
                    ids.append(call_id)
                    long = long or len(call["function"]["arguments"]) > args_over
                if long:
                    layout.long_args.append(i)
    # a cut before i is invalid when an earlier call's group reaches i; overlapping
    # groups (results interleaved across calls) merge into one unsplittable span
    for start, end in sorted(group_last.items()):
        if layout.span_end and start <= layout.span_end[-1]:
            layout.span_end[-1] = max(layout.span_end[-1], end)
        else:
            layout.span_start.append(start)
            layout.span_end.append(end)
    layout.has_system = n > 0 and layout.roles[0] == "system"
    return layout


def message_layout(messages: Sequence[Mapping[str, Any]], config: CompressionConfig) -> Layout:
    try:
        layout = _scan(messages, config)
    except (AttributeError, KeyError, TypeError) as exc:
        raise InvalidMessage(
            f"plan() needs validated OpenAI messages (see messages.validate_messages): {exc!r}"
        ) from None
    candidates, layout.summaries = layout.summaries, []
    for i in candidates:
        split = split_merged(messages[i])
        if split is not None:
            layout.summaries.append(i)
            if split[1] is not None:
                layout.merged.add(i)
    _find_anchors(messages, layout)
    return layout


def _find_anchors(messages: Sequence[Mapping[str, Any]], layout: Layout) -> None:
    """The latest real user message and the latest visible assistant reply (not summaries)."""
    summaries = set(layout.summaries)
    for i in range(layout.n - 1, -1, -1):
        role = layout.roles[i]
        if role == "user" and layout.last_user is None:
            if i not in summaries or i in layout.merged:
                layout.last_user = i
        elif role == "assistant" and layout.last_reply is None:
            msg: Mapping[str, Any] | None = messages[i]
            if i in summaries:
                split = split_merged(messages[i])
                msg = split[1] if split is not None else None
            if msg is not None and not is_text_content_empty(msg):
                layout.last_reply = i
        if layout.last_user is not None and layout.last_reply is not None:
            return


_KEY_EDGE = 64


def newest_copies(
    messages: Sequence[Mapping[str, Any]],
    min_chars: int = 200,
    indices: Iterable[int] | None = None,
) -> dict[int, int]:
    """Older tool result index -> index of the newest identical result (>= `min_chars`).

    `indices` limits the search to those messages (e.g. the tool results already known
    to be long). Contents are grouped by length and edges first, so only likely twins
    are compared in full; hashing every long output would dominate planning time.
    """
    groups: dict[tuple[int, Any, Any], list[tuple[int, str | bytes]]] = {}
    for i in range(len(messages)) if indices is None else indices:
        msg = messages[i]
        if msg.get("role") != "tool":
            continue
        value = msg.get("content")
        if type(value) is not str:  # str is the common case: skip the call
            value = _comparable(value)
            if value is None:
                continue
        size = len(value)
        if size < min_chars:
            continue
        key = (size, value[:_KEY_EDGE], value[-_KEY_EDGE:])
        group = groups.get(key)
        if group is None:
            groups[key] = [(i, value)]
        else:
            group.append((i, value))
    older_to_newest: dict[int, int] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        remaining = group[::-1]  # newest first
        while remaining:
            (newest, value), rest = remaining[0], remaining[1:]
            remaining = []
            for i, other in rest:
                if other == value:
                    older_to_newest[i] = newest
                else:
                    remaining.append((i, other))
    return older_to_newest


def prune_messages(
    messages: Sequence[Mapping[str, Any]],
    indices: Iterable[int],
    *,
    calls: Mapping[str, Any] | None = None,
    newest: Mapping[int, int] | None = None,
    min_chars: int = 200,
    args_over: int = 500,
    args_leaf_keep: int = 200,
) -> list[Prune]:
    """Phase-1 rewrites for the messages at `indices` (in index order); others untouched.

    `calls` maps a tool call id to its call object (:func:`call_index`) and `newest` an
    older tool result's index to its newest identical copy (:func:`newest_copies`, found
    across the whole list: a newer copy may sit in the tail). Both are built from
    `messages` when not given; the planner passes the ones its layout already has.
    Only messages listed in `indices` are rewritten.
    """
    if calls is None:
        calls = call_index(messages)
    if newest is None:
        newest = newest_copies(messages, min_chars)
    prunes: list[Prune] = []
    for i in sorted(indices):
        msg = messages[i]
        role = msg.get("role")
        if role == "tool":
            call_id = msg.get("tool_call_id")
            call = calls.get(call_id) if isinstance(call_id, str) else None
            newer = newest.get(i)
            newer_id = str(messages[newer].get("tool_call_id")) if newer is not None else None
            prune = prune_tool_result(
                i,
                msg,
                call_info(call) if call is not None else None,
                newer_call_id=newer_id,
                min_chars=min_chars,
            )
        elif role == "assistant" and msg.get("tool_calls"):
            shorter = truncate_call_arguments(msg, over=args_over, leaf_keep=args_leaf_keep)
            prune = (
                Prune(index=i, kind="args_truncated", replacement=shorter)
                if shorter is not None
                else None
            )
        else:
            continue
        if prune is not None:
            prunes.append(prune)
    return prunes
