"""Diff two views of a conversation, message by message, or two summaries, section by section.

A side (:func:`resolve_view`) is a session's live view now (``SESSION``), as it was
right after event ``SEQ`` (``SESSION@SEQ``), or a compaction's continuation as it
started (a compaction id); :func:`diff` with only a compaction compares the view it
replaced with the one it made. Sides may come from different ledgers, e.g. a
recorded chain and its what-if replay (which keeps the recorded message ids).

Messages are lined up by the original message they show: a merged or stripped
message stands for the message it was made from, and a summary (or stub) for its
content, so identical summaries written in two ledgers line up. The change kinds, each with the
token delta (B minus A):

* ``added`` / ``removed``: only in B / only in A;
* ``summarized``: only in A, and a summary in B covers it (directly or through an
  earlier summary); ``expanded`` is the reverse (B has the original, A its summary);
* ``pruned``: B shows a reduced form of A's message (a persisted tool output's
  preview, or its tool calls stripped); ``restored`` is the reverse;
* ``changed``: any other difference (e.g. a summary merged into the message).

``diff(B, A)`` is exactly the inverse of ``diff(A, B)`` (:meth:`Change.inverse`), and
``diff(A, A)`` is empty. Two compaction ids compare their summaries by template
section (``parse_sections``): lines added and removed per section.
"""

from __future__ import annotations

import difflib
import hashlib

import msgspec

from ctxledger.analysis.compactions import (
    SUMMARY_ORIGINS,
    CompactionRecord,
    compactions_by_id,
    find_compaction,
    is_compaction_ref,
    resolve_session_ref_error,
)
from ctxledger.analysis.refs import ledger_ref, parse_ref
from ctxledger.compressor.summarizers.base import SECTION_KEYS, parse_sections
from ctxledger.errors import InvalidInput, OneReference, UnknownSession
from ctxledger.integers import shown
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import JSON, role_of
from ctxledger.projections.transcript import TranscriptProjection, load_bodies
from ctxledger.tokens import count_text

#: kind -> the kind of the same change seen from the other side
INVERSE = {
    "added": "removed",
    "removed": "added",
    "summarized": "expanded",
    "expanded": "summarized",
    "pruned": "restored",
    "restored": "pruned",
    "changed": "changed",
}
#: origins of a message that shows less than the message it stands for
_REDUCED = frozenset({"persisted", "stripped"})
SYSTEM_ID = "system"


class ViewEntry(msgspec.Struct, frozen=True, kw_only=True):
    message_id: str
    #: the original message this one stands for (itself, unless merged or stripped)
    key: str
    role: str
    origin: str
    tokens: int
    message: JSON


class View(msgspec.Struct, frozen=True, kw_only=True):
    label: str
    session_id: str
    seq: int | None
    entries: list[ViewEntry]
    #: every original message some summary of this view stands for
    covered: dict[str, str]

    @property
    def tokens(self) -> int:
        return sum(e.tokens for e in self.entries)


