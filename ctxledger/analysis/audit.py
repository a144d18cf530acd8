"""Audit and trace: which salient facts each compaction kept, lost, or lost again later.

A compaction replaces its middle by a summary. :func:`audit_chain` extracts the
salient facts (``ctxledger.compressor.facts``) of every middle, as the model saw it (a persisted
tool output is audited as the preview that was live; its full text stays
recallable), and checks each against the summary text with normalized matching.
Facts a summary kept are *carried* by that summary message: when a later compaction
re-summarizes it, those facts are part of its middle too (``source="summary"``), and
one the new summary drops is reported as lost at that re-compression, still
attributed to the message it first came from.

:func:`trace` follows one fact through the chain: where it appeared, what each
compaction did with it, and whether the current live view still states it.

Compactions are looked up in :mod:`ctxledger.analysis.compactions`. Everything here is
read-only.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ctxledger.analysis.compactions import (
    SUMMARY_ORIGINS,
    CompactionRecord,
    chain_compactions,
    match_compaction,
    no_compaction,
    reverted_compactions,
)
from ctxledger.compressor.factmatch import contains
from ctxledger.compressor.facts import (
    Fact,
    extract_facts,
    fact_in_text,
    find_paths,
    normalize,
    normalize_fact,
)
from ctxledger.errors import InvalidInput
from ctxledger.ledger.facade import Ledger
from ctxledger.tokens import message_text

# --------------------------------------------------------------------------- audit


class AuditedFact(msgspec.Struct, frozen=True, kw_only=True):
    """A fact and where it came from: the message and the event (seq) that recorded it."""

    kind: str
    value: str
    normalized: str
    message_id: str | None
    session_id: str | None
    seq: int | None
    role: str
    #: ``middle``: in a message this compaction summarized; ``summary``: carried in by the
    #: previous summary (it was first summarized by ``first_compaction_id``)
    source: str
    first_compaction_id: str


class CompactionAudit(msgspec.Struct, frozen=True, kw_only=True):
    compaction_id: str
    session_id: str
    new_session_id: str
    index: int
    seq: int
    summarizer: str
    fallback: bool
    reverted: bool
    input_messages: int
    extracted: list[AuditedFact]
    kept: list[AuditedFact]
    lost: list[AuditedFact]
    retention: float
    #: facts an earlier summary had kept that this re-summary dropped
    lost_at_recompression: list[AuditedFact]


class RecompressionLoss(msgspec.Struct, frozen=True, kw_only=True):
    fact: AuditedFact
    kept_by: str
    lost_at: str
    recompression: int


class ChainAudit(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    root: str
    tip: str
    compactions: list[CompactionAudit]
    #: distinct facts of every middle of the chain
    facts: int
    #: of those, how many the tip's live view (summary or verbatim messages) still states
    known_now: int
    retention: float
    mean_compaction_retention: float
    lost_now: list[AuditedFact]
    lost_at_recompression: list[RecompressionLoss]


def split_kept(facts: list[AuditedFact], text: str) -> tuple[list[AuditedFact], list[AuditedFact]]:
    """``(kept, lost)``: which `facts` `text` still states (normalized matching), in order."""
    haystack = normalize(text)
    kept: list[AuditedFact] = []
    lost: list[AuditedFact] = []
    for fact in facts:
        (kept if contains(haystack, fact.normalized) else lost).append(fact)
    return kept, lost


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 1.0


class _Auditor:
    """Walks a chain's compactions in order, carrying kept facts from summary to summary."""

    def __init__(self, ledger: Ledger, reverted: Mapping[str, str]) -> None:
        self.ledger = ledger
        self.reverted = reverted
        #: summary message id -> (compaction that wrote it, the facts it kept)
        self.carried: dict[str, tuple[str, list[AuditedFact]]] = {}
        self.losses: list[RecompressionLoss] = []

    def _middle_facts(self, record: CompactionRecord, skip: set[str]) -> list[AuditedFact]:
        messages = self.ledger.transcript.state.messages
        stored = self.ledger.transcript.stored
        ids: list[str] = []
        for mid in record.summary.input_message_ids:
            if mid not in messages:
                continue
            if mid not in skip:
                ids.append(mid)
            elif messages[mid].origin == "merged" and messages[mid].source_id in messages:
                # a merged summary also holds a tail message nobody summarized before
                ids.append(str(messages[mid].source_id))
        # the live form: what the model saw and the summary replaced (a preview, if persisted)
        live = [stored(mid).message for mid in ids]
        out: list[AuditedFact] = []
        for fact in extract_facts(live, ids=ids):
            origin = messages[fact.message_id or ""]
            out.append(
                _audited(fact, origin.session_id, origin.seq, "middle", record.compaction_id)
            )
        return out

    def audit(self, record: CompactionRecord) -> CompactionAudit:
        previous = [mid for mid in record.summary.input_message_ids if mid in self.carried]
        inherited: dict[str, tuple[str, AuditedFact]] = {}
        for mid in previous:
            writer, facts = self.carried[mid]
            for fact in facts:
                inherited.setdefault(fact.normalized, (writer, fact))
        own = [
            f for f in self._middle_facts(record, set(previous)) if f.normalized not in inherited
        ]
        extracted = [fact for _, fact in inherited.values()] + own
        kept_facts, lost_facts = split_kept(extracted, record.summary.text)
        relost = [f for f in lost_facts if f.source == "summary"]
        for fact in relost:
            self.losses.append(
                RecompressionLoss(
                    fact=fact,
                    kept_by=inherited[fact.normalized][0],
                    lost_at=record.compaction_id,
                    recompression=record.index,
                )
            )
        carried_in = [msgspec.structs.replace(f, source="summary") for f in kept_facts]
        for entry in record.switch.layout:
            if entry.origin in SUMMARY_ORIGINS:
                self.carried[entry.message_id] = (record.compaction_id, carried_in)
        return CompactionAudit(
            compaction_id=record.compaction_id,
            session_id=record.session_id,
            new_session_id=record.new_session_id,
            index=record.index,
            seq=record.seq,
            summarizer=record.summary.summarizer,
            fallback=record.summary.fallback,
            reverted=record.compaction_id in self.reverted,
            input_messages=len(record.summary.input_message_ids),
            extracted=extracted,
            kept=kept_facts,
            lost=lost_facts,
            retention=_ratio(len(kept_facts), len(extracted)),
            lost_at_recompression=relost,
        )


