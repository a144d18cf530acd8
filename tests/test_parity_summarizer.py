"""Hermes field parity (issue 10): the summary request and its failures.

3. No summarizer configured: the deterministic fallback summary, then 600 s of cooldown
   (only auth and network failures abort).
4. Tolerant reply shapes: ``message.content`` as ``{"text": ...}`` or a list of parts,
   ``message`` as a bare string.
5. A separate summary model that answers empty, undecodable (HTML, truncated JSON, JSON
   wrapped in another object) or closes mid-body is retried on the session's model.
6. No forced ``temperature``, no wire ``max_tokens`` (the target is in the prompt);
   Kimi models never receive ``temperature`` (live summarizer and trajectory mode,
   async and sync).
7. ``<think>``/``<thinking>``/``<reasoning>`` never reach a summary: stripped from the
   turns sent and from the reply.

Everything runs against the real local HTTP fake provider (tests/helpers/fake_provider.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.asgi import request_body, respond
from helpers.fake_provider import Fail, FakeProvider, Raw, Reply

from ctxledger.clock import SequentialIds
from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.serialize import serialize_turns, strip_reasoning
from ctxledger.compressor.summarizers import (
    LLMSummarizer,
    SummaryRequest,
    summarize_with_fallback,
)
from ctxledger.compressor.summarizers.llm import rejects_temperature
from ctxledger.demo.synth import SessionSynth
from ctxledger.errors import SummarizerError
from ctxledger.events import CooldownStarted, SummaryGenerated
from ctxledger.ledger.facade import Ledger
from ctxledger.runtime.service import ContextService
from ctxledger.trajectories import TrajectoryConfig, compress_file, compress_file_sync

pytestmark = pytest.mark.anyio

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Please fix the flaky retry test in tests/test_net.py"},
    {
        "role": "assistant",
        "content": "<think>the user seems upset; maybe blame the CI</think>Running it first.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "pytest -x"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "1 failed: test_retry_backoff"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "<thinking>secret plan B</thinking>"},
            {"type": "text", "text": "The backoff is off by one.<reasoning>hmm</reasoning>"},
        ],
    },
]
GOOD = "## Goal\nFix the flaky retry test."


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as running:
        yield running


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request(**kwargs: Any) -> SummaryRequest:
    values: dict[str, Any] = {"turns": TURNS, "budget_tokens": 1_500, "session_model": "session-m"}
    values.update(kwargs)
    return SummaryRequest(**values)


def summarizer(provider: FakeProvider, **kwargs: Any) -> LLMSummarizer:
    values: dict[str, Any] = {
        "api": "openai",
        "base_url": provider.openai_base_url,
        "model": "summary-m",
        "env": {},
    }
    values.update(kwargs)
    return LLMSummarizer(**values)


def openai_body(message: Any) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": message}]}).encode()


# --- 3. not configured -> fallback + 600 s ------------------------------------------------


async def test_not_configured_falls_back_instead_of_aborting() -> None:
    result = await summarize_with_fallback(LLMSummarizer(env={}), request())
    assert result.fallback and result.failure_class == "not_configured"
    assert result.text.startswith("[fallback summary]")
    assert "fix the flaky retry test" in result.text.lower()


def test_only_auth_and_network_abort() -> None:
    aborting = {
        cls
        for cls in ("auth", "network", "not_configured", "timeout", "server", "malformed")
        if SummarizerError("x", failure_class=cls).aborts  # type: ignore[arg-type]
    }
    assert aborting == {"auth", "network"}


async def test_service_without_summarizer_compacts_with_fallback_and_cools_down_600s(
    tmp_path: Path,
) -> None:
    clock = iter(float(t) for t in range(1_767_225_600, 1_767_225_600 + 100_000))
    config = CompressionConfig(threshold_floor_tokens=0)
    ledger = Ledger.open(
        tmp_path / "l.db", clock=lambda: next(clock), ids=SequentialIds(), config=config
    )
    svc = ContextService(ledger, config=config, summarizer=LLMSummarizer(env={}))
    sid = await svc.start_session(model="m", context_length=16_384, system_prompt="agent")
    synth = SessionSynth(4, big_outputs=False)
    for i in range(14):
        await svc.append(sid, synth.turn(i))
    result = await svc.preflight(sid)
    assert result.compressed and result.session_id != sid
    (summary,) = [e for e in ledger.store.read_stream(sid) if isinstance(e.event, SummaryGenerated)]
    assert summary.event.fallback and summary.event.failure_class == "not_configured"
    cooldowns = [
        r.event
        for r in ledger.store.read_stream(result.session_id)
        if isinstance(r.event, CooldownStarted)
    ]
    assert [(c.failure_class, c.seconds) for c in cooldowns] == [("not_configured", 600.0)]
    ledger.close()


# --- 4. tolerant reply shapes ---------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": {"text": GOOD}},
        {"role": "assistant", "content": {"type": "text", "text": GOOD}},
        {"role": "assistant", "content": [{"type": "text", "text": GOOD}]},
        {"role": "assistant", "content": ["## Goal\n", "Fix the flaky retry test."]},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "text": "hidden"}, {"type": "text", "text": GOOD}],
        },
        GOOD,
    ],
    ids=["object", "typed-object", "parts", "string-parts", "thinking-part", "bare-string"],
)
async def test_odd_reply_shapes_are_coerced_to_text(provider: FakeProvider, message: Any) -> None:
    provider.queue(Raw(200, openai_body(message)))
    result = await summarizer(provider, model=None).summarize(request())
    assert result.text == GOOD and not result.fallback
    assert len(provider.requests) == 1


async def test_a_legacy_text_choice_is_read(provider: FakeProvider) -> None:
    provider.queue(Raw(200, json.dumps({"choices": [{"text": GOOD}]}).encode()))
    assert (await summarizer(provider, model=None).summarize(request())).text == GOOD


# --- 5. retry on the session's model ---------------------------------------------------------


UNDECODABLE = [
    Fail("empty"),
    Fail("blank"),
    Raw(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", {"content-type": "text/html"}),
    Raw(200, b'{"choices": [{"message": {"content": "## Goal'),
    Raw(200, json.dumps({"data": json.loads(openai_body({"content": GOOD}))}).encode()),
    Raw(200, openai_body({"role": "assistant", "content": "<think>only thoughts</think>"})),
    Fail("close"),
]


@pytest.mark.parametrize(
    "failure",
    UNDECODABLE,
    ids=["empty", "blank", "html", "truncated", "wrapped", "reasoning-only", "closed"],
)
async def test_separate_summary_model_failures_retry_on_the_session_model(
    provider: FakeProvider, failure: Any
) -> None:
    provider.on_model("summary-m", failure)
    provider.queue(Reply(GOOD))
    result = await summarizer(provider).summarize(request())
    assert result.text == GOOD and result.model == "session-m"
    assert [r.json["model"] for r in provider.requests] == ["summary-m", "session-m"]


async def test_when_the_retry_fails_too_both_failures_are_told(provider: FakeProvider) -> None:
    provider.on_model("summary-m", Fail("empty"))
    provider.on_model("session-m", Fail("empty"))
    with pytest.raises(SummarizerError) as caught:
        await summarizer(provider).summarize(request())
    message = str(caught.value)
    assert "'summary-m'" in message and "retried with the session's model" in message
    assert "'session-m'" in message and caught.value.failure_class == "empty"
    assert [r.json["model"] for r in provider.requests] == ["summary-m", "session-m"]


async def test_without_a_separate_model_there_is_nothing_to_retry(provider: FakeProvider) -> None:
    provider.queue(Fail("empty"))
    with pytest.raises(SummarizerError) as caught:
        await summarizer(provider, model=None).summarize(request())
    assert caught.value.failure_class == "empty" and len(provider.requests) == 1


# --- 6. no forced sampling; Kimi never gets a temperature ------------------------------------


async def test_the_summary_request_forces_neither_temperature_nor_max_tokens(
    provider: FakeProvider,
) -> None:
    await summarizer(provider).summarize(request(budget_tokens=1_234))
    sent = provider.requests[0].json
    assert "temperature" not in sent and "max_tokens" not in sent
    assert "about 1234 tokens" in sent["messages"][1]["content"]


async def test_a_configured_temperature_is_sent_to_models_that_accept_it(
    provider: FakeProvider,
) -> None:
    await summarizer(provider, temperature=0.3).summarize(request())
    assert provider.requests[0].json["temperature"] == 0.3


@pytest.mark.parametrize(
    ("model", "base_url", "rejects"),
    [
        ("kimi-for-coding", "https://api.kimi.com/coding/v1", True),
        ("kimi-for-coding", "https://openrouter.ai/api/v1", True),
        ("kimi-k2-0905-preview", "https://api.moonshot.ai/v1", True),
        ("moonshotai/kimi-k2-turbo", "https://api.moonshot.cn/v1", True),
        ("Kimi-K2-Thinking", None, True),
        ("kimi-k2-0905-preview", "https://openrouter.ai/api/v1", False),
        ("gpt-4.1-mini", "https://api.moonshot.ai/v1", False),
        ("kimi-latest", "https://api.moonshot.ai/v1", False),
    ],
)
def test_which_models_reject_temperature(model: str, base_url: str | None, rejects: bool) -> None:
    assert rejects_temperature(model, base_url) is rejects


class MoonshotApp:
    """A fake Moonshot endpoint as an ASGI app (reached through httpx's ASGI transport)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = json.loads(await request_body(receive))
        self.bodies.append(body)
        status, payload = 200, openai_body({"role": "assistant", "content": GOOD})
        if "temperature" in body:  # what Moonshot does for these models
            status = 400
            payload = b'{"error": {"message": "invalid temperature: only 1 is allowed"}}'
        await respond(send, status, "application/json", payload)


@pytest.mark.parametrize("model", ["kimi-for-coding", "kimi-k2-0905-preview"])
async def test_kimi_on_a_moonshot_endpoint_never_receives_temperature(model: str) -> None:
    app = MoonshotApp()
    kimi = LLMSummarizer(
        api="openai",
        base_url="https://api.moonshot.ai/v1",
        model=model,
        temperature=0.7,
        transport=httpx.ASGITransport(app=app),
        env={},
    )
    result = await kimi.summarize(request(session_model="kimi-k2-turbo-preview"))
    assert result.text == GOOD and not result.fallback
    assert app.bodies and all("temperature" not in b for b in app.bodies)


def _trajectory_file(path: Path) -> None:
    turns = [{"from": "system", "value": "agent"}, {"from": "human", "value": "start"}]
    for i in range(30):
        turns.append({"from": "gpt", "value": f"step {i} " + "detail " * 150})
        turns.append({"from": "human", "value": f"ok {i}"})
    path.write_text(json.dumps({"conversations": turns}) + "\n")


async def test_trajectory_mode_never_sends_temperature_to_kimi(
    provider: FakeProvider, tmp_path: Path
) -> None:
    _trajectory_file(tmp_path / "in.jsonl")
    config = TrajectoryConfig(target_max_tokens=4_000, summary_target_tokens=500, retries=0)
    kimi = summarizer(provider, model="kimi-for-coding", temperature=0.5)
    report = await compress_file(tmp_path / "in.jsonl", tmp_path / "out.jsonl", config, kimi)
    assert report.compressed == 1
    assert provider.requests and all("temperature" not in r.json for r in provider.requests)
    assert all("max_tokens" not in r.json for r in provider.requests)


def test_trajectory_mode_sync_never_sends_temperature_to_kimi(tmp_path: Path) -> None:
    _trajectory_file(tmp_path / "in.jsonl")
    config = TrajectoryConfig(target_max_tokens=4_000, summary_target_tokens=500, retries=0)
    with FakeProvider() as provider:
        kimi = summarizer(
            provider,
            model="kimi-k2-0905-preview",
            base_url=provider.openai_base_url,
            temperature=0.5,
        )
        # a local URL is not a Moonshot host: kimi-k2 accepts temperature there ...
        compress_file_sync(tmp_path / "in.jsonl", tmp_path / "a.jsonl", config, kimi)
        assert provider.requests[-1].json.get("temperature") == 0.5
        # ... kimi-for-coding never does, whatever the endpoint
        coding = summarizer(provider, model="kimi-for-coding", temperature=0.5)
        compress_file_sync(tmp_path / "in.jsonl", tmp_path / "b.jsonl", config, coding)
        assert "temperature" not in provider.requests[-1].json


# --- 7. reasoning never reaches a summary ------------------------------------------------------


def test_reasoning_blocks_are_stripped_from_the_serialized_turns() -> None:
    text = serialize_turns(TURNS)
    for leaked in ("blame the CI", "secret plan B", "hmm", "<think", "<reasoning"):
        assert leaked not in text
    assert "Running it first." in text and "The backoff is off by one." in text


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("<think>x</think>Summary", "Summary"),
        ("<THINKING attr='1'>x\ny</THINKING>\nSummary", "Summary"),
        ("Sum<reasoning>x</reasoning>mary", "Summary"),
        ("plain text with <thinker> in it", "plain text with <thinker> in it"),
    ],
)
def test_strip_reasoning(raw: str, clean: str) -> None:
    assert strip_reasoning(raw) == clean


def test_dangling_tags_in_a_reply() -> None:
    assert strip_reasoning("planning...</think>## Goal\nX", dangling=True) == "## Goal\nX"
    assert strip_reasoning("## Goal\nX\n<think>ran out", dangling=True) == "## Goal\nX"


async def test_reasoning_in_the_reply_is_stripped_before_it_is_stored(
    provider: FakeProvider,
) -> None:
    provider.queue(
        Reply("<think>I should not say this</think>\n" + GOOD + "<reasoning>z</reasoning>")
    )
    result = await summarizer(provider).summarize(request())
    assert result.text == GOOD
    sent = provider.requests[0].json["messages"][1]["content"]
    assert "blame the CI" not in sent and "secret plan B" not in sent
