"""Audit and trace: which salient facts each compaction kept, lost, or lost again later.

A compaction rewrites part of the view it compacted (the summarized middle, the
previous summary wherever it lived, a message it merged the summary into or took an
older summary out of) and makes a new view. :func:`audit_chain` walks the chain's
compactions in order (:mod:`ctxledger.analysis.factviews`): the facts of every
rewritten original message are extracted (``ctxledger.compressor.facts``, as the
model saw it: a persisted tool output is audited as its preview) and join the chain's
known facts; every known fact stated in a rewritten piece is *extracted* by that
compaction, and is *kept* (its summary states it), *kept verbatim* (another message
of the new view still states it) or *lost* (the new view no longer states it). A fact
a previous summary carried and this one drops is also listed under
``lost_at_recompression``, attributed to the message it first came from.

So each fact absent from the live view is lost by exactly one last compaction
(:attr:`ChainAudit.lost_now_at`), and :func:`trace` reports the same compaction.
Everything here is read-only.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ctxledger.analysis.compactions import (
    CompactionRecord,
    chain_compactions,
    match_compaction,
    no_compaction,
    reverted_compactions,
)
from ctxledger.analysis.factviews import ChainViews, Group, Piece, Step
from ctxledger.compressor.factkinds import CATEGORIES
from ctxledger.compressor.factmatch import Haystack, written_windows
from ctxledger.compressor.facts import (
    Fact,
    find_paths,
    normalize_fact,
)
from ctxledger.errors import InvalidInput
from ctxledger.integers import shown
from ctxledger.ledger.facade import Ledger
from ctxledger.limits import check_unicode
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
    #: ``middle``: in a message this compaction rewrote; ``summary``: carried in by a
    #: previous summary (the chain first extracted it at ``first_compaction_id``)
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
    imported: bool
    input_messages: int
    #: every known fact stated in what this compaction rewrote
    extracted: list[AuditedFact]
    #: ... that the new view still states (in the summary, or verbatim elsewhere)
    kept: list[AuditedFact]
    #: ... of those, the ones only a verbatim message states (not the summary)
    kept_verbatim: list[AuditedFact]
    #: ... that the new view no longer states: this compaction dropped them
    lost: list[AuditedFact]
    retention: float
    #: facts an earlier summary had kept that this re-summary dropped
    lost_at_recompression: list[AuditedFact]


class RecompressionLoss(msgspec.Struct, frozen=True, kw_only=True):
    fact: AuditedFact
    kept_by: str
    lost_at: str
    recompression: int


class LostFact(msgspec.Struct, frozen=True, kw_only=True):
    """A fact the live view no longer states and the compaction that dropped it last."""

    fact: AuditedFact
    lost_at: str | None
    compaction_index: int | None


class CategoryRetention(msgspec.Struct, frozen=True, kw_only=True):
    """One fact category of a chain: how many facts it has, how many the live view still states."""

    facts: int
    known_now: int
    retention: float


class ChainAudit(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    root: str
    tip: str
    compactions: list[CompactionAudit]
    #: distinct facts of everything the chain's compactions rewrote
    facts: int
    #: of those, how many the tip's live view (summary or verbatim messages) still states
    known_now: int
    retention: float
    mean_compaction_retention: float
    lost_now: list[AuditedFact]
    #: each fact of ``lost_now`` with the compaction that dropped it (the last one that did)
    lost_now_at: list[LostFact]
    lost_at_recompression: list[RecompressionLoss]
    #: per fact category (``factkinds.CATEGORIES``), in a stable order
    categories: dict[str, CategoryRetention] = msgspec.field(default_factory=dict)


def split_kept(facts: list[AuditedFact], text: str) -> tuple[list[AuditedFact], list[AuditedFact]]:
    """``(kept, lost)``: which `facts` `text` still states (normalized matching), in order."""
    hay = Haystack(text)
    kept: list[AuditedFact] = []
    lost: list[AuditedFact] = []
    for fact in facts:
        (
            kept if hay.holds(fact.kind, fact.normalized, written_windows(fact.value)) else lost
        ).append(fact)
    return kept, lost


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 4) if whole else 1.0


def _as_fact(fact: AuditedFact) -> Fact:
    return Fact(kind=fact.kind, value=fact.value, normalized=fact.normalized, message_index=0)


class _Auditor:
    """Walks a chain's compactions in order, registering every fact it meets once."""

    def __init__(
        self, ledger: Ledger, records: list[CompactionRecord], reverted: Mapping[str, str]
    ) -> None:
        self.ledger = ledger
        self.reverted = reverted
        self.views = ChainViews(ledger)
        self.views.learn(records)
        #: normalized -> the fact as first met, and the index of the compaction that met it
        self.known: dict[str, tuple[AuditedFact, int]] = {}
        self.losses: list[RecompressionLoss] = []
        self.steps: list[Step] = []
        self.audits: list[CompactionAudit] = []
        # every step first: a fact first extracted at a later compaction may already be
        # stated (not extracted: ``datadict.py`` inside ``./pkg/datadict.py``) in what an
        # earlier one rewrote and dropped, and that compaction must list it too
        for record in records:
            step = self.views.step(record)
            self.steps.append(step)
            self._register(step)
        self._step_of = {step.record.compaction_id: step for step in self.steps}

    def _register(self, step: Step) -> None:
        messages = self.ledger.transcript.state.messages
        cid = step.record.compaction_id
        for piece in step.rewritten:
            if piece.kind != "message":
                continue
            for fact in self.views.facts(piece):
                if fact.normalized in self.known:
                    continue
                origin = messages.get(piece.root or "")
                self.known[fact.normalized] = (
                    AuditedFact(
                        kind=fact.kind,
                        value=fact.value,
                        normalized=fact.normalized,
                        message_id=piece.root,
                        session_id=origin.session_id if origin else None,
                        seq=origin.seq if origin else None,
                        role=fact.role,
                        source="middle",
                        first_compaction_id=cid,
                    ),
                    step.record.index,
                )

    def audit(self, record: CompactionRecord) -> CompactionAudit:
        step = self._step_of[record.compaction_id]
        extracted: list[AuditedFact] = []
        kept: list[AuditedFact] = []
        verbatim: list[AuditedFact] = []
        lost: list[AuditedFact] = []
        relost: list[AuditedFact] = []
        for fact, _ in self.known.values():
            probe = _as_fact(fact)
            if not step.rewritten_group.states(probe):
                continue
            carrier = _carrier(step.previous, probe)
            if carrier is not None and not step.rewritten_messages.states(probe):
                fact = msgspec.structs.replace(fact, source="summary")
            extracted.append(fact)
            if step.summary.states(probe):
                kept.append(fact)
            elif step.after.states(probe):
                kept.append(fact)
                verbatim.append(fact)
            else:
                lost.append(fact)
                if carrier is not None:
                    relost.append(fact)
                    self.losses.append(
                        RecompressionLoss(
                            fact=fact,
                            kept_by=carrier,
                            lost_at=record.compaction_id,
                            recompression=record.index,
                        )
                    )
        result = CompactionAudit(
            compaction_id=record.compaction_id,
            session_id=record.session_id,
            new_session_id=record.new_session_id,
            index=record.index,
            seq=record.seq,
            summarizer=record.summary.summarizer,
            fallback=record.summary.fallback,
            reverted=record.compaction_id in self.reverted,
            imported=record.summary.imported,
            input_messages=len(record.summary.input_message_ids),
            extracted=extracted,
            kept=kept,
            kept_verbatim=verbatim,
            lost=lost,
            retention=_ratio(len(kept), len(extracted)),
            lost_at_recompression=relost,
        )
        self.audits.append(result)
        return result


