"""Expanding a compaction: the original messages its summary replaced, in order.

Read-only; what is shown is redacted (secrets never leave the log), and a message that
was itself an earlier summary names the compaction that wrote it, so an agent or a user
can walk a chain back one compaction at a time.
"""

from __future__ import annotations

import msgspec

from ctxledger.analysis.compactions import SUMMARY_ORIGINS, find_compaction
from ctxledger.analysis.redacted import shown_message
from ctxledger.compressor.redact import redact
from ctxledger.errors import UnknownMessage
from ctxledger.integers import shown
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import JSON
from ctxledger.projections.transcript import load_bodies

__all__ = ["ExpandedMessage", "Expansion", "expand"]


class ExpandedMessage(msgspec.Struct, frozen=True, kw_only=True):
    message_id: str
    session_id: str
    seq: int
    role: str
    #: ``appended``, or ``summary``/``merged`` for an earlier summary this one re-summarized
    origin: str
    tokens: int
    message: JSON
    #: for an earlier summary: the compaction that wrote it (expand it to go further back)
    compaction_id: str | None = None


class Expansion(msgspec.Struct, frozen=True, kw_only=True):
    compaction_id: str
    session_id: str
    new_session_id: str
    summary_text: str
    messages: list[ExpandedMessage]


def expand(ledger: Ledger, compaction_id: str) -> Expansion:
    """The original messages a compaction's summary replaced, in order (read-only)."""
    ledger.refresh()
    record = find_compaction(ledger, compaction_id)
    transcript = ledger.transcript
    out: list[ExpandedMessage] = []
    ids = record.summary.input_message_ids
    # bodies a rebuild left in the log: one batch read, not one read per message
    load_bodies([transcript.state.messages[m] for m in ids if m in transcript.state.messages])
    for mid in ids:
        stored = transcript.state.messages.get(mid)
        if stored is None:
            raise UnknownMessage(
                f"message {shown(mid)} of compaction {shown(record.compaction_id)} is not in the log"
            )
        writer = None
        if stored.origin in SUMMARY_ORIGINS:
            writer = ledger.chains.lineage(stored.session_id).compaction_id
        out.append(
            ExpandedMessage(
                message_id=mid,
                session_id=stored.session_id,
                seq=stored.seq,
                role=str(stored.message.get("role") or ""),
                origin=stored.origin,
                tokens=stored.tokens,
                message=shown_message(stored.message),  # secrets never leave the log
                compaction_id=writer,
            )
        )
    return Expansion(
        compaction_id=record.compaction_id,
        session_id=record.session_id,
        new_session_id=record.new_session_id,
        summary_text=redact(record.summary.text),
        messages=out,
    )
