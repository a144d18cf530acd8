"""Phase 2 and the whole compaction plan, as a pure function.

`plan(messages, config, token_counts, ...)` decides everything about a compaction
except the summary text: where the protected head ends, where the token-budgeted
tail starts, which messages in between are kept verbatim anyway (pinned ones, and the
latest user ask / visible reply), which are summarized, the phase-1 rewrites the
summarizer sees instead of the originals, the summary's role, orphan repairs, and
whether the result would be smaller at all. It does no I/O, reads no clock, calls no
model and never mutates its inputs; the same inputs always give the same plan.

The rules are HERMES_SPEC §3 with the §9 defects designed out:

* A boundary is only ever placed at a *valid cut*: an index that no tool-call group
  (an assistant message with calls plus all of their results) straddles. Alignment
  is the last word; when no valid cut leaves something to summarize the plan is a
  skip with a reason, never a clamped boundary that orphans a result.
* The tail is the longest valid suffix within ``tail_soft_ceiling`` x budget, but
  at least the shortest valid suffix holding the minimum message count. A cut that
  lands inside a tool group moves back before the parent assistant when the
  minimum count needs the group, and forward (the group is summarized) when keeping
  it would break the soft ceiling. When everything after the head fits the ceiling,
  the plain budget decides instead, then the minimum count alone (Hermes #40803), so
  a short session's compaction still summarizes something worth it.
* The latest real user message and the latest visible assistant reply are never
  summarized. When they fall before the tail they are *carried*: kept verbatim right
  after the summary (with their tool-call partners). Extending the tail back to them
  instead would make one long agent turn uncompactable once the head has decayed.
  For the same reason the head never swallows them.
* After the first compaction (or whenever a summary is already present) only the
  system prompt is protected (#11996); the previous summary lands in the middle and
  is updated iteratively. A summary is never left in the tail, so there is always
  exactly one after assembly.
* Prunes apply only to summarized messages: head, pinned, carried and tail messages
  stay byte-identical. A plan whose estimate is not smaller than before is a skip.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import operator
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxledger.compressor import markers
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.layout import Layout
from ctxledger.compressor.markers import split_merged
from ctxledger.compressor.planargs import check_messages, check_plan_args
from ctxledger.compressor.plancache import PlanCache, Scan, scan
from ctxledger.compressor.plans import CompactionPlan, OrphanAction, Role, SkipReason
from ctxledger.compressor.prune import Prune, PruneKind
from ctxledger.errors import InvalidMessage
from ctxledger.messages import INSTRUCTION_ROLES, content_text, is_text_content_empty
from ctxledger.tokens import ROUGH_MESSAGE_OVERHEAD, rough_message_tokens, rough_text_tokens

__all__ = [
    "CompactionPlan",
    "OrphanAction",
    "PlanDraft",
    "SkipReason",
    "draft",
    "plan",
    "rough_counts",
]


def rough_counts(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Hermes's rough per-message estimate (chars/4 + 10), parallel to `messages`."""
    return [rough_message_tokens(m) for m in messages]


# --- boundaries -------------------------------------------------------------------------


@dataclass(slots=True)
class _Bounds:
    head_end: int
    tail_start: int
    pinned: list[int]
    carried: list[int]
    notes: list[str]


@dataclass(slots=True)
class _Job:
    """One planning call's inputs, passed whole to the helpers."""

    messages: Sequence[Mapping[str, Any]]
    config: CompressionConfig
    counts: list[int]
    context_length: int
    layout: Layout
    force: bool
    base: dict[str, Any]  # plan fields known before any decision
    scan: Scan  # the layout's source, with the rewrites already built for these messages


def _head_end(layout: Layout, head_size: int, notes: list[str]) -> int:
    """System + protected messages, pushed forward past tool results, never past an anchor."""
    head_end = layout.next_cut(min(head_size, layout.n))
    anchors = [a for a in (layout.last_user, layout.last_reply) if a is not None]
    if anchors and min(anchors) < head_end:
        capped = max(1 if layout.has_system else 0, layout.prev_cut(min(anchors)))
        notes.append(
            f"head ends at {capped} instead of {head_end}: the latest user message or visible "
            "reply is kept after the summary, not inside the protected head"
        )
        head_end = capped
    return head_end