def _carrier(previous: list[Group], fact: Fact) -> str | None:
    """The compaction whose (rewritten) summary stated `fact`, if any did."""
    for group in previous:
        if group.states(fact):
            return group.pieces[0].compaction_id or "unknown"
    return None


def live_text(ledger: Ledger, session_id: str) -> str:
    """The text of a session's whole API view (system prompt included), as facts are matched in."""
    return "\n".join(
        message_text(m, text_only=True) for m in ledger.transcript.api_messages(session_id)
    )


def _walk(ledger: Ledger, sid: str) -> _Auditor:
    records = chain_compactions(ledger, sid)
    auditor = _Auditor(ledger, records, reverted_compactions(ledger, sid))
    for record in records:
        auditor.audit(record)
    return auditor


def _last_loss(audits: list[CompactionAudit]) -> dict[str, CompactionAudit]:
    out: dict[str, CompactionAudit] = {}
    for a in audits:
        for fact in a.lost:
            out[fact.normalized] = a
    return out


def audit_chain(ledger: Ledger, session_id: str) -> ChainAudit:
    """Audit every compaction of the chain holding `session_id` (read-only)."""
    ledger.refresh()
    sid = ledger.resolve(session_id)
    auditor = _walk(ledger, sid)
    audits = auditor.audits
    tip = ledger.tip(sid)
    now = auditor.views.group(auditor.views.session_view(tip))
    known = [fact for fact, _ in auditor.known.values()]
    lost_now = [f for f in known if not now.states(_as_fact(f))]
    last = _last_loss(audits)
    lost_now_at = [
        LostFact(
            fact=f,
            lost_at=last[f.normalized].compaction_id if f.normalized in last else None,
            compaction_index=last[f.normalized].index if f.normalized in last else None,
        )
        for f in lost_now
    ]
    return ChainAudit(
        session_id=sid,
        root=ledger.chains.root(sid),
        tip=tip,
        compactions=audits,
        facts=len(known),
        known_now=len(known) - len(lost_now),
        retention=_ratio(len(known) - len(lost_now), len(known)),
        mean_compaction_retention=(
            round(sum(a.retention for a in audits) / len(audits), 4) if audits else 1.0
        ),
        lost_now=lost_now,
        lost_now_at=lost_now_at,
        lost_at_recompression=auditor.losses,
        categories=_categories(known, lost_now),
    )


