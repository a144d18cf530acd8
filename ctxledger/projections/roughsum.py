"""Hermes's rough estimate of a session's API view, kept incrementally.

``estimator = "rough"`` judges system + messages + tools schema by chars/4 before every
model call (preflight) and after every response without a prompt count; summing the
whole view each time costs ~2 ms at 3,600 messages. The transcript projection's cached
API view only grows by appends while it lives (any other change drops it and a new list
is built), and the one edit in place, a persisted tool output shown in the view, is
reported here. So a sum over the list's first `counted` messages stays right while the
list is the same object: the next read adds the messages appended since.

Derived data only, like the cached views: never serialized, never part of a fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxledger.messages import JSON
from ctxledger.tokens import rough_message_tokens, rough_tools_tokens

__all__ = ["RoughSums"]

#: how many sessions keep a running sum (as many as keep a cached API view)
_SESSIONS = 64


class _Sum:
    __slots__ = ("counted", "tools", "tools_tokens", "total", "view")

    def __init__(self, view: list[JSON]) -> None:
        self.view = view  # the cached list summed (by identity)
        self.counted = 0  # how many of its messages `total` holds
        self.total = 0
        self.tools: Sequence[JSON] | None = None  # the tools schema summed (by identity)
        self.tools_tokens = 0


class RoughSums:
    """Per session: the rough estimate of a cached API view (a list that only grows while
    it is the same object) plus its tools schema."""

    def __init__(self, views: dict[str, list[JSON]] | None = None) -> None:
        self._sums: dict[str, _Sum] = {}
        #: the projection's cached views: a sum whose list is no longer there is dropped,
        #: so a view the projection let go (evicted, rebuilt) is not kept alive here
        self._views = views

    def total(self, session_id: str, view: list[JSON], tools: Sequence[JSON]) -> int:
        """The rough estimate of `view` (the projection's cached list) + `tools`: the
        messages appended since the last read are added, the rest is reused."""
        entry = self._sums.get(session_id)
        if entry is None or entry.view is not view or entry.counted > len(view):
            entry = _Sum(view)
            self._sweep()
            if session_id not in self._sums and len(self._sums) >= _SESSIONS:
                del self._sums[next(iter(self._sums))]  # the oldest; summed again on demand
            self._sums[session_id] = entry
        if entry.counted < len(view):
            entry.total += sum(rough_message_tokens(m) for m in view[entry.counted :])
            entry.counted = len(view)
        if entry.tools is not tools:
            entry.tools, entry.tools_tokens = tools, rough_tools_tokens(tools)
        return entry.total + entry.tools_tokens

    def _sweep(self) -> None:
        """Drop the sums of lists the projection no longer caches (when a new list is
        summed: after a compaction, an eviction or a rebuild, never per read)."""
        views = self._views
        if views is not None:
            for sid in [s for s, e in self._sums.items() if views.get(s) is not e.view]:
                del self._sums[sid]

    def replaced(self, session_id: str, view: list[JSON], index: int, old: JSON, new: JSON) -> None:
        """`view[index]` (already summed or not) is about to show `new` instead of `old`."""
        entry = self._sums.get(session_id)
        if entry is not None and entry.view is view and index < entry.counted:
            entry.total += rough_message_tokens(new) - rough_message_tokens(old)
