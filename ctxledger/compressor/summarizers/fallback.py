"""The deterministic fallback summary used when a summarizer fails (HERMES_SPEC §3).

The middle is never dropped silently (Hermes #10719, #29559): when the summarizer
fails with a non-aborting failure, the compaction still goes ahead with this body.
It opens with a note saying it is a fallback and why, then fills the same template
headings as every other summarizer — from the dropped turns themselves: the user's
asks (the latest stated once, #49307), the tool actions with their outcomes, errors,
file paths and the last turns — within the same token budget.
"""

from __future__ import annotations

from ctxledger.compressor.markers import prompt_text
from ctxledger.compressor.redact import redact
from ctxledger.compressor.summarizers.base import (
    Summarizer,
    SummaryRequest,
    SummaryResult,
    request_hash,
)
from ctxledger.compressor.summarizers.offline import build_summary
from ctxledger.errors import FailureClass, SummarizerError

#: how many of the last dropped turns the fallback quotes under In Progress
FALLBACK_LAST_TURNS = 3


def fallback_note(request: SummaryRequest, failure: str | None = None) -> str:
    """The opening note: this is a fallback, how many messages it stands for, and why."""
    reason = " ".join((failure or "no summarizer result").split())
    if len(reason) > 200:
        reason = reason[:200] + " …"
    return (
        prompt_text("summary_fallback.md")
        .replace("{n_dropped}", str(len(request.turns)))
        .replace("{reason}", reason)
    )


def fallback_summary(request: SummaryRequest, failure: str | None = None) -> str:
    """The fallback body for `request`: deterministic, within the budget, template headings."""
    return build_summary(
        request, preamble=fallback_note(request, failure), last_turns=FALLBACK_LAST_TURNS
    )


def fallback_result(
    request: SummaryRequest,
    *,
    failure: str,
    failure_class: FailureClass,
    summarizer: str,
    model: str | None = None,
) -> SummaryResult:
    """A :class:`SummaryResult` carrying the fallback body and the failure it replaces."""
    return SummaryResult(
        text=fallback_summary(request, failure),
        summarizer=summarizer,
        model=model,
        prompt_hash=request_hash(request, summarizer="fallback", failure=failure),
        fallback=True,
        failure=failure,
        failure_class=failure_class,
    )


async def summarize_with_fallback(summarizer: Summarizer, request: SummaryRequest) -> SummaryResult:
    """`summarizer`'s result; on a non-aborting failure, the deterministic fallback summary.

    Auth and network failures are re-raised: the compaction is abandoned and nothing
    changes. Every other failure (no summarizer configured, timeout, rate limit,
    server error, malformed or empty output, ...) returns :func:`fallback_summary` with
    ``fallback=True`` and the failure recorded, so the middle is never dropped silently.

    Each failure is judged by its own class (HERMES_SPEC §3). hermes-agent 0.19 keeps a
    network failure's "abort" flag until a summary succeeds, so a server error or an
    empty reply after a dropped connection abandons its compaction too (a side effect
    of guarding its cooldown's early return); ctxledger falls back there, as for a
    first such failure (README "Differences", session 31's differential test).
    """
    try:
        return await summarizer.summarize(request)
    except SummarizerError as exc:
        if exc.aborts:
            raise
        # redacted where it is first written down: the failure is stored (the summary's
        # event, the prompt hash over it) and shown by every output after it
        # (an HTTP error can quote the key it refused). Replay and `replay --verify` read
        # the stored text and never recompute it, so ledgers written before still verify.
        return fallback_result(
            request,
            failure=redact(str(exc)),
            failure_class=exc.failure_class,
            summarizer=getattr(summarizer, "kind", "unknown"),
            model=getattr(summarizer, "model", None),
        )


class FallbackSummarizer:
    """A summarizer that never fails softly: ``inner``'s summary, or the fallback body.

    :func:`summarize_with_fallback` as a :class:`Summarizer` (``inner=None``: always the
    fallback, e.g. when nothing is configured). Aborting failures still raise.
    """

    kind = "fallback"

    def __init__(self, inner: Summarizer | None = None) -> None:
        self.inner = inner
        self.model = getattr(inner, "model", None)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.inner is None:
            return fallback_result(
                request,
                failure="no summarizer configured",
                failure_class="not_configured",
                summarizer=self.kind,
            )
        return await summarize_with_fallback(self.inner, request)


__all__ = [
    "FALLBACK_LAST_TURNS",
    "FallbackSummarizer",
    "fallback_note",
    "fallback_result",
    "fallback_summary",
    "summarize_with_fallback",
]
