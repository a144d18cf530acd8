"""The behaviour every context engine must show, as an abstract test class.

Subclass :class:`ContextEngineContract` and implement ``make_engine(ledger,
summarizer, config)``; the suite drives a generated coding-agent session through
:class:`~ctxledger.runtime.service.ContextService` with your engine plugged in, on a
small window so it must compact, and checks the invariants of DESIGN.md on every
live view it produces: no tool result without its call and no call without its
result, the latest user ask after the summary, every original still retrievable from
the log, and the projections rebuilt from scratch equal to the incremental ones.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from ctxledger.analysis.replay import rebuild_check
from ctxledger.clock import SequentialIds, StepClock
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.markers import is_summary_message
from ctxledger.compressor.summarizers.base import Summarizer
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.demo.synth import SessionSynth
from ctxledger.eventstore import SQLiteEventStore
from ctxledger.ledger.compaction import CompactionOutcome
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import JSON
from ctxledger.runtime.engine import ContextEngine
from ctxledger.runtime.service import ContextService

__all__ = ["ContextEngineContract", "check_live_view"]

#: a window small enough that a dozen generated turns must be compacted
SMALL_WINDOW = CompressionConfig(context_length=16_000, threshold_floor_tokens=0)


def check_live_view(messages: list[JSON]) -> None:
    """The transcript invariants of DESIGN.md on one API view (system message first)."""
    called: set[str] = set()
    answered: set[str] = set()
    for m in messages:
        if m.get("role") == "assistant":
            called.update(c["id"] for c in m.get("tool_calls") or [])
        elif m.get("role") == "tool":
            assert m.get("tool_call_id") in called, (
                f"tool result {m.get('tool_call_id')} has no call"
            )
            answered.add(m["tool_call_id"])
    last = messages[-1] if messages else {}
    in_flight = (
        {c["id"] for c in last.get("tool_calls") or []}
        if last.get("role") == "assistant"
        else set()
    )
    assert called - answered <= in_flight, f"calls without results: {sorted(called - answered)}"
    summaries = [i for i, m in enumerate(messages) if is_summary_message(m)]
    users = [i for i, m in enumerate(messages) if m.get("role") == "user" and i not in summaries]
    if summaries and users:
        assert users[-1] >= summaries[-1], "the latest user ask comes before the summary"


class ContextEngineContract(abc.ABC):
    """Subclass per engine; ``make_engine`` builds one over ``ledger``."""

    turns: int = 14

    @abc.abstractmethod
    def make_engine(
        self, ledger: Ledger, summarizer: Summarizer, config: CompressionConfig
    ) -> ContextEngine: ...

    @pytest.fixture
    def service(self) -> Iterator[ContextService]:
        ledger = Ledger(
            SQLiteEventStore(":memory:"),
            clock=StepClock(),
            ids=SequentialIds(),
            config=SMALL_WINDOW,
        )
        summarizer = OfflineSummarizer()
        engine = self.make_engine(ledger, summarizer, SMALL_WINDOW)
        svc = ContextService(ledger, summarizer=summarizer, config=SMALL_WINDOW, engine=engine)
        yield svc
        ledger.close()

    def drive(self, svc: ContextService) -> tuple[str, list[list[JSON]], list[JSON]]:
        """Run the generated session; returns (tip, every live view seen, every message sent)."""
        synth = SessionSynth(11, big_outputs=False)
        views: list[list[JSON]] = []
        sent: list[JSON] = []

        async def run() -> str:
            sid = await svc.start_session(
                model="synth-coder-1",
                context_length=SMALL_WINDOW.context_length,
                system_prompt=synth.system_prompt(),
                tools=synth.tools(),
            )
            for turn in synth.turns(self.turns):
                sid = (await svc.append(sid, turn)).session_id
                sent.extend(turn)
                sid = (await svc.preflight(sid)).session_id
                views.append(svc.ledger.api_messages(sid))
                prompt = svc.ledger.transcript.total_tokens(sid)
                usage = {"prompt_tokens": prompt, "completion_tokens": 50}
                sid = (await svc.report_usage(sid, usage)).session_id
                views.append(svc.ledger.api_messages(sid))
            return sid

        return anyio.run(run), views, sent

    def test_has_a_name(self, service: ContextService) -> None:
        assert isinstance(service.engine.name, str) and service.engine.name

    def test_should_compress_answers_a_decision_and_a_reason(self, service: ContextService) -> None:
        sid = anyio.run(lambda: service.start_session(model="m", context_length=16_000))
        decision, reason = service.engine.should_compress(sid, 10)
        assert decision is False and isinstance(reason, str)

    def test_a_long_session_is_compacted_and_every_view_is_valid(
        self, service: ContextService
    ) -> None:
        tip, views, _ = self.drive(service)
        assert service.ledger.chains.compression_count(tip) >= 1
        for view in views:
            check_live_view(view)
        threshold = SMALL_WINDOW.threshold_tokens(SMALL_WINDOW.context_length or 0)
        assert service.ledger.transcript.total_tokens(tip) <= max(threshold, 1) * 1.5

    def test_every_original_message_stays_retrievable(self, service: ContextService) -> None:
        _, _, sent = self.drive(service)
        stored = [s.message for s in service.ledger.transcript.state.messages.values()]
        for message in sent:
            assert message in stored

    def test_rebuilt_projections_equal_the_incremental_ones(self, service: ContextService) -> None:
        tip, _, _ = self.drive(service)
        report = rebuild_check(service.ledger, tip)
        assert report.equal, report.mismatches

    def test_manual_compress_compacts_or_says_why_not(self, service: ContextService) -> None:
        tip, _, _ = self.drive(service)
        outcome: Any = anyio.run(
            lambda: service.engine.compress(tip, trigger="manual", focus="tests")
        )
        assert isinstance(outcome, CompactionOutcome)
        assert outcome.action in ("compressed", "skipped")
        if outcome.action == "skipped":
            assert outcome.skip_reason
