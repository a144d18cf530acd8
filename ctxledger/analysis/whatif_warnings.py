"""What makes a what-if's comparison with the recorded chain weaker than it looks.

The reproduction line ("reproduced: 0 of 1 recorded compactions") is a fact; these
warnings say when it is not the what-if's fault: the log carries no provider usage, a
recorded compaction was the source agent's, or the chain was imported (no agent loop
ran as its messages arrived) while the what-if runs the loop's automatic triggers over
them.
"""

from __future__ import annotations

from ctxledger.analysis.compactions import CompactionRecord, chain_compactions
from ctxledger.analysis.history import History, UsageStep
from ctxledger.ledger.facade import Ledger

#: triggers the what-if's loop fires on its own (HERMES_SPEC §2), as opposed to a
#: compaction a step asked for (``manual``) or one an import recorded
_AUTOMATIC = frozenset({"preflight", "in_loop", "hygiene", "overflow"})


def comparison_warnings(ledger: Ledger, hist: History, scratch: Ledger, tip: str) -> list[str]:
    """The warnings of the what-if of `hist` (recorded in `ledger`) whose chain ends at
    `tip` in `scratch`."""
    out: list[str] = []
    usage = [s for s in hist.steps if isinstance(s, UsageStep)]
    if not usage or not any(s.recorded_prompt for s in usage):
        out.append(
            "the recorded log carries no provider usage: recorded tokens sent are 0 and the "
            "what-if's token counts are its own estimates, not comparable to what was billed"
        )
    recorded = chain_compactions(ledger, hist.session_id)
    imported = [r for r in recorded if r.summary.imported]
    if imported:
        out.append(
            f"{len(imported)} recorded compaction(s) were made by the source agent "
            f"({imported[0].summary.summarizer}); its triggers and summaries are not ctxledger's, "
            "so the what-if cannot reproduce them, only compare with them"
        )
    if not usage and hist.start.source is not None:
        out.extend(_imported(hist.start.source, recorded, chain_compactions(scratch, tip)))
    return out


def _imported(
    source: str, recorded: list[CompactionRecord], whatif: list[CompactionRecord]
) -> list[str]:
    """A warning when the chain was imported (its first session names its source) and
    no model call was recorded since, the what-if compacted on its loop's own triggers
    and the recording has no such compaction: no trigger ran as the messages arrived.
    (Not said of a live chain without usage: a model that reports none is one.)"""
    automatic = [r for r in whatif if r.switch.trigger in _AUTOMATIC]
    if not automatic or any(r.switch.trigger in _AUTOMATIC for r in recorded):
        return []
    triggers = sorted({r.switch.trigger for r in automatic})
    return [
        f"the chain was imported ({source}) and no model call is recorded since: no "
        "trigger ran as its messages arrived; the what-if runs the agent loop over them "
        f"and made {len(automatic)} compaction(s) of its own ({', '.join(triggers)}) that "
        "the recording has no counterpart for"
    ]
