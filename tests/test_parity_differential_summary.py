"""Differential parity with the real hermes-agent 0.19.0 (session 29): what the summarizer
is sent, and what a summarizer failure does.

As in ``test_parity_differential.py``, the same inputs go through Hermes's own functions
(``tests/hermes_oracle.py``) and through ctxledger:

* the per-message cuts of the summarizer input (``_serialize_for_summary``): a content
  is cut only past 6,000 characters (4,000 + 1,500 kept), arguments only past 1,500
  (1,200 kept); the labels and cut marks are ctxledger's own wording;
* when automatic compression is blocked: strikes, and two fallback summaries in a row
  (``ContextCompressor`` driven as its conversation loop drives it);
* what one failure of the summary call does: the compaction abandoned or given the
  fallback summary, and the cooldown that follows (``compress()`` with its model call
  raising, against the local fake provider's same failure).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.fake_provider import Fail, FakeProvider
from helpers.hermes_differential import Hermes, mismatches, oracle

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.serialize import serialize_turns
from ctxledger.compressor.summarizers import (
    FallbackSummarizer,
    LLMSummarizer,
    SummaryRequest,
    summarize_with_fallback,
)
from ctxledger.errors import SummarizerError
from ctxledger.runtime.pressure import AntiThrash


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as running:
        yield running


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- the summarizer input's cut lengths ------------------------------------------------------

CONTENT_LENGTHS = [1_000, 5_500, 5_501, 5_999, 6_000, 6_001, 9_000]
ARGS_LENGTHS = [500, 1_200, 1_201, 1_499, 1_500, 1_501, 5_000]


def _text(n: int) -> str:
    return ("The quick brown fox jumps over the lazy dog. " * (n // 45 + 1))[:n]


def _arguments(n: int) -> str:
    arguments = json.dumps({"content": "y" * n})
    return json.dumps({"content": "y" * (n - (len(arguments) - n))})


def _kept(text: str, original: str) -> str:
    """What survives of `original` in a serialization: all of it, or head and tail only."""
    if original in text:
        return "whole"
    if original[:4_000] in text and original[-1_500:] in text:
        return "head 4,000 + tail 1,500"
    return "other"


def _kept_args(text: str, arguments: str) -> str:
    if arguments in text:
        return "whole"
    return "first 1,200" if arguments[:1_200] in text else "other"


def test_contents_are_cut_only_past_6000_chars_as_hermes_does(hermes: Hermes) -> None:
    inputs = [
        [{"role": role, "content": _text(n), **({"tool_call_id": "c1"} if role == "tool" else {})}]
        for n in CONTENT_LENGTHS
        for role in ("user", "assistant", "tool")
    ]
    answers = hermes.ask("serialize", inputs)
    pairs = [
        (
            (turns[0]["role"], len(turns[0]["content"])),
            _kept(theirs, turns[0]["content"]),
            _kept(serialize_turns(turns), turns[0]["content"]),
        )
        for turns, theirs in zip(inputs, answers, strict=True)
    ]
    assert not mismatches(pairs), "\n".join(mismatches(pairs))
    assert {kept for _, kept, _ in pairs} == {"whole", "head 4,000 + tail 1,500"}


def test_arguments_are_cut_only_past_1500_chars_as_hermes_does(hermes: Hermes) -> None:
    inputs: list[list[dict[str, Any]]] = []
    for n in ARGS_LENGTHS:
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "w", "arguments": _arguments(n)},
        }
        inputs.append([{"role": "assistant", "content": "Writing.", "tool_calls": [call]}])
    answers = hermes.ask("serialize", inputs)
    pairs = []
    for turns, theirs in zip(inputs, answers, strict=True):
        arguments = turns[0]["tool_calls"][0]["function"]["arguments"]
        ours = serialize_turns(turns)
        pairs.append((len(arguments), _kept_args(theirs, arguments), _kept_args(ours, arguments)))
    assert not mismatches(pairs), "\n".join(mismatches(pairs))
    assert [len(a) for a in (_arguments(n) for n in ARGS_LENGTHS)] == ARGS_LENGTHS


# --- the anti-thrash guard and the fallback breaker -------------------------------------------

GUARD_SEQUENCES: list[list[list[Any]]] = [
    [["compress"], ["usage", 1.2], ["compress"], ["usage", 1.2], ["usage", 0.5]],
    [["noop"], ["noop"], ["usage", 0.5], ["noop"]],
    [["fallback"], ["usage", 0.5], ["fallback"], ["usage", 0.5], ["usage", 1.3], ["compress"]],
    [["fallback"], ["compress"], ["fallback"], ["usage", 0.4]],
    [["fallback"], ["usage", 1.2], ["fallback"], ["compress"], ["usage", 0.5]],
    [["compress"], ["usage", 1.1], ["usage", 1.1], ["noop"], ["usage", 0.9]],
    # a response without usage gives no verdict and consumes a compaction's pending one
    [["compress"], ["nousage"], ["usage", 1.2], ["compress"], ["usage", 1.2], ["nousage"]],
    [["compress"], ["usage", 1.2], ["nousage"], ["compress"], ["usage", 1.3], ["nousage"]],
]


def _our_guard(steps: list[list[Any]]) -> list[bool]:
    """ctxledger's state after each step, fed as the runtime fold feeds it (a compaction
    saving 60 %; a real count as a share of the threshold)."""
    state, first, blocked = AntiThrash(), False, []
    for step in steps:
        if step[0] == "usage":
            state = state.after_real_prompt(int(step[1] * 100_000), 100_000, first)
            first = False
        elif step[0] == "nousage":
            first = False  # the runtime fold: no verdict, the pending one consumed
        elif step[0] == "noop":
            state = state.after_compaction(0, 0, noop=True, min_saving=0.10)
        else:
            fallback = step[0] == "fallback"
            state = state.after_compaction(100_000, 40_000, fallback=fallback, min_saving=0.10)
            first = True
        blocked.append(state.blocked(2))
    return blocked


def test_the_guard_blocks_and_unblocks_automatic_compression_as_hermes_does(
    hermes: Hermes,
) -> None:
    """Strikes (no-op passes, a first real count still over the threshold) and the
    fallback breaker (two fallback summaries in a row, lifted only by a summary that
    works). ctxledger's extra strike, a pass saving < 10 %, is not exercised here."""
    answers = hermes.ask("guards", GUARD_SEQUENCES)
    pairs = [
        (steps, theirs, _our_guard(steps))
        for steps, theirs in zip(GUARD_SEQUENCES, answers, strict=True)
    ]
    assert not mismatches(pairs), "\n".join(mismatches(pairs))


