"""Replay summaries: recorded texts come back, nothing else is ever invented."""

from __future__ import annotations

from typing import Any

import pytest

from ctxledger.compressor.summarizers import (
    RecordedSummarizer,
    SummaryRequest,
    SummaryResult,
    request_hash,
    request_key,
)
from ctxledger.errors import SummarizerError

pytestmark = pytest.mark.anyio

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi"},
]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def request(**kwargs: Any) -> SummaryRequest:
    values: dict[str, Any] = {"turns": TURNS, "budget_tokens": 2_000}
    values.update(kwargs)
    return SummaryRequest(**values)


async def test_a_single_text_answers_every_request() -> None:
    summarizer = RecordedSummarizer("## Goal\nsay hello")
    for req in (request(), request(focus="x")):
        result = await summarizer.summarize(req)
        assert result.text == "## Goal\nsay hello"
        assert result.summarizer == "recorded" and not result.fallback
        assert result.prompt_hash == request_key(req)


async def test_lookup_by_compaction_id_then_summary_key_then_request_key() -> None:
    summarizer = RecordedSummarizer(
        {"cmp_1": "by id", "k2": "by key", request_key(request()): "by request"}
    )
    assert (await summarizer.summarize(request(context={"compaction_id": "cmp_1"}))).text == "by id"
    assert (await summarizer.summarize(request(context={"summary_key": "k2"}))).text == "by key"
    assert (
        await summarizer.summarize(request(context={"compaction_id": "unknown"}))
    ).text == "by request"


async def test_recorded_results_come_back_unchanged() -> None:
    recorded = SummaryResult(
        text="t",
        summarizer="llm",
        model="gpt-x",
        prompt_hash="ab" * 32,
        fallback=True,
        failure="timed out",
        failure_class="timeout",
    )
    assert (
        await RecordedSummarizer({"cmp_9": recorded}).summarize(
            request(context={"compaction_id": "cmp_9"})
        )
        == recorded
    )


async def test_unrecorded_requests_fail_with_class_other() -> None:
    summarizer = RecordedSummarizer({"cmp_1": "x"})
    with pytest.raises(SummarizerError) as caught:
        await summarizer.summarize(request(budget_tokens=3_000))
    assert caught.value.failure_class == "other" and not caught.value.aborts


def test_request_key_depends_on_inputs_not_on_context_or_session_model() -> None:
    assert request_key(request()) == request_key(
        request(context={"compaction_id": "a"}, session_model="m")
    )
    assert request_key(request()) != request_key(request(focus="tests"))
    assert request_key(request()) != request_key(request(previous_summary="## Goal\nx"))


def test_request_key_is_the_shared_request_hash_of_what_a_local_summarizer_reads() -> None:
    # like the offline and fallback prompt hashes: the originals when the turns were pruned
    pruned = [{"role": "tool", "tool_call_id": "c1", "content": "[output pruned]"}]
    with_originals = request(
        turns=pruned, originals=[{"role": "tool", "tool_call_id": "c1", "content": "full"}]
    )
    assert request_key(with_originals) == request_hash(with_originals)
    assert request_key(with_originals) != request_key(request(turns=pruned))
    assert request_key(request()) == request_hash(request())
