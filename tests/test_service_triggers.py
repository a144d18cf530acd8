"""ContextService triggers against a real SQLite ledger (HERMES_SPEC §2).

Preflight (system + messages + tools, up to N passes, stop without progress), in-loop
on the provider's real prompt count, manual /compress with a focus, cooldowns,
pressure warnings, anti-thrashing, the "compressed N times" notice, model switches,
and the runtime state folded back identically after reopening the ledger.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.service_rig import (
    CONFIG,
    THRESHOLD,
    WINDOW,
    FlakySummarizer,
    ManualClock,
    VerbatimSummarizer,
    events,
    grow,
    make,
    session,
    two_party,
    usage,
)

from ctxledger.demo.synth import SessionSynth
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    CooldownStarted,
    ModelSwitched,
    NoticeIssued,
    PressureWarning,
    SessionSwitched,
    SummaryGenerated,
)
from ctxledger.runtime.service import ContextService

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # tests that are cheap on both backends parametrize it


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def svc(db: Path, clock: ManualClock) -> Iterator[ContextService]:
    service = make(db, clock)
    yield service
    service.ledger.close()


# --- preflight ---------------------------------------------------------------------------


async def test_preflight_compresses_over_threshold_and_records_the_numbers(
    svc: ContextService,
) -> None:
    sid = await session(svc, THRESHOLD + 2_000)
    before = svc.ledger.transcript.total_tokens(sid)
    result = await svc.preflight(sid)
    assert result.compressed and result.session_id != sid
    assert svc.tip(sid) == result.session_id
    assert svc.ledger.transcript.total_tokens(result.session_id) < THRESHOLD
    (check,) = events(svc, sid, CompressionChecked)
    assert (check.trigger, check.tokens, check.threshold_tokens) == ("preflight", before, THRESHOLD)
    assert "tools schema" in check.source
    (switch,) = events(svc, sid, SessionSwitched)
    assert switch.trigger == "preflight" and switch.tokens_before == before


async def test_preflight_counts_the_tools_schema(svc: ContextService) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "word " * 300,
                "parameters": {"type": "object"},
            },
        }
        for i in range(12)
    ]
    sid = await session(svc, tools=tools)
    await grow(svc, sid, 0)
    synth = SessionSynth(5, big_outputs=False, id_prefix="t_call")
    i = 0
    while (
        svc.ledger.transcript.session(sid).live_tokens
        < THRESHOLD - svc.ledger.transcript.session(sid).tools_tokens
    ):
        await svc.append(sid, synth.turn(i))
        i += 1
    view = svc.ledger.transcript.session(sid)
    assert view.live_tokens < THRESHOLD <= view.live_tokens + view.tools_tokens + view.system_tokens
    result = await svc.preflight(sid)
    assert result.compressed


async def test_preflight_below_threshold_does_nothing_and_records_nothing(
    svc: ContextService,
) -> None:
    sid = await session(svc, 2_000)
    last = svc.ledger.store.last_seq()
    result = await svc.preflight(sid)
    assert result.session_id == sid and not result.compactions
    assert svc.ledger.store.last_seq() == last


async def test_preflight_makes_at_most_three_passes(svc: ContextService) -> None:
    # eight big messages always stay in the tail, so every pass leaves the session over
    # the threshold: the loop ends at max_compression_attempts
    sid = await two_party(svc, pairs=10)
    result = await svc.preflight(sid)
    checks = events(svc, sid, CompressionChecked)
    assert len(checks) == CONFIG.max_compression_attempts == 3
    assert [c.trigger for c in checks] == ["preflight"] * 3
    assert [c.action for c in result.compactions] == ["compressed"] * 3
    assert svc.ledger.transcript.total_tokens(result.session_id) >= THRESHOLD


async def test_preflight_stops_at_the_first_pass_without_progress(
    db: Path, clock: ManualClock
) -> None:
    # a summarizer that does not summarize, and a middle of one message (a long log; the
    # recent turns fit the tail's soft ceiling and the first of them crosses its budget,
    # so the refit keeps them all): the pass neither removes rows nor saves 5 %, and
    # preflight stops there
    config = CONFIG.replace(max_compression_attempts=6, anti_thrash_strikes=10)
    svc = make(db, clock, config, summarizer=VerbatimSummarizer())
    sid = await session(svc)
    turns = [{"role": "user", "content": "q0 " + "w " * 1_000}]
    turns += [{"role": ("assistant", "user")[i % 2], "content": "w " * 150} for i in range(7)]
    opening = [
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "go on"},
        {"role": "assistant", "content": "the log: " + "x y z " * 4_000},
    ]
    await svc.append(sid, [*opening, *turns])
    result = await svc.preflight(sid)
    passes = len(events(svc, sid, CompressionChecked))
    assert passes < config.max_compression_attempts
    last = result.compactions[-1]
    assert (
        last.messages_after == last.messages_before
        and last.tokens_after >= 0.95 * last.tokens_before
    )
    skip = events(svc, sid, CompressionSkipped)[-1]
    assert skip.reason == f"preflight stopped: pass {passes} made no progress"
    assert skip.details["rows_before"] == skip.details["rows_after"]
    svc.ledger.close()


async def test_preflight_passes_are_capped_by_max_compression_attempts(
    db: Path, clock: ManualClock
) -> None:
    svc = make(db, clock, CONFIG.replace(max_compression_attempts=1))
    sid = await two_party(svc, pairs=10)
    result = await svc.preflight(sid)
    assert len(events(svc, sid, CompressionChecked)) == 1
    assert result.compressed and svc.ledger.transcript.total_tokens(result.session_id) >= THRESHOLD
    svc.ledger.close()


async def test_preflight_stops_when_the_planner_finds_nothing_to_do(svc: ContextService) -> None:
    sid = await session(svc)
    huge = "lorem ipsum dolor sit amet " * 1_800
    await svc.append(
        sid,
        [
            {"role": "user", "content": huge},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": huge},
        ],
    )
    result = await svc.preflight(sid)
    assert result.session_id == sid and [c.skip_reason for c in result.compactions] == [
        "too_few_messages"
    ]
    assert len(events(svc, sid, CompressionChecked)) == 1


# --- in the loop ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "prompt"),
    [
        (
            {
                "input_tokens": 100,
                "cache_read_input_tokens": 8_000,
                "cache_creation_input_tokens": 200,
                "output_tokens": 10,
            },
            8_300,
        ),
        (
            {
                "prompt_tokens": 8_500,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 8_000},
            },
            8_500,
        ),
        (
            {
                "input_tokens": 9_000,
                "output_tokens": 5,
                "input_tokens_details": {"cached_tokens": 7_000},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
            9_000,
        ),
    ],
    ids=["anthropic", "openai_chat", "responses"],
)
async def test_in_loop_compresses_on_the_real_prompt_count(
    svc: ContextService, raw: dict[str, Any], prompt: int
) -> None:
    sid = await session(svc, 3_000)  # the estimate is far below: only the real count decides
    result = await svc.report_usage(sid, raw)
    assert result.compressed
    (check,) = events(svc, sid, CompressionChecked)
    assert (check.trigger, check.tokens, check.threshold_tokens) == ("in_loop", prompt, THRESHOLD)


async def test_in_loop_ignores_output_and_reasoning_tokens(svc: ContextService) -> None:
    sid = await session(svc, 3_000)
    raw = {
        "prompt_tokens": 2_000,
        "completion_tokens": 40_000,
        "completion_tokens_details": {"reasoning_tokens": 39_000},
    }
    result = await svc.report_usage(sid, raw)
    assert result.session_id == sid and not result.compactions
    assert not events(svc, sid, CompressionChecked)


# --- manual, cooldown, anti-thrash --------------------------------------------------------------


async def test_manual_compress_with_focus_bypasses_the_cooldown_and_clears_it(
    db: Path, clock: ManualClock
) -> None:
    svc = make(db, clock, summarizer=FlakySummarizer("auth"))
    sid = await session(svc, THRESHOLD + 1_000)
    aborted = await svc.preflight(sid)
    assert aborted.session_id == sid and not aborted.compactions
    (cooldown,) = events(svc, sid, CooldownStarted)
    assert (
        cooldown.failure_class == "auth" and cooldown.until == clock.now + CONFIG.cooldown_generic
    )
    blocked = await svc.preflight(sid)
    assert blocked.session_id == sid
    assert events(svc, sid, CompressionSkipped)[-1].reason.startswith("summarizer cooldown")
    manual = await svc.compress(sid, focus="  storage retries  ")
    assert manual.compressed and manual.notices[0].startswith("Compressed:")
    (summary,) = events(svc, sid, SummaryGenerated)
    assert summary.focus == "storage retries"
    assert svc.status(manual.session_id)["cooldown_remaining"] == 0
    svc.ledger.close()


async def test_cooldown_expires_with_the_clock(db: Path, clock: ManualClock) -> None:
    svc = make(db, clock, summarizer=FlakySummarizer("network"))
    sid = await session(svc, THRESHOLD + 1_000)
    await svc.preflight(sid)  # a network failure aborts the compaction: a short cooldown
    assert svc.status(sid)["cooldown_remaining"] == CONFIG.cooldown_malformed
    clock.now += CONFIG.cooldown_malformed + 1
    result = await svc.preflight(sid)
    assert result.compressed
    svc.ledger.close()


async def test_the_guards_run_once_per_automatic_trigger_in_the_service(
    db: Path, clock: ManualClock
) -> None:
    svc = make(db, clock, summarizer=FlakySummarizer("auth"))
    sid = await session(svc, THRESHOLD + 1_000)
    await svc.preflight(sid)  # aborted: a cooldown
    tokens = svc.ledger.transcript.total_tokens(sid)
    # the engine makes the size decision only; the cooldown is the service's to apply
    assert svc.engine.should_compress(sid, tokens) == (
        True,
        f"{tokens:,} tokens ≥ threshold {THRESHOLD:,}",
    )
    calls: list[str] = []
    guard = svc.tracker.guard

    def counting_guard(session_id: str, now: float, agent: str | None = None) -> tuple[bool, str]:
        calls.append(session_id)
        return guard(session_id, now, agent)

    svc.tracker.guard = counting_guard  # type: ignore[method-assign]
    blocked = await svc.preflight(sid)
    assert blocked.session_id == sid and calls == [sid]
    assert events(svc, sid, CompressionSkipped)[-1].reason.startswith("summarizer cooldown")
    svc.ledger.close()


async def test_noop_passes_block_automatic_compression_until_a_real_count_is_below(
    svc: ContextService,
) -> None:
    sid = await session(svc)
    huge = "lorem ipsum dolor sit amet " * 1_800  # three messages: too few to compact
    await svc.append(
        sid,
        [
            {"role": "user", "content": huge},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": huge},
        ],
    )
    for _ in range(2):
        result = await svc.report_usage(sid, usage(THRESHOLD + 500))
        assert result.compactions[0].skip_reason == "too_few_messages"
    assert svc.status(sid)["blocked"]
    result = await svc.report_usage(sid, usage(THRESHOLD + 500))
    assert not result.compactions and "paused" in result.notices[0]
    skip = events(svc, sid, CompressionSkipped)[-1]
    assert skip.trigger == "in_loop" and skip.details["tokens"] == THRESHOLD + 500
    assert len(events(svc, sid, CompressionChecked)) == 2  # the blocked turn never tried
    manual = await svc.compress(sid)  # always allowed; reports that nothing changed
    assert manual.compactions[0].action == "skipped" and manual.notices[0].startswith("No changes")
    await svc.report_usage(sid, usage(1_000))
    assert not svc.status(sid)["blocked"] and svc.status(sid)["strikes"] == 0


async def test_first_real_count_after_a_compaction_still_over_is_a_strike(
    db: Path, clock: ManualClock
) -> None:
    svc = make(
        db, clock, CONFIG.replace(enabled=False)
    )  # only manual compaction: strikes are the fold's
    sid = await session(svc, THRESHOLD + 1_000)
    new = (await svc.compress(sid)).session_id
    await svc.report_usage(new, usage(THRESHOLD + 100))
    assert svc.status(new)["strikes"] == 1
    await svc.report_usage(new, usage(THRESHOLD + 100))
    assert svc.status(new)["strikes"] == 1  # judged once per compaction
    await svc.report_usage(new, usage(THRESHOLD - 100))
    assert svc.status(new)["strikes"] == 0
    assert events(svc, sid, CompressionSkipped)[0].reason == "compression is disabled"
    svc.ledger.close()


async def test_compressed_many_times_notice_from_the_second_compaction(svc: ContextService) -> None:
    sid = await session(svc, THRESHOLD)
    first = await svc.compress(sid)
    assert not any("accuracy may degrade" in n for n in first.notices)
    await grow(svc, first.session_id, THRESHOLD, seed=11)
    second = await svc.compress(first.session_id)
    assert any("compressed 2 times" in n and "accuracy may degrade" in n for n in second.notices)
    (notice,) = events(svc, sid, NoticeIssued)
    assert notice.code == "compressed_many_times" and notice.session_id == second.session_id


# --- pressure warnings ------------------------------------------------------------------------


async def test_pressure_warning_once_cleared_after_compaction_and_rearmed(
    svc: ContextService,
) -> None:
    sid = await session(svc, THRESHOLD)
    level = int(THRESHOLD * CONFIG.pressure_level)
    first = await svc.report_usage(sid, usage(level + 10))
    assert len(first.notices) == 1 and f"{level + 10:,}/{THRESHOLD:,}" in first.notices[0]
    again = await svc.report_usage(sid, usage(level + 200))
    assert again.notices == []
    new = (await svc.compress(sid)).session_id
    warnings = events(svc, sid, PressureWarning)
    assert [w.cleared for w in warnings] == [False, True]
    assert warnings[0].tokens == level + 10 and warnings[0].threshold_tokens == THRESHOLD
    rearmed = await svc.report_usage(new, usage(level + 50))
    assert len(rearmed.notices) == 1


async def test_no_warning_below_the_level(svc: ContextService) -> None:
    sid = await session(svc, 1_000)
    result = await svc.report_usage(sid, usage(int(THRESHOLD * CONFIG.pressure_level) - 1))
    assert result.notices == [] and not events(svc, sid, PressureWarning)


# --- model switch ---------------------------------------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_switch_model_recomputes_the_threshold_and_rechecks(svc: ContextService) -> None:
    sid = await session(svc, 6_000)
    assert not (await svc.preflight(sid)).compactions
    result = await svc.switch_model(sid, "small-model", 8_192)
    assert result.compressed
    (switched,) = events(svc, sid, ModelSwitched)
    assert (switched.previous_context_length, switched.context_length) == (WINDOW, 8_192)
    check = events(svc, sid, CompressionChecked)[0]
    assert check.threshold_tokens == 4_096 and check.trigger == "preflight"
    assert svc.status(result.session_id)["threshold_tokens"] == 4_096


# --- the runtime state survives a reopen ------------------------------------------------------------


async def test_runtime_state_folds_identically_after_reopening(
    db: Path, clock: ManualClock
) -> None:
    svc = make(db, clock, summarizer=FlakySummarizer("auth"))
    sid = await session(svc, THRESHOLD + 1_000)
    await svc.preflight(sid)  # aborted: a cooldown
    new = (await svc.compress(sid)).session_id  # manual: clears it
    # judged against the 16,384 window of its time: below the threshold (no strike), but
    # over the pressure level (a warning); after the window shrinks below, the same count
    # would be a strike, so a fold that used today's window would disagree
    await svc.report_usage(new, usage(7_000))
    svc.ledger.switch_model(new, "small-model", 4_096)
    tip = svc.tip(sid)
    live_state = svc.tracker.state(tip)
    live_status = svc.status(tip)
    assert (live_state.anti.strikes, live_state.warned, live_state.context_length) == (
        0,
        True,
        4_096,
    )
    decisions = [svc.engine.should_compress(tip, tokens) for tokens in (1_000, 3_500, 9_000)]
    assert svc.tracker.rebuilt(tip) == live_state
    svc.ledger.close()
    reopened = make(db, clock, namespace="r")
    assert reopened.tracker.state(tip) == live_state
    assert reopened.status(tip) == live_status
    assert [
        reopened.engine.should_compress(tip, tokens) for tokens in (1_000, 3_500, 9_000)
    ] == decisions
    reopened.ledger.close()