# --- what a summarizer failure does: abandon or fall back, and the cooldown ------------------

#: Hermes's kind of failure -> how the local fake provider produces the same failure
FAILURES = {
    "timeout": "hang",
    "refused": None,  # nothing listens
    "closed": "close",
    "malformed": "malformed",
    "not_configured": None,
    "empty": "empty",
    "429": "429",
    "500": "500",
    "503": "503",
    "401": "401",
    "404": "404",
}


async def _ours(provider: FakeProvider, kind: str) -> dict[str, Any]:
    """ctxledger's verdict on one failure: abandoned (raises an aborting failure) or a
    fallback summary, and the cooldown of its class."""
    summarizer: FallbackSummarizer | LLMSummarizer
    if kind == "not_configured":
        summarizer = FallbackSummarizer(None)
    else:
        fail = FAILURES[kind]
        base = provider.openai_base_url if fail else "http://127.0.0.1:9/v1"
        summarizer = LLMSummarizer(api="openai", base_url=base, model=None, timeout=0.3, env={})
        if fail:
            provider.queue(Fail(fail))
    request = SummaryRequest(
        turns=[{"role": "user", "content": "fix the tests"}], budget_tokens=2_000, session_model="m"
    )
    try:
        result = await summarize_with_fallback(summarizer, request)
    except SummarizerError as exc:
        return {"aborted": True, "cooldown": CompressionConfig().cooldown_for(exc.failure_class)}
    assert result.fallback
    return {"aborted": False, "cooldown": CompressionConfig().cooldown_for(result.failure_class)}


@pytest.mark.anyio
async def test_a_summarizer_failure_is_abandoned_or_falls_back_as_hermes_does(
    hermes: Hermes, provider: FakeProvider
) -> None:
    """Auth and network failures (a stream closed mid-reply too) abandon the compaction;
    the others insert the fallback summary; 30 s after malformed output or a dropped
    connection, 600 s with no summarizer, 60 s otherwise (an empty summary too).

    Documented difference (README): a timeout falls back here; Hermes 0.19 abandons the
    compaction (its connection check matches "timed out") and lengthens the cooldown
    for timeouts in a row, which two fallbacks in a row already stop here."""
    kinds = list(FAILURES)
    answers = hermes.ask("summary_failure", kinds)
    pairs = []
    for kind, theirs in zip(kinds, answers, strict=True):
        expected = {"aborted": False, "cooldown": 60} if kind == "timeout" else theirs
        pairs.append((kind, expected, await _ours(provider, kind)))
    assert not mismatches(pairs), "\n".join(mismatches(pairs))
    assert answers[kinds.index("timeout")] == {"aborted": True, "cooldown": 60}
