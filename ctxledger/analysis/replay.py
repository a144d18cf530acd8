"""Replay: rebuild projections from the log and re-run recorded compactions.

* :func:`rebuild_check` folds the chain's sessions from scratch and compares every
  view with the live (incrementally maintained) projections.
* :func:`verify_compactions` re-runs today's planner on each compaction's recorded
  inputs (the transcript just before it, its config snapshot, stored token counts)
  with the recorded summary text, and reports any drift from what was recorded:
  which boundary or prune moved, and why. When another configuration recorded for
  the same compaction (the continuation's or the session's snapshot) reproduces the
  recorded plan, the cause is ``config`` (with the settings that differ); otherwise
  the planner itself changed: ``algorithm``.

Replays never call a model and never write to the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.recording import build_layout, prepare
from ctxledger.errors import UnknownSession
from ctxledger.events import Recorded, SessionSwitched, SummaryGenerated
from ctxledger.ledger.compaction import compaction_input
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import IMPORT_DIGEST, LOOP_KEY
from ctxledger.projections import Projector

Progress = Callable[[int, int], None]


class RebuildReport(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    chain: list[str]
    events_folded: int
    equal: bool
    mismatches: list[str]


def _session_fingerprint(p: Projector, sid: str) -> dict[str, Any]:
    t = p.transcript
    return {
        "api_messages": t.api_messages(sid),
        "tokens": t.api_tokens(sid),
        "view": msgspec.to_builtins(t.session(sid)),
        "usage": msgspec.to_builtins(p.accounting.session(sid)),
        "lineage": msgspec.to_builtins(p.chains.lineage(sid)),
    }


def rebuild_check(
    ledger: Ledger, session_id: str, progress: Progress | None = None
) -> RebuildReport:
    """Fold the whole log from scratch (no checkpoint) and compare the chain's views."""
    ledger.refresh()
    chain = ledger.chains.chain(session_id)
    fresh = Projector()
    total = ledger.store.last_seq()

    def reported(records: Iterable[Recorded]) -> Iterator[Recorded]:
        for n, rec in enumerate(records, 1):
            if progress is not None and n % 5000 == 0:
                progress(n, total)
            yield rec

    n = fresh.apply_all(reported(ledger.store.read_all(1, ledger.projector.last_seq)))
    if progress is not None:
        progress(n, total)
    mismatches: list[str] = []
    for sid in chain:
        live, rebuilt = (
            _session_fingerprint(ledger.projector, sid),
            _session_fingerprint(fresh, sid),
        )
        for key in live:
            if msgspec.json.encode(live[key]) != msgspec.json.encode(rebuilt[key]):
                mismatches.append(f"{sid}: {key} differs between the live projection and a rebuild")
    return RebuildReport(
        session_id=session_id,
        chain=chain,
        events_folded=n,
        equal=not mismatches,
        mismatches=mismatches,
    )


class Drift(msgspec.Struct, frozen=True, kw_only=True):
    field: str
    recorded: Any
    replayed: Any
    #: what moved, in words (e.g. "tail boundary moved from index 40 (msg_x) to 38 (msg_y)")
    explanation: str = ""


class CompactionCheck(msgspec.Struct, frozen=True, kw_only=True):
    compaction_id: str
    session_id: str
    new_session_id: str
    seq: int
    drift: list[Drift]
    #: ``config``: the recorded snapshot is not the configuration the plan was made with
    #: (another config recorded for the same compaction reproduces it exactly);
    #: ``algorithm``: the planner itself now decides differently; None: no drift
    cause: str | None
    #: for ``config``: setting -> [value in the recorded snapshot, value the plan was made with]
    config_changes: dict[str, list[Any]] = msgspec.field(default_factory=dict)


