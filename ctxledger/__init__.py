"""ctxledger: Hermes-style context compression for LLM agents, as an event-sourced ledger.

The public API, re-exported here (``__all__`` is checked by a test):

* :class:`Ledger` — the synchronous facade over one SQLite ledger;
* :class:`ContextService` — the async runtime an agent loop calls every turn;
* :class:`CompressionConfig` / :func:`load_config` — settings (HERMES_SPEC §1);
* :func:`compact` — run one compaction; :func:`plan` / :func:`apply` — the pure planner;
* summarizers: :class:`OfflineSummarizer`, :class:`LLMSummarizer`, :class:`RecordedSummarizer`;
* analysis: :func:`audit_chain`, :func:`audit_compaction`, :func:`trace`, :func:`diff`,
  :func:`recall`, :func:`expand` (+ the agent tools ``RECALL_TOOL``, ``EXPAND_TOOL`` and
  :func:`handle_tool_call`), :func:`undo`, :func:`whatif`;
* :class:`SQLiteEventStore` and the error classes of :mod:`ctxledger.errors`.
"""

from ctxledger.analysis.audit import audit_chain, audit_compaction, trace
from ctxledger.analysis.diff import diff
from ctxledger.analysis.recall import EXPAND_TOOL, RECALL_TOOL, expand, handle_tool_call, recall
from ctxledger.analysis.undo import undo
from ctxledger.analysis.whatif import whatif
from ctxledger.compressor.assemble import apply
from ctxledger.compressor.config import CompressionConfig, load_config
from ctxledger.compressor.planner import CompactionPlan, plan
from ctxledger.compressor.summarizers.llm import LLMSummarizer
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.compressor.summarizers.recorded import RecordedSummarizer
from ctxledger.errors import (
    CompressionError,
    ConcurrencyError,
    ContextOverflowError,
    CtxLedgerError,
    IntegrityError,
    InvalidInput,
    InvalidMessage,
    SessionEnded,
    StorageFullError,
    SummarizerError,
    UnknownSession,
)
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.ledger.compaction import CompactionOutcome, compact
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService, Recovery, TurnResult
from ctxledger.usage import CanonicalUsage, normalize_usage

__all__ = [
    "EXPAND_TOOL",
    "RECALL_TOOL",
    "CanonicalUsage",
    "CompactionOutcome",
    "CompactionPlan",
    "CompressionConfig",
    "CompressionError",
    "ConcurrencyError",
    "ContextOverflowError",
    "ContextService",
    "CtxLedgerError",
    "IntegrityError",
    "InvalidInput",
    "InvalidMessage",
    "LLMSummarizer",
    "Ledger",
    "OfflineSummarizer",
    "RecordedSummarizer",
    "Recovery",
    "SQLiteEventStore",
    "SessionEnded",
    "StorageFullError",
    "SummarizerError",
    "TurnResult",
    "UnknownSession",
    "apply",
    "audit_chain",
    "audit_compaction",
    "compact",
    "diff",
    "expand",
    "handle_tool_call",
    "load_config",
    "normalize_usage",
    "plan",
    "recall",
    "trace",
    "undo",
    "whatif",
]
