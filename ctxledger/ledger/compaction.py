"""Running a compaction against a ledger: read the live view, plan, summarize, append.

The planning and event building are pure (``compressor.engine``); this module adds
the effects: reading the projection, calling the summarizer, and the single atomic
append that ends the old session and starts its continuation. A stale expected
version (another writer compacted first) raises ``ConcurrencyError`` and nothing is
written; the caller re-reads and continues on the compression tip.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ctxledger.collector import collector_paused
from ctxledger.compressor.assemble import feedback
from ctxledger.compressor.config import CompressionConfig, checked_config
from ctxledger.compressor.recording import (
    CompactionInput,
    Prepared,
    RecordedCompaction,
    prepare,
    record,
)
from ctxledger.compressor.redact import redact
from ctxledger.compressor.summarizers.base import Summarizer, SummaryResult
from ctxledger.compressor.summarizers.fallback import summarize_with_fallback
from ctxledger.errors import FailureClass, SummarizerError
from ctxledger.events import CompressionSkipped, Event, SessionStarted, Trigger
from ctxledger.eventstore.base import AppendRequest
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import recorded_loop, with_loop
from ctxledger.limits import MAX_FOCUS_CHARS, check_limit_variables, check_name
from ctxledger.projections import Projector


class CompactionOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a compaction did (or why it did not)."""

    session_id: str
    action: str  # "compressed" | "skipped" | "dry_run"
    plan: dict[str, Any]
    new_session_id: str | None = None
    compaction_id: str | None = None
    skip_reason: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    messages_before: int = 0
    messages_after: int = 0
    fallback: bool = False
    failure: str | None = None
    failure_class: FailureClass | None = None
    #: messages the summary replaced (the plan's summarized ones; in a dry run, those it
    #: would replace; 0 when skipped)
    removed: int = 0
    feedback: str = ""
    summary_text: str | None = None


def compaction_input(source: Ledger | Projector, session_id: str) -> CompactionInput:
    """Snapshot of everything a compaction of `session_id` depends on, from the projections.

    `source` is a ledger (its live projections) or any projector, e.g. one folded up
    to just before a recorded compaction (``replay --verify``).
    """
    projector = source.projector if isinstance(source, Ledger) else source
    t = projector.transcript
    view = t.session(session_id)
    messages = t.api_messages(session_id)
    if view.system_role != "system" and view.system_prompt is not None:
        messages[0] = {"role": "system", "content": view.system_prompt}  # (see system_role)
    ids: list[str | None] = [None] if view.system_prompt is not None else []
    ids.extend(view.live)
    return CompactionInput(
        session_id=session_id,
        model=view.model,
        context_length=view.context_length,
        encoding=view.encoding,
        messages=messages,
        message_ids=ids,
        exact_tokens=t.api_tokens(session_id),
        tools_tokens=view.tools_tokens,
        pinned_ids=list(view.pinned),
        compaction_count=projector.chains.compression_count(session_id),
        expected_version=view.version,
        system_role=view.system_role,
    )


def plan_compaction(
    ledger: Ledger,
    session_id: str,
    *,
    config: CompressionConfig | None = None,
    focus: str | None = None,
    force: bool = True,
) -> Prepared:
    """Plan without appending anything (``compress --dry-run``)."""
    if focus is not None:  # a number or a lone surrogate failed deep in the summarizer
        focus = str(check_name(focus, "focus", MAX_FOCUS_CHARS, lines=True))  # (a str subclass)
    ledger.live_session(session_id)
    return prepare(  # (a dict of settings as config was an AttributeError in the planner)
        compaction_input(ledger, session_id),
        checked_config(config) or ledger.config,
        focus=focus,
        force=force,
    )


def _skipped(prepared: Prepared, base: dict[str, Any], rough: int) -> CompactionOutcome:
    """The outcome of a plan that compacts nothing: the conversation as it was (`rough`:
    the rough request size, system prompt + messages + tools schema)."""
    messages = prepared.input.messages
    return CompactionOutcome(
        **base,
        action="skipped",
        skip_reason=prepared.plan.skip_reason,
        messages_after=len(messages),
        tokens_after=base["tokens_before"],
        feedback=feedback(messages, messages, rough, rough),
    )


def _record_skip(
    ledger: Ledger, session_id: str, trigger: Trigger, reason: str | None, plan: Any
) -> None:
    """The planner found nothing worth compacting: say so in the log."""
    skipped = CompressionSkipped(
        **ledger.event_fields(session_id),
        trigger=trigger,
        reason=reason or "skipped",
        details={"plan": plan},
    )
    ledger.append_events(session_id, [skipped])


def abort_record(exc: SummarizerError) -> tuple[str, dict[str, Any]]:
    """The reason and details of the ``CompressionSkipped`` an aborting failure records
    (from :func:`compact` and the service alike): ``details["error"]`` is the error's text
    redacted (a refused key can be quoted in it), at most 500 characters, and is what
    every output of the abort shows (one-lined by :func:`reason_line`)."""
    reason = f"summarizer failed ({exc.failure_class}): compaction aborted, nothing changed"
    details = {
        "error": redact(str(exc))[:500],
        "failure_class": exc.failure_class,
        "status": exc.status,
    }
    return reason, details


