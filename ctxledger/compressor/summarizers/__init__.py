"""Summarizers: the protocol and its implementations (HERMES_SPEC §3 phase 3).

* :class:`OfflineSummarizer` — deterministic, extractive, the embedded default.
* :class:`LLMSummarizer` — OpenAI-compatible chat completions or Anthropic messages.
* :class:`RecordedSummarizer` — replays recorded summary texts; never calls a model.
* :func:`fallback_summary` — the body inserted when a summarizer fails;
  :class:`FallbackSummarizer` — any summarizer, falling back to it.
"""

from ctxledger.compressor.summarizers.base import (
    SECTION_HEADINGS,
    SECTIONS,
    Summarizer,
    SummaryRequest,
    SummaryResult,
    parse_sections,
    render_sections,
    request_hash,
)
from ctxledger.compressor.summarizers.fallback import (
    FallbackSummarizer,
    fallback_note,
    fallback_summary,
    summarize_with_fallback,
)
from ctxledger.compressor.summarizers.llm import LLMSummarizer, build_prompt
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.compressor.summarizers.recorded import RecordedSummarizer, request_key

__all__ = [
    "SECTIONS",
    "SECTION_HEADINGS",
    "FallbackSummarizer",
    "LLMSummarizer",
    "OfflineSummarizer",
    "RecordedSummarizer",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
    "build_prompt",
    "fallback_note",
    "fallback_summary",
    "parse_sections",
    "render_sections",
    "request_hash",
    "request_key",
    "summarize_with_fallback",
]