def _categories(known: list[AuditedFact], lost: list[AuditedFact]) -> dict[str, CategoryRetention]:
    totals: dict[str, int] = {}
    gone: dict[str, int] = {}
    for fact in known:
        name = CATEGORIES.get(fact.kind, fact.kind)
        totals[name] = totals.get(name, 0) + 1
    for fact in lost:
        name = CATEGORIES.get(fact.kind, fact.kind)
        gone[name] = gone.get(name, 0) + 1
    return {
        name: CategoryRetention(
            facts=n, known_now=n - gone.get(name, 0), retention=_ratio(n - gone.get(name, 0), n)
        )
        for name, n in sorted(totals.items())
    }


def audit_compaction(ledger: Ledger, compaction_id: str) -> CompactionAudit:
    """Audit one compaction (its chain's earlier compactions are audited to know what it inherited)."""
    ledger.refresh()
    cid, compacted = match_compaction(ledger, compaction_id)
    records = chain_compactions(ledger, compacted)  # one read of the chain
    auditor = _Auditor(ledger, records, reverted_compactions(ledger, compacted))
    for record in records:
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
    #: ``kept`` (what it rewrote stated the fact and its summary states it),
    #: ``kept_verbatim`` (another message of the new view still states it),
    #: ``dropped`` (the new view no longer states it), or ``not_in_middle``
    status: str
    reverted: bool


class FactTrace(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    fact: str
    normalized: str
    #: the fact's kind when the audit knows it (matched as the audit matches it), else the query's
    kind: str
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
    value = check_unicode(text.strip(), "the fact to trace")
    kind = _query_kind(value)
    normalized = normalize_fact(kind, value)
    if not normalized:
        raise InvalidInput(
            f"the fact to trace {shown(value)} is empty once normalized: give a value inside the quotes"
        )
    return Fact(kind=kind, value=value, normalized=normalized, message_index=0)


def _known_fact(auditor: _Auditor, query: Fact) -> Fact:
    """The audit's own fact for `query` (same value, or same normalized form), else the query."""
    for fact, _ in auditor.known.values():
        if fact.value == query.value or normalize_fact(fact.kind, query.value) == fact.normalized:
            return _as_fact(fact)
    return query


def _step_status(step: Step, fact: Fact) -> str:
    if not step.rewritten_group.states(fact):
        return "not_in_middle"
    if step.summary.states(fact):
        return "kept"
    return "kept_verbatim" if step.after.states(fact) else "dropped"


def trace(ledger: Ledger, session_id: str, fact_text: str) -> FactTrace:
    """The life of one fact in the chain of `session_id` (read-only).

    A fact the audit knows is matched exactly as the audit matches it, so the
    compaction ``trace`` says lost it is the one ``audit`` lists it under.
    """
    query = _fact(fact_text)
    ledger.refresh()
    sid = ledger.resolve(session_id)
    auditor = _walk(ledger, sid)
    fact = _known_fact(auditor, query)
    views = auditor.views
    chain = set(ledger.chains.chain(sid))
    tip = ledger.tip(sid)
    live_ids = ledger.transcript.session(tip).live
    live_set = set(live_ids)
    appearances: list[FactAppearance] = []
    for mid, stored in ledger.transcript.state.messages.items():
        if stored.session_id in chain and views.group(views.pieces(mid)).states(fact):
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
    steps = [
        FactAtCompaction(
            compaction_id=step.record.compaction_id,
            index=step.record.index,
            status=_step_status(step, fact),
            reverted=step.record.compaction_id in auditor.reverted,
        )
        for step in auditor.steps
    ]
    view = ledger.transcript.session(tip)
    in_system = bool(view.system_prompt) and views.group(
        [Piece(None, "system", view.system_prompt or "")]
    ).states(fact)
    live_hits = [mid for mid in live_ids if views.group(views.pieces(mid)).states(fact)]
    live = bool(live_hits) or in_system
    return FactTrace(
        session_id=sid,
        fact=query.value,
        normalized=fact.normalized,
        kind=fact.kind,
        appearances=appearances,
        compactions=steps,
        live=live,
        live_message_ids=live_hits,
        status=_trace_status(appearances, steps, live),
    )


def _trace_status(
    appearances: list[FactAppearance], steps: list[FactAtCompaction], live: bool
) -> str:
    if not appearances:
        return "never seen in this chain"
    if live:
        return "in the live view"
    dropped = [s for s in steps if s.status == "dropped"]
    if dropped:
        return f"lost at compaction {dropped[-1].index} ({dropped[-1].compaction_id})"
    return "not in the live view"


__all__ = [
    "AuditedFact",
    "CategoryRetention",
    "ChainAudit",
    "ChainReport",
    "CompactionAudit",
    "CompactionBrief",
    "FactAppearance",
    "FactAtCompaction",
    "FactTrace",
    "LostFact",
    "RecompressionLoss",
    "audit_chain",
    "audit_compaction",
    "chain_report",
    "live_text",
    "split_kept",
    "trace",
]
