"""A chain's compactions: the record of each, found by id or prefix, in chain order.

Every analysis module (audit, trace, diff, recall/expand, undo, what-if) looks a
compaction up here. A :class:`CompactionRecord` pairs a compaction's
``SummaryGenerated``, ``ToolResultsPruned`` and ``SessionSwitched``. Read-only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import msgspec

from ctxledger.errors import InvalidInput, UnknownCompaction, UnknownSession
from ctxledger.events import SessionSwitched, SummaryGenerated, ToolResultsPruned
from ctxledger.integers import shown
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.refs import compaction_matches
from ctxledger.messages import JSON

#: layout origins that hold a summary (a merged message is a tail message plus the summary)
SUMMARY_ORIGINS = frozenset({"summary", "merged"})


# --------------------------------------------------------------------------- compactions


class CompactionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded compaction: its summary, its prunes and the switch that ended the session."""

    compaction_id: str
    session_id: str
    new_session_id: str
    seq: int
    index: int
    switch: SessionSwitched
    summary: SummaryGenerated
    prunes: ToolResultsPruned | None = None


#: (id(ledger), chain, the log's last seq) -> (ledger, its compactions): inside
#: :func:`remembering_compactions` only
_REMEMBERED: ContextVar[dict[tuple[int, tuple[str, ...], int], Any] | None] = ContextVar(
    "ctxledger_remembered_compactions", default=None
)


@contextlib.contextmanager
def remembering_compactions() -> Iterator[None]:
    """Within the block, :func:`chain_compactions` reads each chain of a ledger once.

    For a report that asks for the same chains' compactions several times (a what-if's
    two audits and its reproduction check). A chain is read again when its ledger's log
    has grown meanwhile. Joins an enclosing block.
    """
    if _REMEMBERED.get() is not None:
        yield
        return
    token = _REMEMBERED.set({})
    try:
        yield
    finally:
        _REMEMBERED.reset(token)


def chain_compactions(ledger: Ledger, session_id: str) -> list[CompactionRecord]:
    """Every compaction of the chain holding `session_id`, oldest first (read-only).

    Reverts are not compactions: they are left out (see :func:`reverted_compactions`).
    """
    chain = ledger.chains.chain(session_id)
    remembered = _REMEMBERED.get()
    if remembered is None:
        return _read_compactions(ledger, chain)
    key = (id(ledger), tuple(chain), ledger.store.last_seq())
    found = remembered.get(key)
    if found is None or found[0] is not ledger:
        found = remembered[key] = (ledger, _read_compactions(ledger, chain))
    return list(found[1])


def _read_compactions(ledger: Ledger, chain: list[str]) -> list[CompactionRecord]:
    out: list[CompactionRecord] = []
    for sid in chain:
        summaries: dict[str, SummaryGenerated] = {}
        prunes: dict[str, ToolResultsPruned] = {}
        for rec in ledger.store.read_session(sid):
            event = rec.event
            if isinstance(event, SummaryGenerated):
                summaries[event.compaction_id] = event
            elif isinstance(event, ToolResultsPruned):
                prunes[event.compaction_id] = event
            elif isinstance(event, SessionSwitched) and event.reason == "compression":
                summary = summaries.get(event.compaction_id)
                if summary is None:
                    continue  # a switch without its summary is not ours to audit
                out.append(
                    CompactionRecord(
                        compaction_id=event.compaction_id,
                        session_id=sid,
                        new_session_id=event.new_session_id,
                        seq=rec.seq,
                        index=len(out) + 1,
                        switch=event,
                        summary=summary,
                        prunes=prunes.get(event.compaction_id),
                    )
                )
    return out


def compacted_sessions(ledger: Ledger) -> dict[str, str]:
    """Compaction id -> the session it compacted, for every compaction in the log (no event is read)."""
    return {
        node.compaction_id: node.parent_session_id
        for node in ledger.chains.state.sessions.values()
        if node.reason == "compression" and node.compaction_id and node.parent_session_id
    }


def compactions_by_id(ledger: Ledger, session_id: str) -> dict[str, CompactionRecord]:
    """Compaction id -> record for the chain holding `session_id`, oldest first (one read of the chain)."""
    return {record.compaction_id: record for record in chain_compactions(ledger, session_id)}


