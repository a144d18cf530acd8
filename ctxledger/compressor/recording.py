"""Recording one compaction: from a session's live view to the events that record it.

``prepare`` plans (pure) and builds the summarizer request; ``record`` turns the plan
and the summary into the events of one atomic multi-stream append (the ledger builds
the append; this module never imports the store): on the old
session ``ToolResultsPruned``, ``SummaryGenerated``, the summarizer's
``UsageReported`` and ``SessionSwitched`` (which ends it); on the continuation its
``SessionStarted``. Nothing here touches the store.
"""

from __future__ import annotations

import bisect
from typing import Any, cast

import msgspec

from ctxledger.clock import Clock, IdGenerator
from ctxledger.compressor.assemble import apply as assemble
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.markers import split_merged
from ctxledger.compressor.plancache import PlanCache
from ctxledger.compressor.planner import CompactionPlan, plan, rough_counts
from ctxledger.compressor.redact import redact
from ctxledger.compressor.serialize import strip_reasoning
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult, request_hash
from ctxledger.errors import CompressionError
from ctxledger.events import (
    Event,
    LayoutEntry,
    PruneEntry,
    SessionStarted,
    SessionSwitched,
    SummaryGenerated,
    ToolResultsPruned,
    Trigger,
    UsageReported,
    envelope,
)
from ctxledger.messages import JSON, SystemRole, content_text, stored_role
from ctxledger.tokens import count_message, count_message_after
from ctxledger.usage import CanonicalUsage

#: the scans of the live views planned lately: their messages are the projections',
#: never mutated in place, so a session re-planned as it grows scans only what is new
PLAN_CACHE = PlanCache()


