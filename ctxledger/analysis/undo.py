"""Undo a compaction: the view it replaced becomes live again, as a new continuation.

Nothing is deleted or rewritten. :func:`undo` appends, in one atomic append, a
``SessionSwitched(reason="revert")`` on the chain's live tip and a
``SessionStarted(reason="revert", parent_session_id=tip, compaction_id=<reverted>)``
for the new session. The switch's layout carries, by id:

1. the live view of the session the compaction compacted, exactly as it was just
   before the compaction (its system prompt too, without the compaction's note), then
2. every message the agent appended anywhere in the chain after that compaction,
   in append order.

Both leave out a reply a later compaction of the chain carried into its continuation
and that continuation withdrew (a provisional reply the client went on without): the
ended sessions' views still hold it (:func:`~ctxledger.ledger.carried.withdrawn_carried`),
and the proxy's recorded line leaves it out too.

Keeping (2) is deliberate: an undo restores what the summary replaced, it does not
throw away the work done since. The result may be larger than the window; the
next trigger compacts it again (pinning what matters first is the way to make the
next compaction keep it). Pins of the restored session and of the tip stay pinned.
When the restored view reaches the compaction threshold (or the window itself),
:attr:`UndoResult.warnings` says so and what the next turn will do, and the same text
is recorded as a ``NoticeIssued`` on the new session, in the same atomic append.
"""

from __future__ import annotations

import msgspec

from ctxledger.analysis.compactions import CompactionRecord, find_compaction, reverted_compactions
from ctxledger.errors import InvalidInput
from ctxledger.events import (
    Event,
    LayoutEntry,
    MessagePinned,
    NoticeIssued,
    SessionStarted,
    SessionSwitched,
)
from ctxledger.eventstore.base import AppendRequest
from ctxledger.integers import shown
from ctxledger.ledger.carried import withdrawn_carried
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import recorded_loop, with_loop
from ctxledger.messages import stored_role


class UndoResult(msgspec.Struct, frozen=True, kw_only=True):
    compaction_id: str
    #: the session whose pre-compaction view was restored
    restored_session_id: str
    #: the tip that the revert ended
    previous_tip: str
    new_session_id: str
    restored_messages: int
    appended_after: int
    tokens_before: int
    tokens_after: int
    messages_after: int
    #: the window of the new session and the threshold the next turn checks against
    context_length: int = 0
    threshold_tokens: int = 0
    #: set when the restored view is at or over the threshold (or the window)
    warnings: list[str] = msgspec.field(default_factory=list)


def undo_warnings(tokens: int, context_length: int, threshold_tokens: int) -> list[str]:
    """What to tell the user when an undo restores a view the next turn must compact again."""
    if tokens > context_length:
        return [
            f"the restored view holds {tokens:,} tokens, more than the {context_length:,}-token "
            "window: no model call can take it as it is, so the next turn compacts it again "
            f"(preflight, at {threshold_tokens:,} tokens); pin what must survive first "
            "(`ctxledger pin`)"
        ]
    if tokens >= threshold_tokens:
        return [
            f"the restored view holds {tokens:,} tokens, at or over the compaction threshold "
            f"({threshold_tokens:,} of a {context_length:,}-token window): the next turn "
            "compacts it again; pin what must survive first (`ctxledger pin`)"
        ]
    return []


def appended_since(ledger: Ledger, record: CompactionRecord, tip: str) -> list[str]:
    """Ids of the messages appended in the chain after `record`, in append order."""
    chain = ledger.chains.chain(tip)
    start = chain.index(record.new_session_id)
    messages = ledger.transcript.state.messages
    out: list[str] = []
    for sid in chain[start : chain.index(tip) + 1]:
        for mid in ledger.transcript.session(sid).live:
            stored = messages.get(mid)
            if stored is not None and stored.session_id == sid and stored.origin == "appended":
                out.append(mid)
    return out


