"""ContextService: gateway hygiene (HERMES_SPEC §2: 85 % of the window on the estimate,
the tools schema counted, the last real prompt count first, four messages at least, the
hard message limit), preflight by the configured estimator, and a failing summarizer
(the fallback's cooldown by failure class; its reason told once and redacted, never
stored nor shown with the key; a ledger that stored a raw failure still verifies).
Split from ``test_service_triggers.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from helpers.failing import ERROR, SECRET, SecretSummarizer
from helpers.service_rig import (
    CONFIG,
    THRESHOLD,
    WINDOW,
    FlakySummarizer,
    ManualClock,
    events,
    make,
    session,
    usage,
)

from ctxledger.analysis.replay import rebuild_check, verify_compactions
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers.base import SummaryRequest, SummaryResult
from ctxledger.compressor.summarizers.fallback import fallback_result
from ctxledger.events import (
    CompressionChecked,
    CooldownStarted,
    SummaryGenerated,
)
from ctxledger.runtime.service import ContextService
from ctxledger.tokens import rough_message_tokens, rough_tools_tokens

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
        # the reason on one line wherever it is told (its body was cut off or split)
        (reason,) = [line for line in told.splitlines() if "HTTP 401" in line]
        assert "invalid x-api-key" in reason and '"key": "[REDACTED]"}' in reason, told
        if aborts:  # the abort is on the result, for a host to report (its reason redacted)
            assert result.aborted is not None and "HTTP 401" in result.aborted
            assert SECRET not in result.aborted and "\n" not in result.aborted
            assert result.aborted in reason, (result.aborted, reason)
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
