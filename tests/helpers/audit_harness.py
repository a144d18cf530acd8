"""One compaction audited end to end: a scripted summary of a given middle, and the verdicts.

Used by the audit-truth tests: ``audit_of(middle, summary)`` compacts a session whose
middle is `middle` into `summary` and returns the audit of that compaction;
``status(audit, value)`` says whether the fact of that value was kept, lost or never
extracted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from ctxledger.analysis.audit import CompactionAudit, audit_chain
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.ledger.compaction import compact
from helpers.ledger_helpers import deterministic_ledger


class Scripted:
    """A summarizer that answers with a fixed text."""

    kind = "scripted"

    def __init__(self, text: str) -> None:
        self.text = text

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        return SummaryResult(text=self.text, summarizer=self.kind)


def audit_of(middle: list[Mapping[str, Any]], summary: str) -> CompactionAudit:
    """The audit of one compaction that summarized `middle` into `summary`."""
    ledger = deterministic_ledger()
    sid = ledger.start_session(model="m", context_length=16_000, system_prompt="You fix bugs.")
    ledger.append_messages(
        sid,
        [
            {"role": "user", "content": "Task: fix the bug."},
            {"role": "assistant", "content": "Starting."},
            {"role": "user", "content": "ok"},
        ],
    )
    ledger.append_messages(sid, [dict(m) for m in middle])
    filler = "The rest of the module was read and left alone. " * 40
    for i in range(12):
        ledger.append_messages(
            sid,
            [
                {"role": "assistant", "content": f"Step {100 + i} done. {filler}"},
                {"role": "user", "content": f"continue {i}"},
            ],
        )
    outcome = anyio.run(lambda: compact(ledger, sid, Scripted(summary)))
    assert outcome.action == "compressed"
    return audit_chain(ledger, sid).compactions[0]


def status(audit: CompactionAudit, value: str) -> str:
    """``kept``, ``lost`` or ``not extracted``: the audit's verdict on the fact `value`."""
    for fact in audit.extracted:
        if fact.value == value:
            return "kept" if fact in audit.kept else "lost"
    return "not extracted"


def assistant(text: str) -> list[Mapping[str, Any]]:
    return [{"role": "assistant", "content": text}]
