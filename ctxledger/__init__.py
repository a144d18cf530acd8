"""ctxledger: Hermes-style context compression for LLM agents, as an event-sourced ledger.

The public API, re-exported here (``__all__`` is checked by a test; the README and the
docs import from this module only):

* :class:`Ledger` — the synchronous facade over one ledger;
* :class:`ContextService` — the async runtime an agent loop calls every turn;
* :class:`CompressionConfig` / :func:`load_config` — settings (HERMES_SPEC §1);
* :func:`compact` — run one compaction; :func:`plan` / :func:`apply` — the pure planner;
* summarizers: :class:`OfflineSummarizer`, :class:`LLMSummarizer`, :class:`RecordedSummarizer`;
* analysis: :func:`audit_chain`, :func:`audit_compaction`, :func:`trace`, :func:`diff`,
  :func:`recall`, :func:`expand` (+ the agent tools ``RECALL_TOOL``, ``EXPAND_TOOL`` and
  :func:`handle_tool_call`), :func:`undo`, :func:`whatif`;
* the protocols a user implements: :class:`Summarizer`, :class:`ContextEngine`,
  :class:`EventStore` (with :class:`EventSource`, what projections read); the
  :class:`SQLiteEventStore` backend;
* every error class of :mod:`ctxledger.errors`.
"""

from __future__ import annotations

import warnings
from typing import Any

from ctxledger import _compat
from ctxledger.analysis.agent_tools import EXPAND_TOOL, RECALL_TOOL, handle_tool_call
from ctxledger.analysis.audit import audit_chain, audit_compaction, trace
from ctxledger.analysis.diff import diff
from ctxledger.analysis.recall import expand, recall
from ctxledger.analysis.undo import undo
from ctxledger.analysis.whatif import whatif
from ctxledger.compressor.assemble import apply
from ctxledger.compressor.config import CompressionConfig, load_config
from ctxledger.compressor.planner import CompactionPlan, plan
from ctxledger.compressor.summarizers.base import Summarizer, SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.llm import LLMSummarizer
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.compressor.summarizers.recorded import RecordedSummarizer
from ctxledger.errors import (
    CompressionError,
    ConcurrencyError,
    ConnectionLost,
    ContextOverflowError,
    CtxLedgerError,
    DuplicateEventError,
    FailureClass,
    ImportFormatError,
    IntegrityError,
    InvalidConfig,
    InvalidEvent,
    InvalidInput,
    InvalidMessage,
    LedgerChanged,
    NotFound,
    OneReference,
    ServerCancelled,
    SessionEndedError,
    StorageFullError,
    StoreBusy,
    StoreError,
    SummarizerError,
    UnknownBlob,
    UnknownCompaction,
    UnknownMessage,
    UnknownSession,
)
from ctxledger.eventstore import EventStore, SQLiteEventStore
from ctxledger.ledger import CompactionOutcome, Ledger, SessionSpec, compact
from ctxledger.projections import EventSource
from ctxledger.runtime.engine import ContextEngine
from ctxledger.runtime.service import ContextService, Recovery, TurnResult
from ctxledger.usage import CanonicalUsage, normalize_usage

__version__ = "0.1.0"

_compat.install()  # old module paths (ctxledger.service, …) warn for one release

#: old public names kept for one release: name -> (new name, object)
_DEPRECATED: dict[str, tuple[str, Any]] = {"SessionEnded": ("SessionEndedError", SessionEndedError)}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        new, obj = _DEPRECATED[name]
        warnings.warn(
            f"ctxledger.{name} is deprecated; use ctxledger.{new}", DeprecationWarning, stacklevel=2
        )
        return obj
    raise AttributeError(f"module 'ctxledger' has no attribute {name!r}")


__all__ = [
    "EXPAND_TOOL",
    "RECALL_TOOL",
    "CanonicalUsage",
    "CompactionOutcome",
    "CompactionPlan",
    "CompressionConfig",
    "CompressionError",
    "ConcurrencyError",
    "ConnectionLost",
    "ContextEngine",
    "ContextOverflowError",
    "ContextService",
    "CtxLedgerError",
    "DuplicateEventError",
    "EventSource",
    "EventStore",
    "FailureClass",
    "ImportFormatError",
    "IntegrityError",
    "InvalidConfig",
    "InvalidEvent",
    "InvalidInput",
    "InvalidMessage",
    "LLMSummarizer",
    "Ledger",
    "LedgerChanged",
    "NotFound",
    "OfflineSummarizer",
    "OneReference",
    "RecordedSummarizer",
    "Recovery",
    "SQLiteEventStore",
    "ServerCancelled",
    "SessionEndedError",
    "SessionSpec",
    "StorageFullError",
    "StoreBusy",
    "StoreError",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "SummaryResult",
    "TurnResult",
    "UnknownBlob",
    "UnknownCompaction",
    "UnknownMessage",
    "UnknownSession",
    "__version__",
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