class DriftReport(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    compactions: list[CompactionCheck]

    @property
    def drifted(self) -> bool:
        return any(c.drift for c in self.compactions)


_PLAN_FIELDS = (
    "action",
    "compress_start",
    "compress_end",
    "summary_role",
    "merged_into_tail",
    "summary_budget_tokens",
    "system_note",
    "previous_summary_index",
    "pinned",
    "orphans",
    "prunes",
)
_BOUNDARIES = {"compress_start": "head boundary", "compress_end": "tail boundary"}


def _compaction_starts(
    ledger: Ledger, chain: list[str]
) -> dict[int, tuple[SessionSwitched, SummaryGenerated]]:
    """For each compaction in the chain: the seq of its first event -> (switch, summary)."""
    out: dict[int, tuple[SessionSwitched, SummaryGenerated]] = {}
    for sid in chain:
        first: dict[str, int] = {}
        summary: dict[str, SummaryGenerated] = {}
        for rec in ledger.store.read_session(sid):
            cid = getattr(rec.event, "compaction_id", None)
            if cid is not None and rec.event.session_id == sid:
                first.setdefault(cid, rec.seq)
            if isinstance(rec.event, SummaryGenerated):
                summary[rec.event.compaction_id] = rec.event
            if (
                isinstance(rec.event, SessionSwitched)
                and rec.event.reason == "compression"
                and rec.event.compaction_id in summary
                # an imported compaction was planned by the source agent, not by ctxledger
                and not summary[rec.event.compaction_id].imported
            ):
                out[first[rec.event.compaction_id]] = (rec.event, summary[rec.event.compaction_id])
    return out


def _at(ids: list[str | None], index: Any) -> str:
    if isinstance(index, int) and 0 <= index < len(ids):
        return f"index {index} ({ids[index] or 'system'})"
    return f"index {index}"


def _explain(key: str, recorded: Any, replayed: Any, ids: list[str | None]) -> str:
    if key in _BOUNDARIES:
        return f"{_BOUNDARIES[key]} moved from {_at(ids, recorded)} to {_at(ids, replayed)}"
    if key == "prunes":
        before: dict[int, str] = {
            int(p["index"]): str(p.get("kind")) for p in recorded or [] if isinstance(p, dict)
        }
        after: dict[int, str] = {
            int(p["index"]): str(p.get("kind")) for p in replayed or [] if isinstance(p, dict)
        }
        moved = [
            f"no longer pruned: {_at(ids, i)} ({before[i]})"
            for i in sorted(set(before) - set(after))
        ]
        moved += [
            f"now pruned: {_at(ids, i)} ({after[i]})" for i in sorted(set(after) - set(before))
        ]
        moved += [
            f"prune changed at {_at(ids, i)}"
            for i in sorted(set(before) & set(after))
            if msgspec.json.encode([p for p in recorded if p.get("index") == i])
            != msgspec.json.encode([p for p in replayed if p.get("index") == i])
        ]
        return "; ".join(moved) or "prunes differ"
    return f"{key}: recorded {recorded!r}, replayed {replayed!r}"


def _compare(
    switch: SessionSwitched, replay_plan: dict[str, Any], layout: list[Any], ids: list[str | None]
) -> list[Drift]:
    drift: list[Drift] = []
    for key in _PLAN_FIELDS:
        recorded, replayed = switch.plan.get(key), replay_plan.get(key)
        if key in switch.plan and msgspec.json.encode(recorded) != msgspec.json.encode(replayed):
            drift.append(
                Drift(
                    field=f"plan.{key}",
                    recorded=recorded,
                    replayed=replayed,
                    explanation=_explain(key, recorded, replayed, ids),
                )
            )
    recorded_layout = [
        (e.origin, e.message if e.message is not None else e.message_id) for e in switch.layout
    ]
    replayed_layout = [
        (e.origin, e.message if e.message is not None else e.message_id) for e in layout
    ]
    if msgspec.json.encode(recorded_layout) != msgspec.json.encode(replayed_layout):
        drift.append(
            Drift(
                field="layout",
                recorded=len(recorded_layout),
                replayed=len(replayed_layout),
                explanation="the continuation's messages differ from the recorded layout",
            )
        )
    return drift


def verify_compactions(ledger: Ledger, session_id: str) -> DriftReport:
    """Re-run every recorded compaction of the chain with today's planner; report drift.

    Read-only: recorded events are never rewritten, whatever drift is found.
    """
    ledger.refresh()
    chain = ledger.chains.chain(session_id)
    starts = _compaction_starts(ledger, chain)
    checks: list[CompactionCheck] = []
    projector: Projector | None = None
    for seq in sorted(starts):
        # the projections as they were just before the compaction's first event
        if projector is None:
            projector = Projector.rebuild(ledger.store, to_seq=seq - 1, check_streams=False)
        else:
            projector.catch_up(ledger.store, to_seq=seq - 1)
        switch, summary = starts[seq]
        checks.append(_replay_one(ledger, projector, seq, switch, summary))
    return DriftReport(session_id=session_id, compactions=checks)


def _replan(
    projector: Projector,
    switch: SessionSwitched,
    summary: SummaryGenerated,
    snapshot: dict[str, Any],
) -> list[Drift]:
    inp = compaction_input(projector, switch.session_id)
    prepared = prepare(
        inp,
        CompressionConfig.from_snapshot(snapshot),
        focus=summary.focus,
        force=switch.trigger == "manual",
    )
    layout: list[Any] = []
    if prepared.plan.action == "compress":
        new_ids = iter([e.message_id for e in switch.layout if e.message is not None])
        _, _, layout, _ = build_layout(
            prepared, summary.text, lambda prefix: next(new_ids, f"{prefix}_extra")
        )
    return _compare(switch, msgspec.to_builtins(prepared.plan), layout, inp.message_ids)


def _settings(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A config snapshot's compression settings: without the host's loop (``agent_loop``)
    and an import's input digest (``import_sha256``), which a session's snapshot names
    and a compaction's does not (no plan reads them)."""
    return {k: v for k, v in snapshot.items() if k not in (LOOP_KEY, IMPORT_DIGEST)}


def _other_configs(ledger: Ledger, switch: SessionSwitched) -> list[dict[str, Any]]:
    """Other settings recorded for the same compaction: the continuation's and the session's."""
    out: list[dict[str, Any]] = []
    for sid in (switch.new_session_id, switch.session_id):
        try:
            snapshot = _settings(ledger.transcript.session(sid).config)
        except UnknownSession:
            continue
        if snapshot and snapshot != _settings(switch.config) and snapshot not in out:
            out.append(snapshot)
    return out


def _replay_one(
    ledger: Ledger,
    projector: Projector,
    seq: int,
    switch: SessionSwitched,
    summary: SummaryGenerated,
) -> CompactionCheck:
    drift = _replan(projector, switch, summary, switch.config)
    cause: str | None = None
    changes: dict[str, list[Any]] = {}
    if drift:
        cause = "algorithm"
        for snapshot in _other_configs(ledger, switch):
            if not _replan(projector, switch, summary, snapshot):
                cause = "config"
                recorded = _settings(switch.config)
                changes = {
                    k: [recorded.get(k), snapshot.get(k)]
                    for k in sorted(set(recorded) | set(snapshot))
                    if recorded.get(k) != snapshot.get(k)
                }
                break
    return CompactionCheck(
        compaction_id=switch.compaction_id,
        session_id=switch.session_id,
        new_session_id=switch.new_session_id,
        seq=seq,
        drift=drift,
        cause=cause,
        config_changes=changes,
    )