def _kept_blocks(
    layout: Layout, head_end: int, pinned: Collection[int], notes: list[str]
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Blocks (start, end) of pinned messages and of anchors at or after the head."""
    anchor_blocks = sorted(
        {
            layout.block(a)
            for a in (layout.last_user, layout.last_reply)
            if a is not None and a >= head_end
        }
    )
    pinned_blocks: set[tuple[int, int]] = set()
    summaries = set(layout.summaries)
    for p in sorted(set(pinned)):
        if not 0 <= p < layout.n:
            notes.append(f"pinned index {p} is outside the transcript; ignored")
            continue
        if p < head_end:
            continue
        if p in summaries:
            notes.append(f"message {p} holds a summary; it is updated, not pinned")
            continue
        start, end = layout.block(p)
        if any(s <= p < e for s, e in anchor_blocks):
            continue
        if end - start > 1:
            partners = [i for i in range(start, end) if i != p]
            notes.append(f"pinned message {p} kept with its tool-call partners {partners}")
        pinned_blocks.add((start, end))
    return sorted(pinned_blocks), anchor_blocks


def _tail_start(
    layout: Layout,
    suffix: list[int],
    lo: int,
    ceiling: int,
    min_count: int,
    *,
    crossing: bool = False,
) -> int | None:
    """Longest valid suffix within the ceiling, but at least the shortest one with min_count.

    ``crossing`` (the plain-budget refit): the message that crosses the budget is kept
    too when that is a valid cut, as Hermes's refit keeps it (#40803)."""
    n = layout.n
    first_fit = bisect.bisect_left(range(n + 1), True, lo=lo, key=lambda c: suffix[c] <= ceiling)
    by_budget = layout.next_cut(first_fit)
    if crossing and first_fit - 1 >= lo and layout.next_cut(first_fit - 1) == first_fit - 1:
        by_budget = first_fit - 1
    by_budget_ok = by_budget < n
    by_count = layout.prev_cut(n - min_count) if n - min_count >= lo else -1
    by_count_ok = by_count >= lo
    if by_budget_ok and by_count_ok:
        return min(by_budget, by_count)
    if by_budget_ok:
        return by_budget
    if by_count_ok:
        return by_count
    fallback = layout.prev_cut(n - 1)
    return fallback if fallback >= lo else None


#: the tail a refit keeps at least (and the messages it leaves to summarize, when it can)
_FEW = 3


def _in_blocks(i: int, blocks: Sequence[tuple[int, int]]) -> bool:
    return any(s <= i < e for s, e in blocks)


def _boundaries(job: _Job, head_size: int, pinned: Collection[int]) -> _Bounds | SkipReason:
    notes: list[str] = []
    layout, config, n = job.layout, job.config, job.layout.n
    head_end = _head_end(layout, head_size, notes)
    pinned_blocks, anchor_blocks = _kept_blocks(layout, head_end, pinned, notes)
    # the middle must keep at least one message to summarize: the first one that is
    # neither pinned nor an anchor; and no summary may stay behind in the tail
    first = head_end
    while first < n and (_in_blocks(first, pinned_blocks) or _in_blocks(first, anchor_blocks)):
        first += 1
    lo = max(first + 1, layout.summaries[-1] + 1 if layout.summaries else 0)
    if lo > n - 1:
        return "no_valid_cut"
    suffix = list(itertools.accumulate(reversed(job.counts), initial=0))[::-1]
    budget = config.tail_token_budget(job.context_length)
    ceiling, crossing = int(budget * config.tail_soft_ceiling), False
    # the minimum count never takes all but one message: it leaves a few to summarize
    # (Hermes's floor is capped the same way, so a compaction is worth its summary)
    min_count = max(1, min(config.tail_min_count(), n - lo, max(_FEW, n - head_end - 3)))
    if suffix[lo] <= ceiling:
        # everything after the middle's first message fits the soft ceiling: that tail
        # would leave one message to summarize (a no_progress skip, or a manual /compress
        # that does nothing useful). As Hermes does (#40803): the plain budget decides;
        # when even that holds everything, the minimum count alone
        ceiling, crossing = budget, True
        if suffix[lo] <= ceiling:
            ceiling = -1
    tail_start = _tail_start(layout, suffix, lo, ceiling, min_count, crossing=crossing)
    if tail_start is None:
        return "no_valid_cut"
    carried = [i for s, e in anchor_blocks if e <= tail_start for i in range(s, e)]
    kept = [i for s, e in pinned_blocks if e <= tail_start for i in range(s, e) if i not in carried]
    if carried:
        notes.append(
            f"messages {carried} (the latest user ask / visible reply) are kept verbatim after the summary"
        )
    return _Bounds(
        head_end=head_end, tail_start=tail_start, pinned=kept, carried=carried, notes=notes
    )


# --- roles and orphans ------------------------------------------------------------------


def _summary_role(
    layout: Layout, before: Sequence[int], after_first: int
) -> tuple[Role, int | None]:
    """The summary's role, and the index it merges into when both roles would collide.

    `before` and `after_first` are what the orphan repair leaves next to the summary
    (hermes-agent 0.19 looks before its repair; README "Decisions worth knowing")."""
    roles = layout.roles
    pre = roles[before[-1]] if before else None
    post = roles[after_first]
    only_system = all(roles[i] in INSTRUCTION_ROLES for i in before)
    if only_system or layout.last_user is None:
        # a transcript must open with (and keep) a user turn: the summary is that turn
        return "user", after_first if post == "user" else None
    role: Role = "user" if pre in ("assistant", "tool") else "assistant"
    if role == post:
        flipped: Role = "assistant" if role == "user" else "user"
        if flipped != pre:
            return flipped, None
        return role, after_first
    return role, None


def _in_flight(layout: Layout) -> set[str]:
    """Calls of a final assistant message that are still waiting for results (#9 rule)."""
    last_assistant = next(
        (i for i in range(layout.n - 1, -1, -1) if layout.roles[i] != "tool"), None
    )
    if last_assistant is None or layout.roles[last_assistant] != "assistant":
        return set()
    return {
        c
        for c in layout.call_ids.get(last_assistant, [])
        if not layout.is_answered(last_assistant, c)
    }


def _orphans(job: _Job, kept: Sequence[int], notes: list[str]) -> list[OrphanAction]:
    """Repairs for calls/results whose partner is not in the output (only odd inputs have any).

    hermes-agent 0.19's repair, with kept differences (README "Decisions worth knowing",
    *Orphans*; ``tests/test_parity_orphans.py``): a call that would leave its message
    empty is stubbed, not stripped; a result before its call, or a second one for a
    call, is dropped; a call still in flight is kept; with re-used ids, a call without
    a result of its own goes though a kept result has its id (results are paired with
    the waiting calls first in, first out: ``Layout.is_answered``)."""
    layout, messages, policy = job.layout, job.messages, job.config.orphan_policy
    actions: list[OrphanAction] = []
    in_flight = _in_flight(layout)
    kept_set = set(kept)
    for i in sorted(kept):
        role = layout.roles[i]
        if role == "tool":
            # the scan gives a result an owner only when it is the first one for its call
            # (a call whose id a later call re-used keeps its own: ``Layout.superseded``)
            owner = layout.result_owner.get(i)
            if owner is None or owner not in kept_set:
                call_id = messages[i].get("tool_call_id")
                actions.append(
                    OrphanAction(index=i, tool_call_id=str(call_id), action="drop_result")
                )
        elif role == "assistant" and i in layout.call_ids:
            missing = [
                c for c in layout.call_ids[i] if not layout.is_answered(i, c) and c not in in_flight
            ]
            if not missing:
                continue
            action: Literal["strip_call", "stub_result"] = (
                "stub_result" if policy == "stub" else "strip_call"
            )
            if (
                action == "strip_call"
                and len(missing) == len(layout.call_ids[i])
                and is_text_content_empty(messages[i])
            ):
                action = "stub_result"
                notes.append(
                    f"message {i}: stubbing instead of stripping, stripping would leave it empty"
                )
            actions.extend(OrphanAction(index=i, tool_call_id=c, action=action) for c in missing)
    return actions


# --- the plan ---------------------------------------------------------------------------


@functools.cache
def _framing_tokens() -> int:
    """Rough tokens a summary message costs beyond its text (prefix, end marker, framing)."""
    return rough_text_tokens(markers.wrap_summary("")) + ROUGH_MESSAGE_OVERHEAD


def _targets(job: _Job, b: _Bounds, kept_mid: set[int]) -> list[int]:
    """The summarized messages a phase-1 rewrite may apply to, in index order."""
    layout, lo, hi = job.layout, b.head_end, b.tail_start
    results, long_args = layout.long_results, layout.long_args
    # only long results and oversized calls can be rewritten: the layout listed them
    return sorted(
        i
        for i in itertools.chain(
            results[bisect.bisect_left(results, lo) : bisect.bisect_left(results, hi)],
            long_args[bisect.bisect_left(long_args, lo) : bisect.bisect_left(long_args, hi)],
        )
        if i not in kept_mid
    )


def _middle(job: _Job, targets: Sequence[int]) -> tuple[list[Prune], int]:
    """Phase-1 rewrites of the summarized messages, and the tokens they save."""
    messages, counts, the_scan = job.messages, job.counts, job.scan
    prunes: list[Prune] = []
    saved = 0
    resolved = the_scan.resolved  # the rewrites built by earlier plans of this list
    for i in targets:
        found = resolved.get(i)
        prune, tokens = found if found is not None else the_scan.prune(messages, i)
        if prune is not None:
            prunes.append(prune)
            if counts[i] > tokens:
                saved += counts[i] - tokens
    return prunes, saved


def _saved_at_most(job: _Job, targets: Sequence[int]) -> int:
    """An upper bound on what the rewrites of `targets` save, building none of them.

    A rewrite saves ``counts[i] - tokens`` when positive, and its rough tokens are at
    least the per-message overhead. One pass in C.
    """
    counts = map(job.counts.__getitem__, targets)
    over = map(operator.sub, counts, itertools.repeat(ROUGH_MESSAGE_OVERHEAD))
    return sum(map(max, itertools.repeat(0), over))


def _old_merged_summary_tokens(message: Mapping[str, Any], count: int) -> int:
    """Tokens of the older summary inside a merged message (it is replaced, not kept)."""
    split = split_merged(message)
    original = split[1] if split is not None else None
    return max(0, count - rough_message_tokens(original)) if original is not None else 0


def plan(
    messages: Sequence[Mapping[str, Any]],
    config: CompressionConfig,
    token_counts: Sequence[int],
    *,
    context_length: int,
    focus: str | None = None,
    pinned: Collection[int] = (),
    compaction_count: int = 0,
    force: bool = False,
    cache: PlanCache | None = None,
) -> CompactionPlan:
    """Plan one compaction of the API message list `messages` (system message at 0 if any).

    `token_counts` is parallel to `messages` (exact or rough; the caller chooses).
    `pinned` are indices the user pinned; `compaction_count` is how many compactions
    the session chain has had. `force` (manual ``/compress``) plans even when disabled
    or when the result would not be smaller, but never produces an invalid plan.
    `cache` (:class:`~ctxledger.compressor.plancache.PlanCache`) reuses what an earlier
    plan of a prefix of the same message objects found; give one only for messages
    that are never mutated in place. The plan is the same with or without it.
    Raises InvalidInput when `token_counts` does not match `messages`, or an argument
    is of the wrong type (InvalidConfig: the config; ``planargs``). This is
    :func:`draft` (the decision) completed with its phase-1 rewrites.
    """
    return draft(
        messages, config, token_counts, context_length=context_length, focus=focus,
        pinned=pinned, compaction_count=compaction_count, force=force, cache=cache,
    ).complete()  # fmt: skip


def draft(
    messages: Sequence[Mapping[str, Any]],
    config: CompressionConfig,
    token_counts: Sequence[int],
    *,
    context_length: int,
    focus: str | None = None,
    pinned: Collection[int] = (),
    compaction_count: int = 0,
    force: bool = False,
    cache: PlanCache | None = None,
) -> PlanDraft:
    """Decide one compaction of `messages` without building its phase-1 rewrites yet.

    Same arguments as :func:`plan`; ``draft(...).complete() == plan(...)``.
    """
    config, counts, pinned, compaction_count, force = check_plan_args(
        messages, config, token_counts, focus=focus, pinned=pinned,
        compaction_count=compaction_count, force=force, cache=cache,
    )  # fmt: skip
    base: dict[str, Any] = {
        "n_messages": len(messages), "tokens_before": sum(counts), "focus": focus,
        "compaction_count": compaction_count, "forced": force,
        "tail_token_budget": config.tail_token_budget(context_length),
    }  # fmt: skip
    try:  # (before any answer, the disabled skip's too: junk is refused on every path)
        the_scan = scan(messages, config, cache)
    except InvalidMessage:  # (the scan's); an item that is no message object is named
        check_messages(messages)
        raise
    if not config.enabled and not force:
        return PlanDraft.final(CompactionPlan(action="skip", skip_reason="disabled", **base))
    layout = the_scan.layout
    compacted = compaction_count >= 1 or bool(layout.summaries)
    head_size = int(layout.has_system) + (0 if compacted else config.protect_first_n)
    if len(messages) <= head_size + 4:
        return PlanDraft.final(
            CompactionPlan(action="skip", skip_reason="too_few_messages", **base)
        )
    job = _Job(messages, config, counts, context_length, layout, force, base, the_scan)
    bounds = _boundaries(job, head_size, pinned)
    if isinstance(bounds, str):
        return PlanDraft.final(CompactionPlan(action="skip", skip_reason=bounds, **base))
    return _draft(job, bounds)


class PlanDraft:
    """A decided compaction whose phase-1 rewrites (replacement texts) are not built yet.

    Everything but ``prunes`` and ``middle_tokens`` is final and equal to the complete
    plan's: boundaries, kept messages, orphan repairs, the summary's role and budget,
    ``estimated_tokens_after`` and the action. :meth:`listed` names the messages phase 1
    may rewrite as (index, kind); :meth:`complete` builds their replacements (one that
    would not be shorter than its original is dropped then, as :func:`plan` does) and
    the exact ``middle_tokens``. The budget, hence the estimate and the action, does
    not depend on them when it is the same whatever they save (clamped at its maximum
    or minimum); otherwise the draft builds them at once, since the decision needs them.
    """

    __slots__ = ("_built", "_fields", "_job", "_plan", "_targets", "action", "skip_reason")

    def __init__(
        self,
        job: _Job | None,
        fields: dict[str, Any],
        targets: list[int],
        built: tuple[list[Prune], int] | None,
    ) -> None:
        self._job, self._fields, self._targets, self._built = job, fields, targets, built
        self._plan: CompactionPlan | None = None
        self.action: Literal["compress", "skip"] = fields["action"]
        self.skip_reason: SkipReason | None = fields.get("skip_reason")

    @classmethod
    def final(cls, the_plan: CompactionPlan) -> PlanDraft:
        """A draft of a plan with nothing left to build (a skip found before the middle)."""
        done = cls(None, {"action": the_plan.action, "skip_reason": the_plan.skip_reason}, [], None)
        done._plan = the_plan
        return done

    def field(self, name: str) -> Any:
        """A final field of the plan (any but ``prunes`` and ``middle_tokens``)."""
        if name in ("prunes", "middle_tokens"):
            raise KeyError(f"{name} is known once the draft is complete()")
        return getattr(self._plan, name) if self._plan is not None else self._fields[name]

    def listed(self) -> list[tuple[int, PruneKind]]:
        """The messages phase 1 may rewrite, as (index, kind), in index order."""
        if self._plan is not None:
            return [(p.index, p.kind) for p in self._plan.prunes]
        assert self._job is not None
        roles, newest = self._job.layout.roles, self._job.scan.newest
        return [
            (
                i,
                "args_truncated"
                if roles[i] != "tool"
                else "duplicate"
                if i in newest
                else "tool_result",
            )
            for i in self._targets
        ]

    def complete(self) -> CompactionPlan:
        """The plan, its phase-1 rewrites built (once; the same object afterwards)."""
        if self._plan is None:
            assert self._job is not None
            prunes, saved = self._built or _middle(self._job, self._targets)
            fields = dict(self._fields)
            fields["middle_tokens"] = fields.pop("summarized_tokens") - saved
            self._plan = CompactionPlan(prunes=prunes, **fields)
        return self._plan


def _draft(job: _Job, b: _Bounds) -> PlanDraft:
    messages, layout, counts, base, n = job.messages, job.layout, job.counts, job.base, job.layout.n
    kept_mid = set(b.pinned) | set(b.carried)
    kept = [*range(b.head_end), *b.pinned, *b.carried, *range(b.tail_start, n)]
    orphans = _orphans(job, kept, b.notes)
    dropped = {o.index for o in orphans if o.action == "drop_result"}
    before = [i for i in [*range(b.head_end), *b.pinned] if i not in dropped]
    after_first = next((i for i in [*b.carried, *range(b.tail_start, n)] if i not in dropped), None)
    if after_first is None:  # only orphaned results would follow the summary
        skip = CompactionPlan(action="skip", skip_reason="no_valid_cut", notes=b.notes, **base)
        return PlanDraft.final(skip)
    role, merge_index = _summary_role(layout, before, after_first)
    targets = _targets(job, b, kept_mid)
    unmerged = [i for i in b.carried if i in layout.merged]
    # an older summary merged into a carried message is rewritten too: count it as summarized
    summarized_tokens = (
        sum(counts[b.head_end : b.tail_start])
        - sum(counts[i] for i in kept_mid)
        + sum(_old_merged_summary_tokens(messages[i], counts[i]) for i in unmerged)
    )
    budget, built = _budget(job, targets, summarized_tokens)
    # a leading developer message is carried as it is (by id, role kept): no note on it
    system_note = (
        layout.has_system
        and messages[0].get("role") == "system"
        and not markers.has_system_note(content_text(messages[0]))
    )
    # the summary arrives framed (prefix, end marker) and the first compaction adds a
    # note: small budgets would otherwise "progress" by rewriting a summary into itself
    framing = _framing_tokens() + (rough_text_tokens(markers.system_note()) if system_note else 0)
    estimated = base["tokens_before"] - summarized_tokens + budget + framing
    previous = [
        i
        for i in layout.summaries
        if (b.head_end <= i < b.tail_start and i not in kept_mid) or i in unmerged
    ]
    no_progress = estimated >= base["tokens_before"] and not job.force
    fields: dict[str, Any] = {
        **base, "head_end": b.head_end, "tail_start": b.tail_start,
        "compress_start": b.head_end, "compress_end": b.tail_start,
        "head_count": b.head_end, "tail_count": n - b.tail_start,
        "pinned": b.pinned, "carried": b.carried, "unmerged": unmerged,
        "summary_role": role, "merged_into_tail": merge_index is not None,
        "merge_index": merge_index, "orphans": orphans, "system_note": system_note,
        "previous_summary_index": max(previous, default=None), "summary_budget_tokens": budget,
        "summarized_tokens": summarized_tokens, "estimated_tokens_after": estimated,
        "notes": b.notes, "action": "skip" if no_progress else "compress",
        "skip_reason": "no_progress" if no_progress else None,
    }  # fmt: skip
    return PlanDraft(job, fields, targets, built)


def _budget(
    job: _Job, targets: list[int], summarized_tokens: int
) -> tuple[int, tuple[list[Prune], int] | None]:
    """The summary budget, and the rewrites when it depends on what they save.

    The budget grows with the summarized tokens minus the savings; when the bound on
    the savings gives the same budget as no savings at all, the rewrites can wait.
    """
    config, window = job.config, job.context_length
    budget = config.summary_budget(summarized_tokens, window)
    # a scan that already holds rewrites (a re-plan) has them at hand: no bound needed
    if not job.scan.resolved and budget == config.summary_budget(
        summarized_tokens - _saved_at_most(job, targets), window
    ):
        return budget, None
    built = _middle(job, targets)
    return config.summary_budget(summarized_tokens - built[1], window), built