def abort_feedback(ledger: Ledger, session_id: str, error: str) -> str:
    """What a manual compaction abandoned by an aborting failure tells (Hermes's
    ``/compress``): the messages preserved, the request's rough size, nothing removed and
    `error` (:func:`abort_record`'s, already redacted) as the reason."""
    view, size = ledger.transcript.api_view(session_id), ledger.transcript.rough_tokens(session_id)
    return feedback(view, view, size, size, failure="aborted", reason=error)


def _record_abort(ledger: Ledger, session_id: str, trigger: Trigger, exc: SummarizerError) -> None:
    reason, details = abort_record(exc)
    skipped = CompressionSkipped(
        **ledger.event_fields(session_id), trigger=trigger, reason=reason, details=details
    )
    ledger.append_events(session_id, [skipped])


def carry_loop(event: Event, loop: str) -> Event:
    """`event` (a continuation's ``SessionStarted``) naming `loop` in its config snapshot."""
    if not isinstance(event, SessionStarted):
        return event
    return msgspec.structs.replace(event, config=with_loop(event.config, loop))


def append_recorded(ledger: Ledger, recorded: RecordedCompaction) -> None:
    """Append a recorded compaction: both streams in one atomic, checked append. The
    continuation's start carries the loop the compacted session's host named."""
    loop = recorded_loop(ledger.transcript.session(recorded.session_id).config)
    new_events = recorded.new_events
    if loop is not None:
        new_events = [carry_loop(e, loop) for e in new_events]
    ledger.append(
        [
            AppendRequest(recorded.session_id, recorded.old_events, recorded.expected_version),
            AppendRequest(recorded.new_session_id, new_events, 0),
        ],
        own=True,  # built here from the projections, handed to no one: folded as written
    )


async def compact(
    ledger: Ledger,
    session_id: str,
    summarizer: Summarizer,
    *,
    config: CompressionConfig | None = None,
    focus: str | None = None,
    trigger: Trigger = "manual",
    dry_run: bool = False,
    record_skip: bool = True,
    record_abort: bool = True,
) -> CompactionOutcome:
    """Compact a live session. Manual compaction (``trigger="manual"``) forces a plan.

    Summarizer failures that abort (auth, network) propagate as ``SummarizerError``
    with the conversation unchanged and, unless `record_abort` is false (the service
    records its own, with a cooldown), a ``CompressionSkipped`` naming the failure
    class; other failures (not configured included) use the recorded fallback summary.
    """
    if not dry_run:  # (a bad CTXLEDGER_MAX_* fails before the summarizer is paid, not after)
        check_limit_variables()
    with collector_paused():
        prepared = plan_compaction(
            ledger, session_id, config=config, focus=focus, force=trigger == "manual"
        )
    inp, the_plan = prepared.input, prepared.plan
    base: dict[str, Any] = {
        "session_id": session_id,
        "tokens_before": sum(inp.exact_tokens) + inp.tools_tokens,
        "messages_before": len(inp.messages),
    }
    # the request's rough size (system + messages + tools), as Hermes's /compress reports it
    rough_before = ledger.transcript.rough_tokens(session_id)
    if the_plan.action != "compress" or prepared.request is None:
        plan_dict = msgspec.to_builtins(the_plan)
        if record_skip and not dry_run:
            _record_skip(ledger, session_id, trigger, the_plan.skip_reason, plan_dict)
        return _skipped(prepared, {**base, "plan": plan_dict}, rough_before)
    if dry_run:
        return CompactionOutcome(
            **base,
            plan=msgspec.to_builtins(the_plan),
            action="dry_run",
            tokens_after=the_plan.estimated_tokens_after,
            removed=len(the_plan.summarized_indices()),  # what the plan would replace
        )
    try:
        result = await summarize_with_fallback(summarizer, prepared.request)
    except SummarizerError as exc:
        if record_abort:
            _record_abort(ledger, session_id, trigger, exc)
        raise
    with collector_paused():
        recorded = record(prepared, result, trigger=trigger, clock=ledger.clock, ids=ledger.ids)
        append_recorded(ledger, recorded)
        sizes = (rough_before, ledger.transcript.rough_tokens(recorded.new_session_id))
        return _compressed(base, prepared, recorded, result, sizes)


def _compressed(
    base: dict[str, Any],
    prepared: Prepared,
    recorded: RecordedCompaction,
    result: SummaryResult,
    sizes: tuple[int, int],
) -> CompactionOutcome:
    """The outcome of a compaction that was recorded (`sizes`: the rough request size
    before and after)."""
    after = recorded.messages  # the continuation as assembled (equal to its folded view)
    removed = len(prepared.plan.summarized_indices())
    told = feedback(
        prepared.input.messages,
        after,
        *sizes,
        failure="fallback" if result.fallback else None,
        reason=result.failure,
        removed=removed,
    )
    return CompactionOutcome(
        **base,
        plan=recorded.switch.plan,  # the plan's plain form, built once for the switch
        action="compressed",
        new_session_id=recorded.new_session_id,
        compaction_id=recorded.compaction_id,
        tokens_after=recorded.switch.tokens_after,
        messages_after=recorded.switch.messages_after,
        fallback=result.fallback,
        failure=result.failure,
        failure_class=result.failure_class,
        removed=removed,
        feedback=told,
        summary_text=recorded.summary.text,
    )
