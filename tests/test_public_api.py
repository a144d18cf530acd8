"""The package root re-exports the public API, and only names that exist."""

from __future__ import annotations

import ctxledger


def test_all_names_exist_and_are_sorted_uniquely() -> None:
    assert sorted(set(ctxledger.__all__), key=str.lower) == sorted(ctxledger.__all__, key=str.lower)
    for name in ctxledger.__all__:
        assert getattr(ctxledger, name) is not None, name


def test_the_public_api_list() -> None:
    assert set(ctxledger.__all__) == {
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
        "compact",
        "load_config",
        "normalize_usage",
        "plan",
        "EXPAND_TOOL",
        "RECALL_TOOL",
        "audit_chain",
        "audit_compaction",
        "diff",
        "expand",
        "handle_tool_call",
        "recall",
        "trace",
        "undo",
        "whatif",
    }


def test_every_error_class_is_a_ctxledger_error() -> None:
    for name in ctxledger.__all__:
        obj = getattr(ctxledger, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, ctxledger.CtxLedgerError), name