class CompactionInput(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a compaction decision depends on (what `replay --verify` re-runs)."""

    session_id: str
    model: str
    context_length: int
    encoding: str
    messages: list[JSON]
    #: parallel to ``messages``; None for the system message
    message_ids: list[str | None]
    exact_tokens: list[int]
    tools_tokens: int = 0
    pinned_ids: list[str] = msgspec.field(default_factory=list)
    compaction_count: int = 0
    expected_version: int = 0
    #: the role the system prompt is given back in: ``messages`` holds it as ``system``
    #: (the planner's rules for the system prompt apply alike), the switch keeps the role
    system_role: SystemRole = "system"


class Prepared(msgspec.Struct, frozen=True, kw_only=True):
    input: CompactionInput
    config: CompressionConfig
    plan: CompactionPlan
    request: SummaryRequest | None
    previous_summary_id: str | None = None


def token_counts(inp: CompactionInput, config: CompressionConfig) -> list[int]:
    """The counts the planner sees: stored exact counts, or Hermes's rough estimate."""
    if config.estimator == "rough":
        return rough_counts(inp.messages)
    return list(inp.exact_tokens)


def prepare(
    inp: CompactionInput,
    config: CompressionConfig,
    *,
    focus: str | None = None,
    force: bool = False,
) -> Prepared:
    """Plan the compaction (pure) and build the summarizer's request."""
    counts = token_counts(inp, config)
    wanted = set(inp.pinned_ids)
    pinned = (
        [i for i, mid in enumerate(inp.message_ids) if mid is not None and mid in wanted]
        if wanted
        else []
    )
    the_plan = plan(
        inp.messages,
        config,
        counts,
        context_length=inp.context_length,
        focus=focus,
        pinned=pinned,
        compaction_count=inp.compaction_count,
        force=force,
        cache=PLAN_CACHE,
    )
    if the_plan.action != "compress":
        return Prepared(input=inp, config=config, plan=the_plan, request=None)
    return Prepared(
        input=inp,
        config=config,
        plan=the_plan,
        request=summary_request(inp, the_plan, focus),
        previous_summary_id=(
            inp.message_ids[the_plan.previous_summary_index]
            if the_plan.previous_summary_index is not None
            else None
        ),
    )


def summary_request(
    inp: CompactionInput, the_plan: CompactionPlan, focus: str | None
) -> SummaryRequest:
    """The middle as the summarizer sees it: prunes applied, the previous summary split out.

    Only the summarized messages go in (pinned and carried ones stay verbatim). A
    previous summary, standalone or merged into a message, becomes ``previous_summary``
    (update mode); the message it was merged into is summarized like any other.
    """
    replaced = {p.index: p.replacement for p in the_plan.prunes}
    messages, indices = inp.messages, the_plan.summarized_indices()
    get = replaced.get
    turns: list[JSON] = [get(i, messages[i]) for i in indices]
    originals: list[JSON] = [messages[i] for i in indices]
    previous: str | None = None
    at = the_plan.previous_summary_index
    k = bisect.bisect_left(indices, at) if at is not None else len(indices)
    split = split_merged(messages[at]) if k < len(indices) and indices[k] == at else None
    if split is not None:  # a previous summary: its text goes apart, its message's own stays
        previous, original = split
        if original is None:
            del turns[k], originals[k]
        else:
            turns[k] = originals[k] = original
    if previous is None and the_plan.previous_summary_index is not None:
        # an older summary merged into a carried message ("unmerged"): its text is the previous summary
        split = split_merged(inp.messages[the_plan.previous_summary_index])
        previous = split[0] if split is not None else None
    return SummaryRequest(
        turns=turns,
        budget_tokens=the_plan.summary_budget_tokens,
        previous_summary=previous,
        focus=focus,
        session_model=inp.model,
        originals=originals if replaced else None,
    )


class RecordedCompaction(msgspec.Struct, frozen=True, kw_only=True):
    """The events of one compaction, ready for one atomic two-stream append."""

    compaction_id: str
    new_session_id: str
    #: the old session's stream: ``old_events`` expect it at ``expected_version``
    session_id: str
    old_events: list[Event]
    expected_version: int | None
    #: the continuation's stream, new (version 0): its ``SessionStarted``
    new_events: list[Event]
    switch: SessionSwitched
    summary: SummaryGenerated
    #: the continuation's API view (system message first when there is one), as assembled;
    #: a message carried unchanged is the caller's own object (shared: do not mutate)
    messages: list[JSON]


def build_layout(
    prepared: Prepared, summary_text: str, ids: IdGenerator
) -> tuple[str | None, int, list[LayoutEntry], list[JSON]]:
    """Assemble the continuation (pure given the ids) and describe it as layout entries."""
    inp = prepared.input
    # carried messages are recorded by id and only read here: no copies of them
    assembled = assemble(prepared.plan, inp.messages, summary_text, copy_carried=False)
    system_prompt: str | None = None
    system_tokens = 0
    layout: list[LayoutEntry] = []
    for message, entry in zip(assembled.messages, assembled.entries, strict=True):
        if entry.origin == "system":
            system_prompt = content_text(message)
            system_tokens = (
                count_message(message, inp.encoding)
                if message != inp.messages[0]
                else inp.exact_tokens[0]
            )
            continue
        if entry.origin == "carried":
            assert entry.source_index is not None
            mid = inp.message_ids[entry.source_index]
            assert mid is not None
            layout.append(
                LayoutEntry(
                    message_id=mid, origin="carried", tokens=inp.exact_tokens[entry.source_index]
                )
            )
            continue
        source_id = inp.message_ids[entry.source_index] if entry.source_index is not None else None
        if entry.origin == "merged" and entry.source_index is not None:
            # the summary follows the message's own text: counted from that text's count when known
            tokens = count_message_after(message, inp.messages[entry.source_index], inp.encoding)
        else:
            tokens = count_message(message, inp.encoding)
        layout.append(
            LayoutEntry(
                message_id=ids("msg"),
                origin=entry.origin,
                message=message,
                tokens=tokens,
                source_id=source_id,
            )
        )
    return system_prompt, system_tokens, layout, assembled.messages


def record(
    prepared: Prepared,
    result: SummaryResult,
    *,
    trigger: Trigger,
    clock: Clock,
    ids: IdGenerator,
) -> RecordedCompaction:
    """The events of one compaction, as one atomic two-stream append."""
    inp, the_plan = prepared.input, prepared.plan
    if the_plan.action != "compress" or prepared.request is None:
        raise CompressionError(f"nothing to record: the plan was skipped ({the_plan.skip_reason})")
    text = redact(strip_reasoning(result.text)).strip()  # reasoning never reaches a summary
    if not text:
        raise CompressionError("the summarizer returned an empty summary")
    compaction_id = ids("cmp")
    new_session_id = ids("ses")
    layout = build_layout(prepared, text, ids)
    sid = inp.session_id

    def env() -> dict[str, Any]:
        return envelope(sid, ids, clock)

    old: list[Event] = []
    if the_plan.prunes:
        old.append(_prune_event(inp, the_plan, env(), compaction_id))
    summary = _summary_event(prepared, result, text, env(), compaction_id)
    old.append(summary)
    if result.usage is not None:
        old.append(_summarizer_usage(result, result.usage, env()))
    switch = _switch_event(prepared, env(), compaction_id, new_session_id, trigger, layout)
    old.append(switch)
    started = SessionStarted(
        **envelope(new_session_id, ids, clock),
        model=inp.model,
        context_length=inp.context_length,
        parent_session_id=sid,
        reason="compression",
        compaction_id=compaction_id,
        encoding=inp.encoding,
        config=prepared.config.to_snapshot(),
    )
    return RecordedCompaction(
        compaction_id=compaction_id,
        new_session_id=new_session_id,
        session_id=sid,
        old_events=old,
        expected_version=inp.expected_version,
        new_events=[started],
        switch=switch,
        summary=summary,
        messages=layout[3],
    )


def _prune_event(
    inp: CompactionInput, the_plan: CompactionPlan, fields: dict[str, Any], compaction_id: str
) -> ToolResultsPruned:
    """The tool results the plan pruned in the kept head and tail, with their one-liners."""
    entries = [
        PruneEntry(message_id=_id(inp, p.index), kind=p.kind, replacement=p.replacement)
        for p in the_plan.prunes
    ]
    return ToolResultsPruned(**fields, compaction_id=compaction_id, entries=entries)


def _summarizer_usage(
    result: SummaryResult, usage: CanonicalUsage, fields: dict[str, Any]
) -> UsageReported:
    """What the summarizer's own model call cost, as a usage report of purpose summarizer."""
    return UsageReported(
        **fields,
        raw=msgspec.to_builtins(usage),
        shape="canonical",
        usage=usage,
        model=result.model,
        purpose="summarizer",
    )


def _switch_event(
    prepared: Prepared,
    env: dict[str, Any],
    compaction_id: str,
    new_session_id: str,
    trigger: Trigger,
    built: tuple[str | None, int, list[LayoutEntry], list[JSON]],
) -> SessionSwitched:
    """The switch: the continuation's layout (carried ids, new messages in full), the plan."""
    inp, the_plan = prepared.input, prepared.plan
    system_prompt, system_tokens, layout, new_messages = built
    return SessionSwitched(
        **env,
        compaction_id=compaction_id,
        new_session_id=new_session_id,
        trigger=trigger,
        system_prompt=system_prompt,
        system_prompt_tokens=system_tokens,
        system_prompt_role=stored_role(inp.system_role),
        layout=layout,
        plan=msgspec.to_builtins(the_plan),
        config=prepared.config.to_snapshot(),
        tokens_before=sum(inp.exact_tokens) + inp.tools_tokens,
        tokens_after=system_tokens + sum(e.tokens for e in layout) + inp.tools_tokens,
        messages_before=len(inp.messages),
        messages_after=len(new_messages),
    )


def _summary_event(
    prepared: Prepared, result: SummaryResult, text: str, env: dict[str, Any], compaction_id: str
) -> SummaryGenerated:
    inp, the_plan = prepared.input, prepared.plan
    assert prepared.request is not None  # record() checked it
    return SummaryGenerated(
        **env,
        compaction_id=compaction_id,
        summarizer=result.summarizer,
        model=result.model,
        prompt_hash=result.prompt_hash or request_hash(prepared.request),
        input_message_ids=_ids(inp, the_plan.summarized_indices()),
        budget_tokens=the_plan.summary_budget_tokens,
        focus=the_plan.focus,
        previous_summary_id=prepared.previous_summary_id,
        text=text,
        fallback=result.fallback,
        failure=result.failure,
        failure_class=result.failure_class,
        usage=result.usage,
    )


def _ids(inp: CompactionInput, indices: list[int]) -> list[str]:
    """The ids of the messages at `indices` (one pass; :func:`_id` names a missing one)."""
    ids = inp.message_ids
    found = [ids[i] for i in indices]
    if None in found:
        for i in indices:
            _id(inp, i)  # raises for the first without an id
    return cast("list[str]", found)  # (no None left: checked above)


def _id(inp: CompactionInput, index: int) -> str:
    mid = inp.message_ids[index]
    if mid is None:
        raise CompressionError(f"message {index} has no id (the system prompt cannot be compacted)")
    return mid
