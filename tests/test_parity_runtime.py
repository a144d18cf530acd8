"""Hermes field parity (issue 10) in the running service, against a real SQLite ledger.

2. A response without usage is recorded as "no usage reported"; the in-loop trigger
   judges it by the larger of the session's latest real prompt count (Hermes 0.19's
   in-loop figure) and the estimate of system + messages + tools (what Hermes's check
   before the next call judges); a reported 0 is no count. The anti-thrash guard gives
   it no verdict (neither a strike nor a reset; a zero must not reset strikes), and it
   consumes a compaction's pending verdict (so does a model switch). After a final answer (``tool_calls=False``)
   the in-loop check waits for the next preflight, as Hermes checks only after a
   response whose tools ran.
9. ``switch_model`` clears the strikes; a switch to another model also clears the
   fallback streak and the summarizer cooldown, the same model with another window
   keeps them, and a window the provider stated clears the strikes and the kept count
   (hermes-agent 0.19's ``update_model``, session 31): a chain blocked under the old
   model is unblocked (and a reopened ledger folds to the same state).
11. A local server's stated window (any status, any body shape) is learned.
13. Overflow recovery gives up when a retry made no material progress.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import pytest
from helpers.ledger_helpers import chain_events

from ctxledger.clock import SequentialIds
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import ContextOverflowError, InvalidInput, SummarizerError
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    ContextLimitLearned,
    Event,
    UsageReported,
)
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import content_text
from ctxledger.runtime.service import ContextService

pytestmark = pytest.mark.anyio

E = TypeVar("E", bound=Event)
WINDOW = 16_384
THRESHOLD = 8_192
CONFIG = CompressionConfig(threshold_floor_tokens=0)
HUGE = "lorem ipsum dolor sit amet " * 1_800


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_767_225_600.0

    def __call__(self) -> float:
        return self.now


class ServerErrorSummarizer:
    """Fails with a server error: every compaction uses the fallback summary."""

    kind = "broken"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        raise SummarizerError("HTTP 500", failure_class="server")


class FlakySummarizer:
    """Fails with a server error while ``failing``; then writes a short summary."""

    kind = "flaky"

    def __init__(self) -> None:
        self.failing = True

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.failing:
            raise SummarizerError("HTTP 500", failure_class="server")
        return SummaryResult(text="## Goal\nkeep going", summarizer=self.kind)


class DroppingSummarizer:
    """Loses its connection while ``dropping`` (the compaction is abandoned, 30 s of
    cooldown); then writes a short summary."""

    kind = "dropping"

    def __init__(self) -> None:
        self.dropping = True

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if self.dropping:
            raise SummarizerError("connection refused", failure_class="network")
        return SummaryResult(text="## Goal\nkeep going", summarizer=self.kind)


class AlmostVerbatimSummarizer:
    """Returns 97 % of what it was given: a compaction that barely shrinks anything."""

    kind = "verbatim"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        text = "\n".join(content_text(t) for t in request.turns)
        return SummaryResult(text=text[: len(text) * 97 // 100] or "x", summarizer=self.kind)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def make(path: Path, clock: ManualClock, **kwargs: Any) -> ContextService:
    config = kwargs.pop("config", CONFIG)
    ledger = Ledger.open(path, clock=clock, ids=SequentialIds(), config=config, durability="normal")
    return ContextService(ledger, config=config, **kwargs)


def events(svc: ContextService, sid: str, kind: type[E]) -> list[E]:
    return chain_events(svc.ledger, sid, kind)


async def session(svc: ContextService, tokens: int = 0) -> str:
    sid = await svc.start_session(
        model="local-model", context_length=WINDOW, system_prompt="You are a coding agent."
    )
    synth = SessionSynth(3, big_outputs=False)
    i = 0
    while svc.ledger.transcript.total_tokens(sid) < tokens:
        await svc.append(sid, synth.turn(i))
        i += 1
    return sid


async def blocked_session(svc: ContextService) -> str:
    """Two no-op passes (too few messages to compact): automatic compression is blocked."""
    sid = await session(svc)
    await svc.append(
        sid,
        [
            {"role": "user", "content": HUGE},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": HUGE},
        ],
    )
    for _ in range(2):
        await svc.report_usage(sid, {"prompt_tokens": THRESHOLD + 500, "completion_tokens": 5})
    assert svc.status(sid)["blocked"]
    return sid


# --- 2. no usage reported ------------------------------------------------------------------


@pytest.mark.parametrize("raw", [{}, None, {"prompt_tokens": None, "completion_tokens": None}])
async def test_no_usage_triggers_in_the_loop_by_the_estimate(
    tmp_path: Path, clock: ManualClock, raw: Any
) -> None:
    svc = make(tmp_path / "l.db", clock)
    sid = await session(svc, THRESHOLD + 1_000)
    result = await svc.report_usage(sid, raw)
    assert result.compressed and result.session_id != sid
    (check,) = events(svc, sid, CompressionChecked)
    assert check.trigger == "in_loop" and "no usage reported" in check.source
    assert check.tokens >= THRESHOLD
    assert "system + messages + tools schema" in check.source
    (usage,) = events(svc, sid, UsageReported)
    assert usage.shape == "none" and usage.estimated_prompt_tokens == check.tokens


async def test_no_usage_below_the_threshold_does_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    svc = make(tmp_path / "l.db", clock)
    sid = await session(svc, 2_000)
    result = await svc.report_usage(sid, {})
    assert result.session_id == sid and not result.compactions
    assert svc.ledger.usage(sid).agent_calls_without_usage == 1


async def test_no_usage_does_not_reset_the_anti_thrash_strikes(
    tmp_path: Path, clock: ManualClock
) -> None:
    svc = make(tmp_path / "l.db", clock)
    sid = await blocked_session(svc)
    strikes = svc.status(sid)["strikes"]
    result = await svc.report_usage(sid, {})  # the estimate is still over the threshold
    assert svc.status(sid)["blocked"] and svc.status(sid)["strikes"] == strikes
    assert not result.compactions and "paused" in result.notices[0]
    assert svc.tracker.rebuilt(sid) == svc.tracker.state(sid)


async def test_no_usage_neither_strikes_nor_resets(tmp_path: Path, clock: ManualClock) -> None:
    svc = make(tmp_path / "l.db", clock, config=CONFIG.replace(enabled=False))
    sid = await session(svc, THRESHOLD + 1_000)
    new = (await svc.compress(sid)).session_id  # manual
    await svc.report_usage(new, {"prompt_tokens": THRESHOLD + 100, "completion_tokens": 1})
    assert svc.status(new)["strikes"] == 1  # the first real count after it was still over
    assert svc.ledger.transcript.total_tokens(new) < THRESHOLD
    await svc.report_usage(new, None)  # no real count: no verdict (it was a reset before)
    assert svc.status(new)["strikes"] == 1
    await svc.report_usage(new, {"prompt_tokens": THRESHOLD - 100, "completion_tokens": 1})
    assert svc.status(new)["strikes"] == 0
    assert svc.tracker.rebuilt(new) == svc.tracker.state(new)


async def test_no_usage_consumes_the_pending_verdict_of_a_compaction(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Hermes: the first response after a compaction decides whether it cleared the
    threshold; one without usage consumes that verdict, so a later real count over the
    threshold is not charged to the compaction."""
    svc = make(tmp_path / "l.db", clock, config=CONFIG.replace(enabled=False))
    sid = await session(svc, THRESHOLD + 1_000)
    new = (await svc.compress(sid)).session_id
    await svc.report_usage(new, {})
    await svc.report_usage(new, {"prompt_tokens": THRESHOLD + 100, "completion_tokens": 1})
    assert svc.status(new)["strikes"] == 0
    assert svc.tracker.rebuilt(new) == svc.tracker.state(new)


