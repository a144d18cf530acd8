"""The built-in engine runs the context-engine contract."""

from __future__ import annotations

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.engine import BuiltinEngine, ContextEngine
from ctxledger.testing.engine import ContextEngineContract


class TestBuiltinEngine(ContextEngineContract):
    def make_engine(
        self, ledger: Ledger, summarizer: Summarizer, config: CompressionConfig
    ) -> ContextEngine:
        return BuiltinEngine(ledger, summarizer, config)
