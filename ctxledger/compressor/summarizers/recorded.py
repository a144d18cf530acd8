"""Replay: a summarizer that answers with recorded summaries and never calls a model.

Records are looked up, in order, by ``request.context["compaction_id"]``,
``request.context["summary_key"]`` and :func:`request_key` (a hash of the request's
inputs). A record is either a text or a full :class:`SummaryResult` (returned as is,
so a replay reproduces the recorded summarizer kind, model and prompt hash). Asking
for something that was never recorded is a ``SummarizerError`` of class ``other``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult, request_hash
from ctxledger.errors import InvalidConfig, SummarizerError
from ctxledger.integers import shown

Record = str | SummaryResult
_CONTEXT_KEYS = ("compaction_id", "summary_key")


def request_key(request: SummaryRequest) -> str:
    """The request's :func:`~ctxledger.compressor.summarizers.base.request_hash` (its
    summarization inputs, not its context or session model)."""
    return request_hash(request)


class RecordedSummarizer:
    """Returns recorded summaries: one for every request, or one per key."""

    kind = "recorded"
    model: str | None = None

    def __init__(self, records: Mapping[str, Record] | Record) -> None:
        if isinstance(records, str | SummaryResult):
            self._single: Record | None = records
            self._records: dict[str, Record] = {}
        elif isinstance(records, Mapping):
            self._single = None
            self._records = dict(records)
            for key, record in self._records.items():  # (a wrong one failed mid-compaction)
                if not (isinstance(key, str) and isinstance(record, str | SummaryResult)):
                    raise InvalidConfig(
                        f"recorded summaries are keyed by text and each is a text or a "
                        f"SummaryResult, got {shown(key)}: {type(record).__name__}"
                    )
        else:  # (a number was a TypeError, a list a ValueError from dict())
            raise InvalidConfig(
                "records must be a summary text, a SummaryResult or a mapping of keys to "
                f"them, got {type(records).__name__}"
            )

    def _lookup(self, request: SummaryRequest) -> tuple[Record, str] | None:
        if self._single is not None:
            return self._single, "*"
        context = request.context or {}
        keys = [str(context[k]) for k in _CONTEXT_KEYS if context.get(k) is not None]
        keys.append(request_key(request))
        for key in keys:
            if key in self._records:
                return self._records[key], key
        return None

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        found = self._lookup(request)
        if found is None:
            raise SummarizerError(
                "no recorded summary for this request (looked up by compaction_id, summary_key "
                f"and request key {request_key(request)[:12]}…); record one or use another summarizer",
                failure_class="other",
            )
        record, _ = found
        if isinstance(record, SummaryResult):
            return record
        return SummaryResult(text=record, summarizer=self.kind, prompt_hash=request_key(request))


__all__ = ["RecordedSummarizer", "request_key"]
