"""ContextService triggers against a real SQLite ledger (HERMES_SPEC §2).

Preflight (system + messages + tools, up to N passes, stop without progress), in-loop
on the provider's real prompt count, gateway hygiene, manual /compress with a focus,
pressure warnings, anti-thrashing, the "compressed N times" notice, model switches,
and the runtime state folded back identically after reopening the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import pytest
from helpers.failing import ERROR, SECRET, SecretSummarizer
from helpers.ledger_helpers import chain_events

from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.clock import SequentialIds
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.fallback import fallback_result
from ctxledger.compressor.summarizers.offline import OfflineSummarizer
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import SummarizerError
from ctxledger.events import (
    CompressionChecked,
    CompressionSkipped,
    CooldownStarted,
    Event,
    ModelSwitched,
    NoticeIssued,
    PressureWarning,
    SessionSwitched,
    SummaryGenerated,
)
from ctxledger.ledger.facade import Ledger
from ctxledger.messages import content_text
from ctxledger.runtime.service import ContextService
from ctxledger.tokens import rough_message_tokens, rough_tools_tokens

pytestmark = pytest.mark.anyio

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


# --- gateway hygiene ------------------------------------------------------------------------


async def test_hygiene_fires_at_85_percent_of_the_window_on_the_estimate(
    svc: ContextService,
) -> None:
    sid = await session(svc, int(WINDOW * 0.9))
    result = await svc.hygiene(sid)
    assert result.compressed
    (check,) = events(svc, sid, CompressionChecked)
    # labelled "estimate" (was "rough"): with the exact estimator it is the exact total
    assert check.trigger == "hygiene" and check.source.startswith("estimate")
    assert check.tokens == svc.ledger.transcript.total_tokens(sid)


BIG_TOOLS = [
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


async def _big_tools_session(
    db: Path, clock: ManualClock, estimator: str
) -> tuple[CompressionConfig, ContextService, str]:
    """A service estimating by `estimator`, and a session declaring BIG_TOOLS."""
    config = CONFIG.replace(estimator=estimator)
    svc = make(db, clock, config)
    return config, svc, await session(svc, tools=BIG_TOOLS)


async def _ping_pong_until(svc: ContextService, sid: str, done: Callable[[], bool]) -> None:
    """Append ping/pong turns of ~100 tokens each until `done()`."""
    words = "check the cache hit rate of the search index after the deploy " * 8
    i = 0
    while not done():
        await svc.append(
            sid,
            [
                {"role": "user", "content": f"ping {i}: {words}"},
                {"role": "assistant", "content": f"pong {i}: {words}"},
            ],
        )
        i += 1


@pytest.mark.parametrize("estimator", ["exact", "rough"])
async def test_hygiene_estimate_counts_the_tools_schema(
    db: Path, clock: ManualClock, estimator: str
) -> None:
    # the messages alone stay below 85 % of the window; with the tools schema they reach it
    config, svc, sid = await _big_tools_session(db, clock, estimator)
    transcript = svc.ledger.transcript
    limit = config.hygiene_threshold_tokens(WINDOW)

    def messages_estimate() -> int:  # system + messages by the configured estimator
        if estimator == "exact":
            view = transcript.session(sid)
            return view.system_tokens + view.live_tokens
        return sum(rough_message_tokens(m) for m in transcript.api_view(sid))

    tools = (
        transcript.session(sid).tools_tokens
        if estimator == "exact"
        else rough_tools_tokens(BIG_TOOLS)
    )
    await _ping_pong_until(svc, sid, lambda: messages_estimate() >= limit - tools // 2)
    assert messages_estimate() < limit <= messages_estimate() + tools
    expected = messages_estimate() + tools
    result = await svc.hygiene(sid)
    assert result.compressed
    (check,) = events(svc, sid, CompressionChecked)
    assert check.tokens == expected
    assert estimator == "rough" or expected == transcript.total_tokens(sid)
    svc.ledger.close()


async def test_hygiene_prefers_the_last_real_prompt_count(svc: ContextService) -> None:
    sid = await session(svc, int(WINDOW * 0.9))
    await svc.report_usage(sid, usage(5_000))  # below the agent threshold: no in-loop compaction
    result = await svc.hygiene(sid)
    assert result.session_id == sid and not result.compactions
    assert not events(svc, sid, CompressionChecked)


async def test_hygiene_needs_four_messages(svc: ContextService) -> None:
    sid = await session(svc)
    huge = "x " * (WINDOW * 2)
    await svc.append(
        sid, [{"role": "user", "content": huge}, {"role": "assistant", "content": huge}]
    )
    result = await svc.hygiene(sid)
    assert not result.compactions and not events(svc, sid, CompressionChecked)


async def test_hygiene_fires_when_it_reaches_the_hard_message_limit(
    db: Path, clock: ManualClock
) -> None:
    svc = make(db, clock, CONFIG.replace(hygiene_hard_message_limit=30))
    sid = await session(svc)
    words = "check the cache hit rate of the search index after the deploy " * 8
    for i in range(20):
        await svc.append(
            sid,
            [
                {"role": "user", "content": f"ping {i}: {words}"},
                {"role": "assistant", "content": f"pong {i}: {words}"},
            ],
        )
    assert svc.ledger.transcript.total_tokens(sid) < THRESHOLD
    result = await svc.hygiene(sid)
    assert result.compressed
    (check,) = events(svc, sid, CompressionChecked)
    assert "hard limit" in check.source
    svc.ledger.close()


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

    def counting_guard(session_id: str, now: float) -> tuple[bool, str]:
        calls.append(session_id)
        return guard(session_id, now)

    svc.tracker.guard = counting_guard  # type: ignore[method-assign]
    blocked = await svc.preflight(sid)
    assert blocked.session_id == sid and calls == [sid]
    assert events(svc, sid, CompressionSkipped)[-1].reason.startswith("summarizer cooldown")
    svc.ledger.close()


@pytest.mark.parametrize(
    ("failure", "setting"),
    [
        ("empty", "cooldown_generic"),
        ("server", "cooldown_generic"),
        ("rate_limit", "cooldown_generic"),
    ],
)
async def test_a_fallback_cooldown_follows_the_failure_class(
    db: Path, clock: ManualClock, failure: str, setting: str
) -> None:
    # no "summarizer configured" flag: a service on a local summarizer (as the demo runs)
    # waits by the failure's class, never the 600 s meant for a missing summarizer
    svc = make(db, clock, summarizer=FlakySummarizer(failure))
    sid = await session(svc, THRESHOLD + 1_000)
    result = await svc.preflight(sid)
    assert result.compressed and result.compactions[0].fallback
    (cooldown,) = events(svc, sid, CooldownStarted)
    assert (cooldown.failure_class, cooldown.seconds) == (failure, getattr(CONFIG, setting))
    svc.ledger.close()


@pytest.mark.parametrize("trigger", ["preflight", "hygiene", "manual"])
async def test_a_failed_summary_s_reason_is_told_once_and_redacted(
    db: Path, clock: ManualClock, trigger: str
) -> None:
    """Review of session 32: after an abort the notice printed the error unredacted
    (the manual feedback redacted it), and after a fallback from preflight, hygiene or
    overflow the reason came twice (the feedback, then "the summarizer failed (…)")."""
    config = CONFIG.replace(hygiene_hard_message_limit=20)
    for failure_class, aborts in (("auth", True), ("server", False)):
        svc = make(db, clock, config, summarizer=SecretSummarizer(failure_class))
        sid = await session(svc, THRESHOLD + 1_000)
        result = await {
            "preflight": svc.preflight,
            "hygiene": svc.hygiene,
            "manual": svc.compress,
        }[trigger](sid)
        assert result.compressed is not aborts, result.notices
        told = "\n".join(result.notices)
        assert SECRET not in told and told.count("[REDACTED]") == 1, told
        assert told.count("HTTP 401") == 1, told
        # nor is it stored (the abort's details, the fallback's failure and note)
        stored = [msgspec.json.encode(r.event) for r in svc.ledger.store.read_all()]
        assert not [e for e in stored if SECRET.encode() in e]
        assert any(b"HTTP 401" in e and b"[REDACTED]" in e for e in stored)
        # the state API's turn JSON is the result as builtins (compactions[].failure too)
        assert SECRET.encode() not in msgspec.json.encode(result)
        if aborts:  # the abort is on the result, for a host to report (its reason redacted)
            assert result.aborted is not None and "HTTP 401" in result.aborted
            assert SECRET not in result.aborted
        else:
            assert result.aborted is None and "fallback" in told.splitlines()[0]
        svc.ledger.close()
        db.unlink()


class OldFallbackWriter:
    """A fallback as written before session 32: its failure holding the raw error, the
    key in it (the summary's text was already redacted)."""

    kind = "secret"

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        return fallback_result(request, failure=ERROR, failure_class="server", summarizer="x")


async def test_a_ledger_holding_a_raw_failure_still_verifies_and_rebuilds(
    db: Path, clock: ManualClock
) -> None:
    """Redacting a fallback's failure where it is first written changes only new events:
    `replay --verify` replans from the stored summary text and a rebuild folds the stored
    events, neither recomputes the failure nor its prompt hash."""
    svc = make(db, clock, summarizer=OldFallbackWriter())
    sid = await session(svc, THRESHOLD + 1_000)
    result = await svc.compress(sid)
    (summary,) = events(svc, result.session_id, SummaryGenerated)
    assert summary.fallback and SECRET in (summary.failure or "")
    report = verify_compactions(svc.ledger, result.session_id)
    assert len(report.compactions) == 1 and not report.drifted, report
    assert rebuild_check(svc.ledger, result.session_id).equal
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


@pytest.mark.parametrize("estimator", ["exact", "rough"])
async def test_preflight_judges_by_the_configured_estimator(
    db: Path, clock: ManualClock, estimator: str
) -> None:
    # HERMES_SPEC §2 / DESIGN: the rough estimate exists for preflight, where Hermes uses it;
    # before session 28 preflight always took the exact total, whatever `estimator` said
    _, svc, sid = await _big_tools_session(db, clock, estimator)
    transcript = svc.ledger.transcript

    def estimate() -> int:
        if estimator == "exact":
            return transcript.total_tokens(sid)
        rough = sum(rough_message_tokens(m) for m in transcript.api_view(sid))
        return rough + rough_tools_tokens(BIG_TOOLS)

    await _ping_pong_until(svc, sid, lambda: estimate() >= THRESHOLD)
    expected = estimate()
    await svc.preflight(sid)  # (whether the plan then saves enough is the planner's matter)
    check = events(svc, sid, CompressionChecked)[0]
    assert check.trigger == "preflight" and check.tokens == expected
    svc.ledger.close()
