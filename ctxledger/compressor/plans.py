"""What a compaction plan says: :class:`CompactionPlan` and its orphan repairs.

The data the planner (:mod:`.planner`) produces and the recorder, the replayer and
the what-if read; kept apart from the planning rules so readers of a plan need not
import them.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ctxledger.compressor.prune import Prune

__all__ = ["CompactionPlan", "OrphanAction", "Role", "SkipReason"]

SkipReason = Literal["disabled", "too_few_messages", "no_valid_cut", "no_progress"]
Role = Literal["user", "assistant"]


class OrphanAction(msgspec.Struct, frozen=True, kw_only=True):
    """A repair so the provider never sees an orphan.

    ``drop_result``: tool message `index` answers a call that is not in the output.
    ``strip_call`` / ``stub_result``: assistant message `index` issued `tool_call_id`,
    whose result is not in the output; the call is removed, or answered by a stub.
    """

    index: int
    tool_call_id: str
    action: Literal["drop_result", "strip_call", "stub_result"]


class CompactionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a compaction will do, as indices into the planned message list.

    Output order: ``messages[:head_end]`` (+ system note), ``pinned``, the summary
    (unless merged), ``carried``, ``messages[tail_start:]``. The middle is
    ``messages[compress_start:compress_end]`` (``compress_start == head_end``,
    ``compress_end == tail_start``); of it, everything not in ``pinned`` or ``carried``
    is summarized (`summarized_indices`). ``prunes`` are what the summarizer sees in
    place of those messages. ``merge_index`` is the message the summary is merged
    into when ``merged_into_tail``; ``unmerged`` are carried messages that still hold
    an older merged summary, which is taken out (its text is the previous summary).
    ``estimated_tokens_after`` = everything kept + the summary budget + the summary's
    framing (prefix, end marker) + the system note when this compaction adds it.
    """

    action: Literal["compress", "skip"]
    skip_reason: SkipReason | None = None
    n_messages: int = 0
    head_end: int = 0
    tail_start: int = 0
    compress_start: int = 0
    compress_end: int = 0
    head_count: int = 0
    tail_count: int = 0
    pinned: list[int] = msgspec.field(default_factory=list)
    carried: list[int] = msgspec.field(default_factory=list)
    unmerged: list[int] = msgspec.field(default_factory=list)
    prunes: list[Prune] = msgspec.field(default_factory=list)
    summary_role: Role = "user"
    merged_into_tail: bool = False
    merge_index: int | None = None
    orphans: list[OrphanAction] = msgspec.field(default_factory=list)
    system_note: bool = False
    previous_summary_index: int | None = None
    summary_budget_tokens: int = 0
    tokens_before: int = 0
    middle_tokens: int = 0
    estimated_tokens_after: int = 0
    tail_token_budget: int = 0
    focus: str | None = None
    compaction_count: int = 0
    forced: bool = False
    notes: list[str] = msgspec.field(default_factory=list)

    def summarized_indices(self) -> list[int]:
        """Indices replaced by the summary (the middle minus pinned and carried)."""
        middle = range(self.compress_start, self.compress_end)
        if not self.pinned and not self.carried:
            return list(middle)  # the common case, built in C
        kept = set(self.pinned) | set(self.carried)
        return [i for i in middle if i not in kept]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible form, as recorded in ``SessionSwitched.plan``."""
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]