def _skips(svc: ContextService, sid: str) -> list[tuple[int, str]]:
    """The in-loop skips recorded on `sid` itself (tokens judged, their source)."""
    skips = events(svc, sid, CompressionSkipped)
    return [(e.details["tokens"], e.details["source"]) for e in skips if e.session_id == sid]


async def test_no_usage_is_judged_by_the_latest_real_count_until_a_model_switch(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Hermes keeps its last reported count until a compaction or a model switch: a
    response without usage is judged by it, whatever the estimate (compression off here,
    so each judgement over the threshold is recorded as a skip)."""
    svc = make(tmp_path / "l.db", clock, config=CONFIG.replace(enabled=False))
    sid = await session(svc, 2_000)
    over = {"prompt_tokens": THRESHOLD + 100, "completion_tokens": 1}
    await svc.report_usage(sid, over, tool_calls=True)
    for _ in range(2):  # stays the figure through several responses without usage
        await svc.report_usage(sid, {}, tool_calls=True)
    latest = "no usage reported: the session's latest provider prompt count"
    assert _skips(svc, sid)[1:] == [(THRESHOLD + 100, latest)] * 2
    svc.ledger.switch_model(sid, "other-model", WINDOW)
    await svc.report_usage(sid, {}, tool_calls=True)  # the estimate (2,000) decides: nothing
    assert len(_skips(svc, sid)) == 3


async def test_no_usage_after_a_compaction_is_judged_with_the_system_prompt(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Hermes's in-loop estimate right after a compaction leaves the system prompt out,
    but its check before the very next call counts it, so the decision by that call is
    the whole estimate's: ctxledger judges by that (review fix A)."""
    svc = make(tmp_path / "l.db", clock, config=CONFIG.replace(enabled=False))
    sid = await svc.start_session(
        model="local-model", context_length=WINDOW, system_prompt="Rules. " * 3_000
    )
    synth = SessionSynth(3, big_outputs=False)
    for i in range(12):
        await svc.append(sid, synth.turn(i))
    await svc.report_usage(sid, {}, tool_calls=True)
    ((tokens, source),) = _skips(svc, sid)
    assert tokens >= THRESHOLD and "system + messages + tools" in source
    new = (await svc.compress(sid)).session_id
    system = svc.ledger.transcript.session(new).system_tokens
    whole = svc.ledger.transcript.total_tokens(new)
    assert whole >= THRESHOLD > whole - system  # messages + tools alone are under it
    await svc.report_usage(new, {}, tool_calls=True)
    assert _skips(svc, new) == [(whole, source)]


async def test_a_stale_count_does_not_hide_the_growth_of_a_turn(
    tmp_path: Path, clock: ManualClock
) -> None:
    """One real count, then tool responses without usage: once the estimate crosses the
    threshold the in-loop check compacts (Hermes's check before the next call would),
    even when the integrator runs preflight only at the turn's start (review fix A)."""
    svc = make(tmp_path / "l.db", clock)
    sid = await svc.start_session(model="m", context_length=WINDOW, system_prompt="sys")
    sid = (await svc.append(sid, [{"role": "user", "content": "fix the bug"}])).session_id
    sid = (await svc.preflight(sid)).session_id
    reported = {"prompt_tokens": svc.ledger.transcript.total_tokens(sid), "completion_tokens": 5}
    for n in range(12):
        result = await svc.report_usage(sid, reported if n == 0 else {}, tool_calls=True)
        sid = result.session_id
        if result.compressed:
            break
        call = {"id": f"c{n}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        before = svc.ledger.transcript.total_tokens(sid)
        assert before < THRESHOLD  # nothing over the threshold went unjudged
        sid = (
            await svc.append(
                sid,
                [
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"c{n}", "content": "data " * 1_200},
                ],
            )
        ).session_id
    assert result.compressed
    (check,) = events(svc, sid, CompressionChecked)
    assert check.trigger == "in_loop"
    assert "estimate" in check.source and check.tokens >= THRESHOLD


async def test_a_reported_zero_is_no_count(tmp_path: Path, clock: ManualClock) -> None:
    """Some local servers report ``prompt_tokens: 0``; Hermes takes it for no count (it
    estimates, and gives no anti-thrash verdict). ctxledger judges it as a response
    without usage, and it drops the kept count (review fix C)."""
    svc = make(tmp_path / "l.db", clock)
    sid = await session(svc, THRESHOLD + 1_000)
    zero = {"prompt_tokens": 0, "completion_tokens": 7}
    result = await svc.report_usage(sid, {"prompt_tokens": 600, "completion_tokens": 1})
    assert not result.compressed and svc.tracker.state(sid).last_real_prompt == 600
    result = await svc.report_usage(sid, zero, tool_calls=True)
    assert result.compressed
    (check,) = events(svc, sid, CompressionChecked)
    assert "estimate" in check.source
    new = result.session_id
    assert svc.tracker.state(new).first_after_compaction
    await svc.report_usage(new, zero)  # consumes the pending verdict, no strike, no count
    state = svc.tracker.state(new)
    assert (state.first_after_compaction, state.anti.strikes, state.last_real_prompt) == (
        False,
        0,
        None,
    )
    assert svc.tracker.rebuilt(new) == state


async def test_a_model_switch_drops_the_pending_verdict_of_a_compaction(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Hermes's update_model clears the verdict a compaction awaits: the new model's
    first count over the threshold is no strike against it (review fix I)."""
    svc = make(tmp_path / "l.db", clock, config=CONFIG.replace(enabled=False))
    sid = await session(svc, THRESHOLD + 1_000)
    new = (await svc.compress(sid)).session_id
    svc.ledger.switch_model(new, "small-model", WINDOW)
    assert not svc.tracker.state(new).first_after_compaction
    await svc.report_usage(new, {"prompt_tokens": THRESHOLD + 800, "completion_tokens": 1})
    assert svc.status(new)["strikes"] == 0
    assert svc.tracker.rebuilt(new) == svc.tracker.state(new)


async def test_a_final_answer_leaves_the_decision_to_the_next_preflight(
    tmp_path: Path, clock: ManualClock
) -> None:
    svc = make(tmp_path / "l.db", clock)
    sid = await session(svc, THRESHOLD + 1_000)
    over = {"prompt_tokens": THRESHOLD + 500, "completion_tokens": 1}
    result = await svc.report_usage(sid, over, tool_calls=False)
    assert result.session_id == sid and not result.compactions
    assert not events(svc, sid, CompressionChecked) and not events(svc, sid, CompressionSkipped)
    assert (await svc.preflight(sid)).compressed
    (check,) = events(svc, sid, CompressionChecked)
    assert check.trigger == "preflight"


@pytest.mark.parametrize("bad", [1, "yes", 0.0])
async def test_tool_calls_must_be_a_bool(tmp_path: Path, clock: ManualClock, bad: Any) -> None:
    svc = make(tmp_path / "l.db", clock)
    sid = await session(svc)
    before = svc.ledger.version(sid)
    with pytest.raises(InvalidInput, match="tool_calls"):
        await svc.report_usage(sid, {}, tool_calls=bad)
    assert svc.ledger.version(sid) == before


# --- 9. a model switch resets the guards -------------------------------------------------------


async def test_switch_model_unblocks_a_chain_blocked_under_the_old_model(
    tmp_path: Path, clock: ManualClock
) -> None:
    svc = make(tmp_path / "l.db", clock)
    sid = await blocked_session(svc)
    await svc.switch_model(sid, "bigger-model", 131_072)
    state = svc.tracker.state(sid)
    assert (state.anti.strikes, state.anti.fallback_streak) == (0, 0)
    assert not svc.status(sid)["blocked"]
    assert svc.tracker.rebuilt(sid) == state  # a reopened ledger folds the same
    svc.ledger.close()
    reopened = make(tmp_path / "l.db", clock)
    assert not reopened.status(sid)["blocked"]


async def test_switch_model_clears_the_fallback_streak(tmp_path: Path, clock: ManualClock) -> None:
    svc = make(tmp_path / "l.db", clock, summarizer=ServerErrorSummarizer())
    sid = await session(svc, THRESHOLD + 1_000)
    for _ in range(2):
        sid = (await svc.compress(sid)).session_id  # manual: no cooldown in the way
        synth = SessionSynth(9, big_outputs=False, id_prefix=f"{sid}_c")
        for i in range(3):
            await svc.append(sid, synth.turn(i))
    assert svc.tracker.state(sid).anti.fallback_streak == 2
    await svc.switch_model(sid, "other-model", WINDOW * 4)
    tip = svc.tip(sid)
    assert svc.tracker.state(tip).anti.fallback_streak == 0
    assert svc.tracker.state(tip).anti.strikes == 0


async def test_the_same_model_with_another_window_keeps_the_fallback_streak(
    tmp_path: Path, clock: ManualClock
) -> None:
    """hermes-agent 0.19's ``update_model`` scopes the fallback streak and the summarizer
    cooldown to the runtime that failed (session 31): a new window for the same model
    clears the strikes and the kept count, not those."""
    svc = make(tmp_path / "l.db", clock, summarizer=ServerErrorSummarizer())
    sid = await session(svc, THRESHOLD + 1_000)
    for _ in range(2):
        sid = (await svc.compress(sid)).session_id
        synth = SessionSynth(9, big_outputs=False, id_prefix=f"{sid}_c")
        for i in range(3):
            await svc.append(sid, synth.turn(i))
    assert svc.status(sid)["blocked"] and svc.tracker.state(sid).cooldown.active(clock())
    svc.ledger.switch_model(sid, "local-model", WINDOW * 2)  # as switch_model records it
    state = svc.tracker.state(sid)
    assert state.anti.fallback_streak == 2 and state.cooldown.active(clock())
    assert svc.status(sid)["blocked"]
    assert svc.tracker.rebuilt(sid) == state
    svc.ledger.switch_model(sid, "other-model", WINDOW * 2)
    state = svc.tracker.state(sid)
    assert state.anti.fallback_streak == 0 and not state.cooldown.active(clock())
    assert not svc.status(sid)["blocked"]
    assert svc.tracker.rebuilt(sid) == state


async def test_another_model_gets_a_summary_attempt_at_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A dropped connection pauses automatic compression for 30 s; a switch to another
    model lifts the pause (Hermes: failure cooldowns are scoped to the model that failed)."""
    summarizer = DroppingSummarizer()
    svc = make(tmp_path / "l.db", clock, summarizer=summarizer)
    sid = await session(svc, THRESHOLD + 1_000)
    over = {"prompt_tokens": THRESHOLD + 500, "completion_tokens": 5}
    assert not (await svc.report_usage(sid, over)).compressed
    assert svc.tracker.state(sid).cooldown.active(clock())
    summarizer.dropping = False
    assert not (await svc.report_usage(sid, over)).compressed  # still paused
    svc.ledger.switch_model(sid, "other-model", WINDOW)
    assert (await svc.report_usage(sid, over)).compressed


async def test_a_stated_window_clears_the_strikes_and_keeps_the_streak(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Hermes's loop calls ``update_model`` with the window a provider states: the strikes,
    the kept count and a pending verdict judged the old window (session 31)."""
    svc = make(tmp_path / "l.db", clock)
    sid = await blocked_session(svc)
    assert svc.tracker.state(sid).last_real_prompt == THRESHOLD + 500
    assert svc.ledger.learn_context_limit(sid, WINDOW // 2, "maximum context length is 8192")
    state = svc.tracker.state(sid)
    assert (state.anti.strikes, state.last_real_prompt) == (0, None)
    assert not svc.status(sid)["blocked"]
    assert svc.tracker.rebuilt(sid) == state


async def test_two_fallback_summaries_in_a_row_pause_automatic_compression_until_one_works(
    tmp_path: Path, clock: ManualClock
) -> None:
    """hermes-agent 0.19's fallback breaker (s29): a prompt that fits does not lift it."""
    flaky = FlakySummarizer()
    svc = make(tmp_path / "l.db", clock, summarizer=flaky)
    sid = await session(svc, THRESHOLD + 1_000)
    for n in range(2):
        result = await svc.report_usage(
            sid, {"prompt_tokens": THRESHOLD + 500, "completion_tokens": 5}
        )
        assert result.compressed and result.compactions[0].fallback
        sid = result.session_id
        clock.now += 3_600  # the summarizer's cooldown is over
        await svc.report_usage(sid, {"prompt_tokens": THRESHOLD // 2, "completion_tokens": 5})
        synth = SessionSynth(5 + n, big_outputs=False, id_prefix=f"{sid}_g")
        for i in range(4):
            await svc.append(sid, synth.turn(i))
    assert svc.status(sid)["blocked"]
    tried = len(events(svc, sid, CompressionChecked))
    result = await svc.report_usage(sid, {"prompt_tokens": THRESHOLD + 500, "completion_tokens": 5})
    assert not result.compressed and len(events(svc, sid, CompressionChecked)) == tried
    assert "2 fallback summaries in a row" in events(svc, sid, CompressionSkipped)[-1].reason
    flaky.failing = False
    sid = (await svc.compress(sid)).session_id  # manual: allowed, and it works
    assert not svc.status(sid)["blocked"]
    assert svc.tracker.rebuilt(sid) == svc.tracker.state(sid)


async def test_after_the_switch_automatic_compression_is_tried_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    svc = make(tmp_path / "l.db", clock)
    sid = await blocked_session(svc)
    tried = len(events(svc, sid, CompressionChecked))
    await svc.report_usage(sid, {"prompt_tokens": THRESHOLD + 500, "completion_tokens": 5})
    assert len(events(svc, sid, CompressionChecked)) == tried  # blocked: not even tried
    await svc.switch_model(sid, "new-model", WINDOW)  # same window, another model
    await svc.report_usage(sid, {"prompt_tokens": THRESHOLD + 500, "completion_tokens": 5})
    assert len(events(svc, sid, CompressionChecked)) > tried


# --- 11. a stated window is learned, any status, any body shape ---------------------------------


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, "Maximum context size 12288 exceeded"),
        (502, [{"error": {"message": "prompt exceeds max_model_len=12288"}}]),
        (503, {"error": {"message": "maximum model length (12288) exceeded"}}),
        (
            400,
            {
                "error": {
                    "message": "the request exceeds the available context size, try increasing it",
                    "n_ctx": 12_288,
                    "n_prompt_tokens": 13_000,
                }
            },
        ),
    ],
)
async def test_a_stated_window_is_learned_then_compressed(
    tmp_path: Path, clock: ManualClock, status: int, body: Any
) -> None:
    svc = make(tmp_path / "l.db", clock)
    sid = await session(svc, 7_000)
    recovery = await svc.handle_provider_error(sid, status, body, requested_max_tokens=2_000)
    assert recovery.action == "retry" and recovery.kind == "prompt_too_long"
    (learned,) = events(svc, sid, ContextLimitLearned)
    assert (learned.previous_context_length, learned.context_length) == (WINDOW, 12_288)
    assert svc.status(recovery.session_id)["context_length"] == 12_288


# --- 13. material progress in overflow recovery ---------------------------------------------


async def test_an_overflow_retry_that_barely_shrinks_gives_up(
    tmp_path: Path, clock: ManualClock
) -> None:
    svc = make(tmp_path / "l.db", clock, summarizer=AlmostVerbatimSummarizer())
    sid = await svc.start_session(model="m", context_length=WINDOW, system_prompt="agent")
    # the middle is one long message: the summary replaces it one for one (no rows
    # removed). The recent turns fit the tail's soft ceiling but not its budget, and the
    # first of them crosses the budget: the refit keeps it (as Hermes's refit does), so
    # the tail is everything after the log and the middle stays that one message
    turns = [{"role": "user", "content": "q0 " + "w " * 1_000}]
    turns += [{"role": ("assistant", "user")[i % 2], "content": "w " * 150} for i in range(7)]
    await svc.append(
        sid,
        [
            {"role": "user", "content": "start"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "go on"},
            {"role": "assistant", "content": "the log: " + "x y z " * 4_000},
            *turns,
        ],
    )
    with pytest.raises(ContextOverflowError, match="no progress"):
        await svc.handle_provider_error(sid, 400, "Context size has been exceeded.")
    gave_up = events(svc, sid, CompressionSkipped)[-1]
    assert gave_up.reason.startswith("overflow recovery gave up")
