"""Repeated tool results: which older copies a newer identical one makes redundant (pure).

Phase 1 (:mod:`ctxledger.compressor.prune`) turns an older copy into a duplicate marker
naming the newer call. The groups are built in one pass and can be extended when the
list grows (:mod:`ctxledger.compressor.plancache`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

__all__ = ["CopyGroups", "comparable", "group_copies", "newest_copies", "resolve_copies"]

_KEY_EDGE = 64


def comparable(content: Any) -> str | bytes | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        try:
            return msgspec.json.encode(content)
        except (TypeError, msgspec.EncodeError):
            return None
    return None


#: duplicate candidates: (size, first and last chars) -> [(index, comparable content)]
CopyGroups = dict[tuple[int, Any, Any], list[tuple[int, str | bytes]]]


def group_copies(
    groups: CopyGroups,
    messages: Sequence[Mapping[str, Any]],
    indices: Iterable[int],
    min_chars: int,
    *,
    shared: bool = False,
) -> None:
    """Add the long tool results at `indices` to `groups`.

    With `shared`, a group that grows is replaced by a new list instead of appended to,
    so a shallow copy of `groups` taken earlier keeps seeing its own lists unchanged.
    """
    for i in indices:
        msg = messages[i]
        if msg.get("role") != "tool":
            continue
        value = msg.get("content")
        if type(value) is not str:  # str is the common case: skip the call
            value = comparable(value)
            if value is None:
                continue
        size = len(value)
        if size < min_chars:
            continue
        key = (size, value[:_KEY_EDGE], value[-_KEY_EDGE:])
        group = groups.get(key)
        if group is None:
            groups[key] = [(i, value)]
        elif shared:  # the list may belong to an earlier copy of `groups`: copy on write
            groups[key] = [*group, (i, value)]
        else:
            group.append((i, value))


def resolve_copies(groups: CopyGroups) -> dict[int, int]:
    """Older tool result index -> index of the newest identical one, from `groups`."""
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
    groups: CopyGroups = {}
    group_copies(groups, messages, range(len(messages)) if indices is None else indices, min_chars)
    return resolve_copies(groups)