def _audited(
    fact: Fact, session_id: str | None, seq: int | None, source: str, compaction_id: str
) -> AuditedFact:
    return AuditedFact(
        kind=fact.kind,
        value=fact.value,
        normalized=fact.normalized,
        message_id=fact.message_id,
        session_id=session_id,
        seq=seq,
        role=fact.role,
        source=source,
        first_compaction_id=compaction_id,
    )


def live_text(ledger: Ledger, session_id: str) -> str:
    """The text of a session's whole API view (system prompt included), as facts are matched in."""
    return "\n".join(
        message_text(m, text_only=True) for m in ledger.transcript.api_messages(session_id)
    )


def audit_chain(ledger: Ledger, session_id: str) -> ChainAudit:
    """Audit every compaction of the chain holding `session_id` (read-only)."""
    ledger.refresh()
    sid = ledger.resolve(session_id)
    records = chain_compactions(ledger, sid)
    auditor = _Auditor(ledger, reverted_compactions(ledger, sid))
    audits = [auditor.audit(r) for r in records]
    distinct: dict[str, AuditedFact] = {}
    for a in audits:
        for fact in a.extracted:
            distinct.setdefault(fact.normalized, fact)
    tip = ledger.tip(sid)
    known_now, lost_now = split_kept(list(distinct.values()), live_text(ledger, tip))
    return ChainAudit(
        session_id=sid,
        root=ledger.chains.root(sid),
        tip=tip,
        compactions=audits,
        facts=len(distinct),
        known_now=len(known_now),
        retention=_ratio(len(known_now), len(distinct)),
        mean_compaction_retention=(
            round(sum(a.retention for a in audits) / len(audits), 4) if audits else 1.0
        ),
        lost_now=lost_now,
        lost_at_recompression=auditor.losses,
    )


def audit_compaction(ledger: Ledger, compaction_id: str) -> CompactionAudit:
    """Audit one compaction (its chain's earlier compactions are audited to know what it inherited)."""
    ledger.refresh()
    cid, compacted = match_compaction(ledger, compaction_id)
    auditor = _Auditor(ledger, reverted_compactions(ledger, compacted))
    for record in chain_compactions(ledger, compacted):  # one read of the chain
        result = auditor.audit(record)
        if record.compaction_id == cid:
            return result
    raise no_compaction(compaction_id)


# --------------------------------------------------------------------------- chain reports


class CompactionBrief(msgspec.Struct, frozen=True, kw_only=True):
    compaction_id: str
    trigger: str
    session_id: str
    new_session_id: str
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    summarized: int
    fallback: bool


class ChainReport(msgspec.Struct, frozen=True, kw_only=True):
    tip: str
    sessions: int
    compactions: list[CompactionBrief]
    model_calls: int
    tokens_sent: int
    summarizer_calls: int
    summarizer_tokens: int
    facts: int
    facts_known_now: int
    retention: float
    mean_compaction_retention: float


def chain_report(
    ledger: Ledger, session_id: str, tokens_sent: int, model_calls: int
) -> ChainReport:
    """Compactions, summarizer usage and fact retention of one chain (read-only)."""
    tip = ledger.tip(session_id)
    chain = ledger.chains.chain(tip)
    briefs = [
        CompactionBrief(
            compaction_id=r.compaction_id,
            trigger=r.switch.trigger,
            session_id=r.session_id,
            new_session_id=r.new_session_id,
            messages_before=r.switch.messages_before,
            messages_after=r.switch.messages_after,
            tokens_before=r.switch.tokens_before,
            tokens_after=r.switch.tokens_after,
            summarized=len(r.summary.input_message_ids),
            fallback=r.summary.fallback,
        )
        for r in chain_compactions(ledger, tip)
    ]
    usage = ledger.chain_usage(tip)
    audit = audit_chain(ledger, tip)
    return ChainReport(
        tip=tip,
        sessions=len(chain),
        compactions=briefs,
        model_calls=model_calls,
        tokens_sent=tokens_sent,
        summarizer_calls=usage.summarizer_calls,
        summarizer_tokens=usage.summarizer.total,
        facts=audit.facts,
        facts_known_now=audit.known_now,
        retention=audit.retention,
        mean_compaction_retention=audit.mean_compaction_retention,
    )


