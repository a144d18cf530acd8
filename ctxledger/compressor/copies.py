"""Repeated tool results: which older copies a newer identical one makes redundant (pure).

Phase 1 (:mod:`ctxledger.compressor.prune`) turns an older copy into a duplicate marker
naming the newer call. The groups are built in one pass and can be extended when the
list grows (:mod:`ctxledger.compressor.plancache`). Contents are grouped by their own
value: a string hashes once and caches its hash, and the one-liner memo
(``prune._describe_memo``) hashes the same long results when it describes them, so a
dict probe costs no more than the length-and-edges pre-grouping this replaced (which
made three tracked containers per long result for the collector to walk).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

__all__ = ["CopyGroups", "comparable", "group_copies", "newest_copies", "resolve_copies"]


def comparable(content: Any) -> str | bytes | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        try:
            return msgspec.json.encode(content)
        except (TypeError, msgspec.EncodeError):
            return None
    return None


class CopyGroups:
    """The long tool results seen so far, by content: the latest index holding each
    content, and the older copies (index -> content). Keyed by the content itself, so
    equal contents meet in one dict probe (a string caches its hash: the one-liner memo
    hashes the same strings) and nothing is kept per result but two dict entries of
    atomic values, which the cyclic collector never tracks (a compaction of 5,000
    messages made ≈ 6,600 tracked tuples and lists here, each traversed by the next
    collection). Indices are added in list order: the last one added is the newest."""

    __slots__ = ("latest", "older")

    def __init__(
        self,
        latest: dict[str | bytes, int] | None = None,
        older: dict[int, str | bytes] | None = None,
    ) -> None:
        self.latest: dict[str | bytes, int] = {} if latest is None else latest
        self.older: dict[int, str | bytes] = {} if older is None else older

    def copy(self) -> CopyGroups:
        """An independent copy (growing it leaves this one as it was)."""
        return CopyGroups(dict(self.latest), dict(self.older))


def group_copies(
    groups: CopyGroups,
    messages: Sequence[Mapping[str, Any]],
    indices: Iterable[int],
    min_chars: int,
) -> None:
    """Add the long tool results at `indices` (in list order, after any added before)."""
    latest, older = groups.latest, groups.older
    for i in indices:
        msg = messages[i]
        if msg.get("role") != "tool":
            continue
        value = msg.get("content")
        if type(value) is not str:  # str is the common case: skip the call
            value = comparable(value)
            if value is None:
                continue
        if len(value) < min_chars:
            continue
        before = latest.get(value)
        if before is not None:
            older[before] = value
        latest[value] = i


def resolve_copies(groups: CopyGroups) -> dict[int, int]:
    """Older tool result index -> index of the newest identical one, from `groups`."""
    latest = groups.latest
    return {i: latest[value] for i, value in groups.older.items()}


def newest_copies(
    messages: Sequence[Mapping[str, Any]],
    min_chars: int = 200,
    indices: Iterable[int] | None = None,
) -> dict[int, int]:
    """Older tool result index -> index of the newest identical result (>= `min_chars`).

    `indices` limits the search to those messages (e.g. the tool results already known
    to be long), in list order.
    """
    groups = CopyGroups()
    group_copies(groups, messages, range(len(messages)) if indices is None else indices, min_chars)
    return resolve_copies(groups)