def _revert_events(
    ledger: Ledger, record: CompactionRecord, tip: str
) -> tuple[SessionSwitched, list[Event]]:
    """The switch ending `tip` and the new session's events (its start, restored pins)."""
    tip_view = ledger.transcript.session(tip)
    restored = ledger.transcript.session(record.session_id)
    # a reply a later compaction carried and its continuation withdrew stays out: the
    # ended sessions' views still hold it (:mod:`ctxledger.ledger.carried`)
    gone = withdrawn_carried(ledger, ledger.chains.chain(tip))
    kept = [mid for mid in restored.live if mid not in gone]
    after = [mid for mid in appended_since(ledger, record, tip) if mid not in gone]
    tokens_of = ledger.transcript.tokens_of
    layout = [LayoutEntry(message_id=mid, tokens=tokens_of(mid)) for mid in [*kept, *after]]
    new_session_id = ledger.ids("ses")
    switch = SessionSwitched(
        **ledger.event_fields(tip),
        compaction_id=record.compaction_id,
        new_session_id=new_session_id,
        reason="revert",
        system_prompt=restored.system_prompt,
        system_prompt_tokens=restored.system_tokens,
        system_prompt_role=stored_role(restored.system_role),
        layout=layout,
        plan={
            "action": "revert",
            "reverted_compaction_id": record.compaction_id,
            "restored_session_id": record.session_id,
            "restored_messages": len(kept),
            "appended_after": len(after),
        },
        config=ledger.config.to_snapshot(),
        tokens_before=ledger.transcript.total_tokens(tip),
        tokens_after=restored.system_tokens + tip_view.tools_tokens + sum(e.tokens for e in layout),
        messages_before=len(tip_view.live) + int(tip_view.system_prompt is not None),
        messages_after=len(layout) + int(restored.system_prompt is not None),
    )
    started: list[Event] = [
        SessionStarted(
            **ledger.event_fields(new_session_id),
            model=tip_view.model,
            context_length=tip_view.context_length,
            parent_session_id=tip,
            reason="revert",
            compaction_id=record.compaction_id,
            encoding=tip_view.encoding,
            config=with_loop(ledger.config.to_snapshot(), recorded_loop(tip_view.config)),
        )
    ]
    # the projection carries the tip's pins; pins the compaction had dropped come back here
    in_layout = {entry.message_id for entry in layout}
    for mid in restored.pinned:
        if mid in in_layout and mid not in tip_view.pinned:
            started.append(MessagePinned(**ledger.event_fields(new_session_id), message_id=mid))
    return switch, started


def undo(ledger: Ledger, compaction_id: str) -> UndoResult:
    """Revert a compaction (one atomic append); see the module docstring for what is restored."""
    ledger.refresh()
    record = find_compaction(ledger, compaction_id)
    done = reverted_compactions(ledger, record.session_id)
    if record.compaction_id in done:
        raise InvalidInput(
            f"compaction {shown(record.compaction_id)} was already undone (session {shown(done[record.compaction_id])})"
        )
    tip = ledger.tip(record.session_id)
    ledger.live_session(
        tip
    )  # a closed chain cannot be reverted: SessionEndedError, nothing appended
    if record.compaction_id not in ledger.chains.compaction_ids_in_effect(tip):
        # an older compaction was undone since: reverting this one would bring back
        # the very compactions that undo removed
        raise InvalidInput(
            f"compaction {shown(record.compaction_id)} is no longer in effect at the tip {shown(tip)} "
            "(an older compaction of the chain was undone since); `ctxledger chain "
            f"{tip}` shows the compactions in effect"
        )
    switch, started = _revert_events(ledger, record, tip)
    window = ledger.transcript.session(tip).context_length
    threshold = ledger.config.threshold_tokens(window)
    warnings = undo_warnings(switch.tokens_after, window, threshold)
    started += [
        NoticeIssued(
            **ledger.event_fields(switch.new_session_id), code="undo_over_threshold", text=w
        )
        for w in warnings
    ]
    ledger.append(
        [
            AppendRequest(tip, [switch], ledger.version(tip)),
            AppendRequest(switch.new_session_id, started, 0),
        ]
    )
    return UndoResult(
        compaction_id=record.compaction_id,
        restored_session_id=record.session_id,
        previous_tip=tip,
        new_session_id=switch.new_session_id,
        restored_messages=int(switch.plan["restored_messages"]),
        appended_after=int(switch.plan["appended_after"]),
        tokens_before=switch.tokens_before,
        tokens_after=ledger.transcript.total_tokens(switch.new_session_id),
        messages_after=switch.messages_after,
        context_length=window,
        threshold_tokens=threshold,
        warnings=warnings,
    )


__all__ = ["UndoResult", "appended_since", "undo", "undo_warnings"]