# --------------------------------------------------------------------------- trace


class FactAppearance(msgspec.Struct, frozen=True, kw_only=True):
    message_id: str
    session_id: str
    seq: int
    role: str
    origin: str
    live: bool


class FactAtCompaction(msgspec.Struct, frozen=True, kw_only=True):
    compaction_id: str
    index: int
    #: ``kept`` (its middle held the fact and the summary states it), ``dropped``, or
    #: ``not_in_middle``
    status: str
    reverted: bool


class FactTrace(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    fact: str
    normalized: str
    appearances: list[FactAppearance]
    compactions: list[FactAtCompaction]
    live: bool
    live_message_ids: list[str]
    status: str


def _query_kind(value: str) -> str:
    """``quoted`` or ``path`` when the whole query is one (normalized as such facts are), else ``query``."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        return "quoted"
    slashed = value.replace("\\", "/")
    if "://" not in slashed and find_paths(slashed) == [slashed]:
        return "path"
    return "query"


def _fact(text: str) -> Fact:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(
            "the fact to trace is empty: give a value such as a path or an error line"
        )
    value = text.strip()
    kind = _query_kind(value)
    normalized = normalize_fact(kind, value)
    if not normalized:
        raise InvalidInput(
            f"the fact to trace {value!r} is empty once normalized: give a value inside the quotes"
        )
    return Fact(kind=kind, value=value, normalized=normalized, message_index=0)


def _states(fact: Fact, text: str) -> bool:
    return fact_in_text(fact, text)


def trace(ledger: Ledger, session_id: str, fact_text: str) -> FactTrace:
    """The life of one fact in the chain of `session_id` (read-only)."""
    fact = _fact(fact_text)
    ledger.refresh()
    sid = ledger.resolve(session_id)
    chain = set(ledger.chains.chain(sid))
    tip = ledger.tip(sid)
    live_ids = ledger.transcript.session(tip).live
    live_set = set(live_ids)
    holds: dict[str, bool] = {}
    appearances: list[FactAppearance] = []
    for mid, stored in ledger.transcript.state.messages.items():
        if stored.session_id not in chain:
            continue
        holds[mid] = _states(fact, message_text(stored.message, text_only=True))
        if holds[mid]:
            appearances.append(
                FactAppearance(
                    message_id=mid,
                    session_id=stored.session_id,
                    seq=stored.seq,
                    role=str(stored.message.get("role") or ""),
                    origin=stored.origin,
                    live=mid in live_set,
                )
            )
    reverted = reverted_compactions(ledger, sid)
    steps: list[FactAtCompaction] = []
    for record in chain_compactions(ledger, sid):
        in_middle = any(holds.get(mid, False) for mid in record.summary.input_message_ids)
        status = "not_in_middle"
        if in_middle:
            status = "kept" if _states(fact, record.summary.text) else "dropped"
        steps.append(
            FactAtCompaction(
                compaction_id=record.compaction_id,
                index=record.index,
                status=status,
                reverted=record.compaction_id in reverted,
            )
        )
    view = ledger.transcript.session(tip)
    in_system = view.system_prompt is not None and _states(fact, view.system_prompt)
    live_hits = [mid for mid in live_ids if _live_holds(ledger, mid, fact)]
    return FactTrace(
        session_id=sid,
        fact=fact.value,
        normalized=fact.normalized,
        appearances=appearances,
        compactions=steps,
        live=bool(live_hits) or in_system,
        live_message_ids=live_hits,
        status=_trace_status(appearances, steps, bool(live_hits) or in_system),
    )


def _live_holds(ledger: Ledger, message_id: str, fact: Fact) -> bool:
    # the live form: a persisted tool output shows its preview, not the full text
    return _states(fact, message_text(ledger.transcript.stored(message_id).message, text_only=True))


def _trace_status(
    appearances: list[FactAppearance], steps: list[FactAtCompaction], live: bool
) -> str:
    if not appearances:
        return "never seen in this chain"
    if live:
        return "in the live view"
    dropped = [s for s in steps if s.status == "dropped" and not s.reverted]
    if dropped:
        return f"lost at compaction {dropped[-1].index} ({dropped[-1].compaction_id})"
    return "not in the live view"


__all__ = [
    "AuditedFact",
    "ChainAudit",
    "ChainReport",
    "CompactionAudit",
    "CompactionBrief",
    "FactAppearance",
    "FactAtCompaction",
    "FactTrace",
    "RecompressionLoss",
    "audit_chain",
    "audit_compaction",
    "chain_report",
    "live_text",
    "split_kept",
    "trace",
]