class Change(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    message_id: str
    role: str
    index_a: int | None
    index_b: int | None
    tokens_a: int
    tokens_b: int
    token_delta: int
    #: B's id when the two sides show the message under different ids (merged, stripped)
    other_id: str | None = None
    #: the summary message that covers it (summarized / expanded)
    summary_id: str | None = None
    detail: str = ""

    def inverse(self) -> Change:
        """The same difference seen from the other side (B vs A)."""
        swapped_id = self.other_id if self.other_id is not None else self.message_id
        return Change(
            kind=INVERSE[self.kind],
            message_id=swapped_id,
            role=self.role,
            index_a=self.index_b,
            index_b=self.index_a,
            tokens_a=self.tokens_b,
            tokens_b=self.tokens_a,
            token_delta=-self.token_delta,
            other_id=self.message_id if self.other_id is not None else None,
            summary_id=self.summary_id,
            detail=self.detail,
        )


class Side(msgspec.Struct, frozen=True, kw_only=True):
    label: str
    session_id: str
    seq: int | None
    messages: int
    tokens: int


class DiffReport(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # "messages"
    a: Side
    b: Side
    changes: list[Change]
    counts: dict[str, int]
    token_delta: int


class SectionChange(msgspec.Struct, frozen=True, kw_only=True):
    section: str
    kind: str  # "added" | "removed"
    line: str

    def inverse(self) -> SectionChange:
        return SectionChange(section=self.section, kind=INVERSE[self.kind], line=self.line)


class SummaryDiff(msgspec.Struct, frozen=True, kw_only=True):
    kind: str  # "summaries"
    a: str
    b: str
    changes: list[SectionChange]
    tokens_a: int
    tokens_b: int
    token_delta: int


# --------------------------------------------------------------------------- references


def transcript_at(ledger: Ledger, session_id: str, seq: int | None) -> TranscriptProjection:
    """The transcript now (`seq` None) or right after event `seq`, where `session_id` must exist.

    Raises InvalidInput for a seq outside the log and UnknownSession when the session
    had not started yet at `seq`. ``show``, ``export`` and ``diff`` read past views here.
    """
    if seq is None:
        return ledger.transcript
    _check_in_log(ledger, seq)
    transcript = ledger.projector_at(seq).transcript
    if session_id not in transcript.state.sessions:
        raise _not_started(ledger, session_id, seq)
    return transcript


def _check_in_log(ledger: Ledger, seq: int) -> None:
    if seq < 1:
        raise InvalidInput(f"event sequence numbers start at 1, got {seq}")
    last = ledger.store.last_seq()
    if seq > last:
        raise InvalidInput(f"seq {seq} is past the end of the log (the last event is {last})")


def _not_started(ledger: Ledger, session_id: str, seq: int) -> UnknownSession:
    started = ledger.chains.lineage(session_id).started_seq
    return UnknownSession(
        f"session {shown(session_id)} had not started at seq {seq}: it starts at seq {started}"
        " (`ctxledger chain` lists the sessions before it)"
    )


# --------------------------------------------------------------------------- views


class _Coverage:
    """The original message ids each summary message of one ledger stands for.

    The ``{compaction id: record}`` map is read once per chain, and each summary's
    coverage (through earlier summaries too) is computed once: build one per ledger
    per diff and share it between the views.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.records: dict[str, CompactionRecord] = {}
        self.roots_read: set[str] = set()
        self.cache: dict[str, frozenset[str]] = {}

    def _inputs(self, summary_id: str) -> list[str]:
        """The message ids the compaction that wrote `summary_id` summarized."""
        stored = self.ledger.transcript.state.messages.get(summary_id)
        if stored is None:
            return []
        cid = self.ledger.chains.lineage(stored.session_id).compaction_id
        if cid is None:
            return []
        if cid not in self.records:
            root = self.ledger.chains.root(stored.session_id)
            if root not in self.roots_read:
                self.roots_read.add(root)
                self.records.update(compactions_by_id(self.ledger, stored.session_id))
        record = self.records.get(cid)
        return record.summary.input_message_ids if record is not None else []

    def of(self, summary_id: str) -> frozenset[str]:
        cached = self.cache.get(summary_id)
        if cached is not None:
            return cached
        messages = self.ledger.transcript.state.messages
        out: set[str] = set()
        stack, seen = [summary_id], {summary_id}
        while stack:
            for mid in self._inputs(stack.pop()):
                out.add(mid)
                inner = messages.get(mid)
                if inner is not None and inner.origin in SUMMARY_ORIGINS and mid not in seen:
                    seen.add(mid)
                    stack.append(mid)
        self.cache[summary_id] = frozen = frozenset(out)
        return frozen


def _key(transcript: TranscriptProjection, message_id: str) -> str:
    """What the message stands for: merged/stripped ones, the message they were made from;
    a summary or stub, its content (so two ledgers' identical summaries line up)."""
    stored = transcript.state.messages.get(message_id)
    if stored is not None and stored.origin in ("summary", "stub"):
        return (
            "content:"
            + hashlib.sha256(msgspec.json.encode(stored.message, order="sorted")).hexdigest()
        )
    key, seen = message_id, {message_id}
    while True:
        stored = transcript.state.messages.get(key)
        if (
            stored is None
            or stored.origin not in ("merged", "stripped")
            or stored.source_id is None
        ):
            return key
        if stored.source_id in seen:
            return key
        seen.add(stored.source_id)
        key = stored.source_id


def _view(
    coverage: _Coverage,
    transcript: TranscriptProjection,
    label: str,
    session_id: str,
    seq: int | None,
    ids: list[str],
    system: tuple[str | None, int, str],
) -> View:
    entries: list[ViewEntry] = []
    if system[0] is not None:
        entries.append(
            ViewEntry(
                message_id=SYSTEM_ID,
                key=SYSTEM_ID,
                role=system[2],
                origin="system",
                tokens=system[1],
                message={"role": system[2], "content": system[0]},
            )
        )
    covered: dict[str, str] = {}
    # bodies a rebuild left in the log: one batch read, not one read per message
    load_bodies([transcript.stored(mid) for mid in ids if mid in transcript.state.messages])
    for mid in ids:
        stored = transcript.stored(
            mid
        )  # the live form: origin "persisted" for a tool output's preview
        entries.append(
            ViewEntry(
                message_id=mid,
                key=_key(transcript, mid),
                role=str(stored.message.get("role") or ""),
                origin=stored.origin,
                tokens=stored.tokens,
                message=stored.message,
            )
        )
        if stored.origin in SUMMARY_ORIGINS:
            for covered_id in coverage.of(mid):
                covered.setdefault(covered_id, mid)
    return View(label=label, session_id=session_id, seq=seq, entries=entries, covered=covered)


def session_view(
    ledger: Ledger,
    session_ref: str,
    seq: int | None = None,
    *,
    label: str | None = None,
    coverage: _Coverage | None = None,
) -> View:
    """A session's API view now, or right after event `seq` (read-only)."""
    ledger.refresh()
    sid = ledger.resolve(session_ref)
    transcript = transcript_at(ledger, sid, seq)
    view = transcript.session(sid)
    name = label or (sid if seq is None else f"{sid}@{seq}")
    return _view(
        coverage or _Coverage(ledger),
        transcript,
        name,
        sid,
        seq,
        list(view.live),
        (view.system_prompt, view.system_tokens, view.system_role),
    )


def compaction_views(
    ledger: Ledger, record: CompactionRecord, *, coverage: _Coverage | None = None
) -> tuple[View, View]:
    """(the view the compaction replaced, the continuation as it started)."""
    coverage = coverage or _Coverage(ledger)
    transcript = ledger.transcript
    before = transcript.session(record.session_id)
    switch = record.switch
    a = _view(
        coverage,
        transcript,
        f"{record.compaction_id} (before)",
        record.session_id,
        None,
        list(before.live),
        (before.system_prompt, before.system_tokens, before.system_role),
    )
    b = _view(
        coverage,
        transcript,
        f"{record.compaction_id} (after)",
        record.new_session_id,
        None,
        [e.message_id for e in switch.layout],
        (switch.system_prompt, switch.system_prompt_tokens, role_of(switch.system_prompt_role)),
    )
    return a, b


def resolve_view(ledger: Ledger, ref: str, *, coverage: _Coverage | None = None) -> View:
    """A side of a diff: ``SESSION``, ``SESSION@SEQ`` or a compaction id (its continuation)."""
    name, seq = ledger_ref(ledger, ref)
    if seq is None and is_compaction_ref(ledger, name):
        return compaction_views(ledger, find_compaction(ledger, name), coverage=coverage)[1]
    try:
        return session_view(ledger, name, seq, coverage=coverage)
    except UnknownSession:
        if seq is not None:
            raise  # SESSION@SEQ names a session only
        raise resolve_session_ref_error(name) from None


def _check_named(ledger: Ledger, name: str, seq: int | None) -> None:
    """What :func:`resolve_view` would refuse of a session reference, without folding
    the log up to `seq` to build a view nobody reads."""
    ledger.refresh()
    try:
        sid = ledger.resolve(name)
    except UnknownSession:
        if seq is not None:
            raise
        raise resolve_session_ref_error(name) from None
    if seq is not None:
        _check_in_log(ledger, seq)
        if seq < ledger.chains.lineage(sid).started_seq:
            raise _not_started(ledger, sid, seq)


# --------------------------------------------------------------------------- diffing


def _same(a: ViewEntry, b: ViewEntry) -> bool:
    return msgspec.json.encode(a.message, order="sorted") == msgspec.json.encode(
        b.message, order="sorted"
    )


def _pair_kind(a: ViewEntry, b: ViewEntry) -> tuple[str, str]:
    reduced_a, reduced_b = a.origin in _REDUCED, b.origin in _REDUCED
    if reduced_b and not reduced_a:
        return "pruned", _reduction(b.origin)
    if reduced_a and not reduced_b:
        return "restored", _reduction(a.origin)
    if "merged" in (a.origin, b.origin):
        return "changed", "a summary is merged into the message"
    return "changed", "content differs"


def _reduction(origin: str) -> str:
    return (
        "tool output stored outside the context (preview shown)"
        if origin == "persisted"
        else "tool calls stripped"
    )


def diff_views(a: View, b: View) -> DiffReport:
    """Message-level differences from `a` to `b` (see the module docstring for the kinds)."""
    b_by_key = {e.key: (i, e) for i, e in enumerate(b.entries)}
    a_keys = {e.key for e in a.entries}
    changes: list[Change] = []
    for i, ea in enumerate(a.entries):
        found = b_by_key.get(ea.key)
        if found is None:
            changes.append(_gone(ea, i, b.covered.get(ea.message_id) or b.covered.get(ea.key)))
        elif not _same(ea, found[1]):
            changes.append(_changed(ea, i, *found))
    for j, eb in enumerate(b.entries):
        if eb.key not in a_keys:
            changes.append(_new(eb, j, a.covered.get(eb.message_id) or a.covered.get(eb.key)))
    counts: dict[str, int] = {}
    for c in changes:
        counts[c.kind] = counts.get(c.kind, 0) + 1
    return DiffReport(
        kind="messages",
        a=_side(a),
        b=_side(b),
        changes=changes,
        counts=counts,
        token_delta=b.tokens - a.tokens,
    )


def _gone(ea: ViewEntry, i: int, summary: str | None) -> Change:
    """A message of `a` that `b` does not show: summarized (a summary covers it) or removed."""
    return Change(
        kind="summarized" if summary else "removed",
        message_id=ea.message_id,
        role=ea.role,
        index_a=i,
        index_b=None,
        tokens_a=ea.tokens,
        tokens_b=0,
        token_delta=-ea.tokens,
        summary_id=summary,
    )


def _changed(ea: ViewEntry, i: int, j: int, eb: ViewEntry) -> Change:
    """A message both views show, but differently (pruned, rewritten, re-ided …)."""
    kind, detail = _pair_kind(ea, eb)
    return Change(
        kind=kind,
        message_id=ea.message_id,
        role=ea.role,
        index_a=i,
        index_b=j,
        tokens_a=ea.tokens,
        tokens_b=eb.tokens,
        token_delta=eb.tokens - ea.tokens,
        other_id=eb.message_id if eb.message_id != ea.message_id else None,
        detail=detail,
    )


def _new(eb: ViewEntry, j: int, summary: str | None) -> Change:
    """A message only `b` shows: expanded (`a` had it under a summary) or added."""
    return Change(
        kind="expanded" if summary else "added",
        message_id=eb.message_id,
        role=eb.role,
        index_a=None,
        index_b=j,
        tokens_a=0,
        tokens_b=eb.tokens,
        token_delta=eb.tokens,
        summary_id=summary,
    )


def _side(view: View) -> Side:
    return Side(
        label=view.label,
        session_id=view.session_id,
        seq=view.seq,
        messages=len(view.entries),
        tokens=view.tokens,
    )


def diff_summaries(a: CompactionRecord, b: CompactionRecord) -> SummaryDiff:
    """Section-level differences between two compactions' summaries."""
    sa, sb = parse_sections(a.summary.text), parse_sections(b.summary.text)
    changes: list[SectionChange] = []
    for section in ("preamble", *SECTION_KEYS):
        la, lb = [x.strip() for x in sa.get(section, [])], [x.strip() for x in sb.get(section, [])]
        matcher = difflib.SequenceMatcher(a=la, b=lb, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag in ("delete", "replace"):
                changes.extend(
                    SectionChange(section=section, kind="removed", line=line) for line in la[i1:i2]
                )
            if tag in ("insert", "replace"):
                changes.extend(
                    SectionChange(section=section, kind="added", line=line) for line in lb[j1:j2]
                )
    tokens_a, tokens_b = count_text(a.summary.text), count_text(b.summary.text)
    return SummaryDiff(
        kind="summaries",
        a=a.compaction_id,
        b=b.compaction_id,
        changes=changes,
        tokens_a=tokens_a,
        tokens_b=tokens_b,
        token_delta=tokens_b - tokens_a,
    )


def diff(
    ledger: Ledger, a_ref: str, b_ref: str | None = None, *, b_ledger: Ledger | None = None
) -> DiffReport | SummaryDiff:
    """Diff two references (read-only); see the module docstring.

    With `b_ref` None, `a_ref` must be a compaction: its before and after views are
    compared. `b_ledger` resolves `b_ref` in another ledger (a kept what-if replay).
    """
    other = b_ledger or ledger
    if b_ref is None:
        name, seq = ledger_ref(ledger, a_ref)
        if seq is not None or not is_compaction_ref(ledger, name):
            _check_named(ledger, name, seq)  # a reference to nothing is named as such first
            raise OneReference(
                "give two references to compare, or one compaction id (before vs after)"
            )
        before, after = compaction_views(ledger, find_compaction(ledger, name))
        return diff_views(before, after)
    a_name, a_seq = ledger_ref(ledger, a_ref)
    b_name, b_seq = ledger_ref(other, b_ref)
    if (
        a_seq is None
        and b_seq is None
        and is_compaction_ref(ledger, a_name)
        and is_compaction_ref(other, b_name)
    ):
        return diff_summaries(find_compaction(ledger, a_name), find_compaction(other, b_name))
    coverage = _Coverage(ledger)  # one per ledger per diff: each chain is read once
    other_coverage = coverage if other is ledger else _Coverage(other)
    return diff_views(
        resolve_view(ledger, a_ref, coverage=coverage),
        resolve_view(other, b_ref, coverage=other_coverage),
    )


__all__ = [
    "INVERSE",
    "Change",
    "DiffReport",
    "SectionChange",
    "Side",
    "SummaryDiff",
    "View",
    "ViewEntry",
    "compaction_views",
    "diff",
    "diff_summaries",
    "diff_views",
    "ledger_ref",
    "parse_ref",
    "resolve_view",
    "session_view",
    "transcript_at",
]
