"""Reading the log after the fact: audit, diff, recall, replay, undo and what-if.

* :mod:`~ctxledger.analysis.compactions`: the list of a chain's compactions and their records;
* :mod:`~ctxledger.analysis.audit`: facts each compaction kept and lost; ``trace``;
* :mod:`~ctxledger.analysis.diff`: message- and section-level differences;
* :mod:`~ctxledger.analysis.recall`: FTS5 search over every message ever appended; ``expand``;
* :mod:`~ctxledger.analysis.replay`: rebuild check and re-planning of recorded compactions;
* :mod:`~ctxledger.analysis.history`, :mod:`~ctxledger.analysis.whatif`: a chain's inputs
  re-driven under other settings into a scratch ledger;
* :mod:`~ctxledger.analysis.undo`: make a pre-compaction transcript live again.
"""

from ctxledger.analysis.agent_tools import EXPAND_TOOL, RECALL_TOOL, handle_tool_call
from ctxledger.analysis.audit import audit_chain, audit_compaction, trace
from ctxledger.analysis.diff import diff
from ctxledger.analysis.recall import expand, recall
from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.analysis.undo import undo
from ctxledger.analysis.whatif import whatif

__all__ = [
    "EXPAND_TOOL",
    "RECALL_TOOL",
    "audit_chain",
    "audit_compaction",
    "diff",
    "expand",
    "handle_tool_call",
    "rebuild_check",
    "recall",
    "trace",
    "undo",
    "verify_compactions",
    "whatif",
]