def match_compaction(ledger: Ledger, ref: str) -> tuple[str, str]:
    """``(compaction id, the session it compacted)`` for an id or a unique prefix of one."""
    if not isinstance(ref, str) or not ref:
        raise InvalidInput("a compaction id is required (`ctxledger audit SESSION` lists them)")
    made = compacted_sessions(ledger)
    matches = compaction_matches(made, ref)
    if len(matches) > 1:
        raise InvalidInput(
            f"compaction prefix {shown(ref)} is ambiguous ({len(matches)} compactions)"
        )
    if not matches:
        raise no_compaction(ref)
    return matches[0], made[matches[0]]


def no_compaction(ref: str) -> UnknownCompaction:
    return UnknownCompaction(
        f"no compaction {shown(ref)} in the log; `ctxledger audit SESSION` lists a chain's compactions"
    )


def find_compaction(ledger: Ledger, ref: str) -> CompactionRecord:
    """The compaction with id `ref` (or a unique prefix of one). Raises UnknownCompaction."""
    cid, compacted = match_compaction(ledger, ref)
    record = compactions_by_id(ledger, compacted).get(cid)
    if record is None:
        raise no_compaction(ref)
    return record


def is_compaction_ref(ledger: Ledger, ref: str) -> bool:
    """Whether `ref` names a compaction (exactly, or as a unique-kind prefix) rather than a session."""
    if not ref:
        return False
    sessions = ledger.chains.state.sessions
    ids = compacted_sessions(ledger)
    if ref in ids or ref in sessions:
        return ref in ids
    prefixed = bool(compaction_matches(ids, ref))
    if prefixed and any(s.startswith(ref) for s in sessions):
        raise InvalidInput(
            f"{shown(ref)} is the prefix of both a session and a compaction id; give more of it"
        )
    return prefixed


def resolve_session_ref(ledger: Ledger, ref: str) -> str:
    """The session `ref` names, for a command that takes a session or a compaction id.

    Called once `ref` is known not to be a compaction's: an unknown one is reported
    as neither (a mistyped compaction id is not "no session").
    """
    try:
        return ledger.resolve(ref)
    except UnknownSession:
        raise resolve_session_ref_error(ref) from None


def resolve_session_ref_error(ref: str) -> UnknownSession:
    """The error for a reference that names neither a session nor a compaction."""
    return UnknownSession(
        f"no session or compaction {shown(ref)}; `ctxledger sessions` lists sessions, "
        "`ctxledger audit SESSION` a chain's compactions"
    )


def reverted_compactions(ledger: Ledger, session_id: str) -> dict[str, str]:
    """Compaction id -> the revert session that undid it, for the chain of `session_id`."""
    out: dict[str, str] = {}
    for sid in ledger.chains.chain(session_id):
        node = ledger.chains.lineage(sid)
        if node.reason == "revert" and node.compaction_id:
            out.setdefault(node.compaction_id, sid)
    return out


def chain_signature(ledger: Ledger, session_id: str) -> list[JSON]:
    """Each compaction of the chain, independent of generated ids (to compare two ledgers).

    Messages a compaction wrote are named ``new#k`` in order; everything else keeps its id.
    """
    names: dict[str, str] = {}  # generated (layout) message id -> "new#k"
    out: list[JSON] = []
    for r in chain_compactions(ledger, session_id):
        inputs = [names.get(mid, mid) for mid in r.summary.input_message_ids]
        layout: list[list[str]] = []
        for entry in r.switch.layout:
            if entry.message is not None:
                names.setdefault(entry.message_id, f"new#{len(names) + 1}")
            layout.append([entry.origin, names.get(entry.message_id, entry.message_id)])
        out.append(
            {
                "trigger": r.switch.trigger,
                "inputs": inputs,
                "layout": layout,
                "summary": r.summary.text,
                "tokens": [r.switch.tokens_before, r.switch.tokens_after],
                "focus": r.summary.focus,
            }
        )
    return out


__all__ = [
    "SUMMARY_ORIGINS",
    "CompactionRecord",
    "chain_compactions",
    "chain_signature",
    "compacted_sessions",
    "compactions_by_id",
    "find_compaction",
    "is_compaction_ref",
    "match_compaction",
    "no_compaction",
    "remembering_compactions",
    "resolve_session_ref",
    "resolve_session_ref_error",
    "reverted_compactions",
]
