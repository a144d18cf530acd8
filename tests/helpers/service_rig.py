"""What the ContextService trigger tests share: a manual clock, scripted summarizers,
a service on a SQLite ledger, sessions grown to a size (``tests/test_service_triggers.py``,
``tests/test_service_hygiene_failures.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from ctxledger.clock import SequentialIds
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import SummarizerError
from ctxledger.events import (
    Event,
)
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import content_text
from ctxledger.runtime.service import ContextService
from helpers.ledger_helpers import chain_events

E = TypeVar("E", bound=Event)
WINDOW = 16_384  # threshold 8,192 with the floor disabled
THRESHOLD = 8_192
CONFIG = CompressionConfig(threshold_floor_tokens=0)


class ManualClock:
    """A clock that only moves when told to (cooldowns are judged against it)."""

    def __init__(self, now: float = 1_767_225_600.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FlakySummarizer:
    """Fails with the given classes first, then summarizes offline."""

    kind = "flaky"

    def __init__(self, *failures: str) -> None:
        self.failures = list(failures)
        self.inner = OfflineSummarizer()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.failures:
            raise SummarizerError("summarizer unavailable", failure_class=self.failures.pop(0))
        return await self.inner.summarize(request)


class VerbatimSummarizer:
    """Returns the previous summary and every turn unabridged: compaction without shrinking."""

    kind = "verbatim"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        parts = [request.previous_summary or "", *(content_text(turn) for turn in request.turns)]
        return SummaryResult(
            text="\n".join(p for p in parts if p) or "(empty)", summarizer=self.kind
        )


def make(
    db: Path, clock: ManualClock, config: CompressionConfig = CONFIG, **kwargs: Any
) -> ContextService:
    ledger = Ledger.open(
        db,
        clock=clock,
        ids=SequentialIds(kwargs.pop("namespace", "")),
        config=config,
        durability="normal",
    )
    return ContextService(ledger, config=config, **kwargs)


def events(svc: ContextService, sid: str, kind: type[E]) -> list[E]:
    return chain_events(svc.ledger, sid, kind)


async def grow(svc: ContextService, sid: str, tokens: int, seed: int = 3) -> str:
    """Append whole synthetic turns until the live view holds at least `tokens`."""
    synth = SessionSynth(seed, big_outputs=False, id_prefix=f"s{seed}_call")
    i = 0
    while svc.ledger.transcript.total_tokens(sid) < tokens:
        await svc.append(sid, synth.turn(i))
        i += 1
    return sid


async def session(svc: ContextService, tokens: int = 0, **kwargs: Any) -> str:
    values: dict[str, Any] = {
        "model": "test-model",
        "context_length": WINDOW,
        "system_prompt": "You are a coding agent.",
    }
    values.update(kwargs)
    sid = await svc.start_session(**values)
    return await grow(svc, sid, tokens) if tokens else sid


async def two_party(svc: ContextService, pairs: int) -> str:
    """A session of `pairs` user/assistant exchanges of ~2,700 tokens each."""
    sid = await session(svc)
    block = "the deploy log shows retries on the storage bucket " * 300
    for i in range(pairs):
        await svc.append(
            sid,
            [
                {"role": "user", "content": f"{i}: {block}"},
                {"role": "assistant", "content": f"{i}: {block}"},
            ],
        )
    return sid


def usage(prompt: int, output: int = 50) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": output}
