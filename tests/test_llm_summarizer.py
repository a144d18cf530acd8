"""The HTTP summarizer against the local fake provider: shapes, usage, failure classes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.fake_provider import Fail, FakeProvider, Reply, closed_port

from ctxledger.compressor.config import CompressionConfig
from ctxledger.compressor.summarizers import (
    SECTION_HEADINGS,
    LLMSummarizer,
    SummaryRequest,
    summarize_with_fallback,
)
from ctxledger.compressor.summarizers.llm import max_output_tokens
from ctxledger.errors import InvalidConfig, SummarizerError
from ctxledger.usage import CanonicalUsage

pytestmark = pytest.mark.anyio

SECRET = "sk-proj-" + "K" * 40
TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": f"Deploy the app; the key is {SECRET}"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "make deploy"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "deployed to https://staging.example.com"},
]


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as running:
        yield running


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def request(**kwargs: Any) -> SummaryRequest:
    values: dict[str, Any] = {
        "turns": TURNS,
        "budget_tokens": 2_000,
        "session_model": "session-model",
    }
    values.update(kwargs)
    return SummaryRequest(**values)


def openai(provider: FakeProvider, **kwargs: Any) -> LLMSummarizer:
    values: dict[str, Any] = {
        "api": "openai",
        "base_url": provider.openai_base_url,
        "model": "summary-model",
        "api_key": "test-key",
        "env": {},
    }
    values.update(kwargs)
    return LLMSummarizer(**values)


async def test_openai_shape_succeeds_with_usage_and_bearer_auth(provider: FakeProvider) -> None:
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 200},
    }
    provider.queue(Reply("## Goal\nDeploy the app.", usage=usage))
    result = await openai(provider).summarize(request())
    assert result.text == "## Goal\nDeploy the app."
    assert result.summarizer == "llm" and result.model == "summary-model" and not result.fallback
    assert result.usage == CanonicalUsage(input=1000, cache_read=200, output=300)
    sent = provider.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer test-key"
    assert sent.json["model"] == "summary-model"
    # no wire cap and no forced sampling: the target length is in the prompt (issue 10)
    assert "max_tokens" not in sent.json and "temperature" not in sent.json
    assert [m["role"] for m in sent.json["messages"]] == ["system", "user"]
    # the hash is of the exact body sent (canonical, sorted-key JSON)
    assert result.prompt_hash == hashlib.sha256(sent.body).hexdigest()


async def test_anthropic_shape_succeeds_with_usage_and_version_header(
    provider: FakeProvider,
) -> None:
    usage = {
        "input_tokens": 900,
        "output_tokens": 250,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 50,
    }
    provider.queue(Reply("## Goal\nShip.", usage=usage))
    summarizer = LLMSummarizer(
        api="anthropic",
        base_url=provider.anthropic_base_url,
        model="claude-x",
        api_key="ak",
        env={},
    )
    result = await summarizer.summarize(request())
    assert result.text == "## Goal\nShip."
    assert result.usage == CanonicalUsage(input=900, cache_read=100, cache_write=50, output=250)
    sent = provider.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "ak" and sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.json["system"] and [m["role"] for m in sent.json["messages"]] == ["user"]
    # the messages API requires max_tokens: a ceiling above the target, not the target
    assert sent.json["max_tokens"] == max_output_tokens(2_000) > 2_000


async def test_anthropic_base_url_ending_in_v1_is_not_doubled(provider: FakeProvider) -> None:
    summarizer = LLMSummarizer(
        api="anthropic", base_url=provider.base_url + "/v1/", model="m", env={}
    )
    await summarizer.summarize(request())
    assert provider.requests[0].path == "/v1/messages"


async def test_prompt_has_preamble_template_turns_and_no_secrets(provider: FakeProvider) -> None:
    await openai(provider).summarize(
        request(focus="deployment", previous_summary="## Goal\nEarlier goal")
    )
    system, user = (m["content"] for m in provider.requests[0].json["messages"])
    assert "different assistant" in system and "[REDACTED]" in system
    for heading in SECTION_HEADINGS:
        assert heading in user
    assert "[TOOL CALL c1] terminal" in user and "[TOOL RESULT c1 · terminal]" in user
    assert "<previous-summary>\n## Goal\nEarlier goal\n</previous-summary>" in user
    assert "concentrate on: deployment" in user
    assert "about 2000 tokens" in user
    assert SECRET not in provider.requests[0].body.decode()


async def test_model_output_is_redacted_and_unwrapped(provider: FakeProvider) -> None:
    from ctxledger.compressor.markers import wrap_summary

    provider.queue(Reply(wrap_summary(f"## Goal\nuse {SECRET}")))
    result = await openai(provider).summarize(request())
    assert result.text == "## Goal\nuse [REDACTED]"


@pytest.mark.parametrize(
    ("kind", "failure_class"),
    [
        ("401", "auth"),
        ("403", "auth"),
        ("429", "rate_limit"),
        ("500", "server"),
        ("503", "server"),
        ("413", "other"),
        ("prompt_too_long", "other"),
        ("empty", "empty"),
        ("blank", "empty"),
        ("malformed", "malformed"),
        ("missing_fields", "malformed"),
        ("close", "network"),  # cut off mid-reply: abandoned like a network failure (s29)
        ("hang", "timeout"),
    ],
)
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_failures_are_classified(
    provider: FakeProvider, api: str, kind: str, failure_class: str
) -> None:
    provider.queue(Fail(kind))
    base = provider.openai_base_url if api == "openai" else provider.anthropic_base_url
    summarizer = LLMSummarizer(api=api, base_url=base, model="m", timeout=0.3, env={})
    with pytest.raises(SummarizerError) as caught:
        await summarizer.summarize(request(session_model=None))
    assert caught.value.failure_class == failure_class
    assert len(provider.requests) == 1


async def test_connection_refused_is_a_network_failure() -> None:
    summarizer = LLMSummarizer(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m", env={})
    with pytest.raises(SummarizerError) as caught:
        await summarizer.summarize(request())
    assert caught.value.failure_class == "network" and caught.value.aborts


@pytest.mark.parametrize("kind", ["404", "400"])
async def test_summary_model_falls_back_to_the_session_model_once(
    provider: FakeProvider, kind: str
) -> None:
    provider.on_model("summary-model", Fail(kind))
    result = await openai(provider).summarize(request())
    assert result.model == "session-model"
    assert [r.json["model"] for r in provider.requests] == ["summary-model", "session-model"]


async def test_session_model_fallback_happens_only_once(provider: FakeProvider) -> None:
    provider.on_model("summary-model", Fail("404"))
    provider.on_model("session-model", Fail("404"))
    with pytest.raises(SummarizerError) as caught:
        await openai(provider).summarize(request())
    assert caught.value.status == 404
    assert len(provider.requests) == 2


async def test_no_model_fallback_for_server_errors_or_without_a_separate_model(
    provider: FakeProvider,
) -> None:
    provider.on_model("summary-model", Fail("500"))
    with pytest.raises(SummarizerError):
        await openai(provider).summarize(request())
    provider.on_model("session-model", Fail("404"))
    with pytest.raises(SummarizerError):
        await openai(provider, model=None).summarize(request())
    assert [r.json["model"] for r in provider.requests] == ["summary-model", "session-model"]


async def test_not_configured_without_endpoint_or_model(provider: FakeProvider) -> None:
    with pytest.raises(SummarizerError) as caught:
        await LLMSummarizer(model="m", env={}).summarize(request())
    assert caught.value.failure_class == "not_configured"
    with pytest.raises(SummarizerError) as caught:
        await openai(provider, model=None).summarize(request(session_model=None))
    assert caught.value.failure_class == "not_configured"
    assert provider.requests == []


async def test_configuration_from_the_environment(provider: FakeProvider) -> None:
    env = {
        "CTXLEDGER_SUMMARY_API": "anthropic",
        "CTXLEDGER_SUMMARY_BASE_URL": provider.anthropic_base_url,
        "CTXLEDGER_SUMMARY_MODEL": "env-model",
        "CTXLEDGER_SUMMARY_API_KEY": "env-key",
    }
    summarizer = LLMSummarizer(env=env)
    await summarizer.summarize(request())
    sent = provider.requests[0]
    assert (
        sent.path == "/v1/messages"
        and sent.json["model"] == "env-model"
        and sent.headers["x-api-key"] == "env-key"
    )
    assert LLMSummarizer.from_env(summary_model="config-model", env=env).model == "config-model"


def test_unknown_api_is_a_configuration_error() -> None:
    with pytest.raises(InvalidConfig):
        LLMSummarizer(api="gemini", env={})


# --------------------------------------------------------------------------- fallback


@pytest.mark.parametrize(("kind", "failure_class"), [("401", "auth"), ("403", "auth")])
async def test_auth_failures_abort_the_compaction(
    provider: FakeProvider, kind: str, failure_class: str
) -> None:
    provider.queue(Fail(kind))
    with pytest.raises(SummarizerError) as caught:
        await summarize_with_fallback(openai(provider), request())
    assert caught.value.failure_class == failure_class


async def test_network_failures_abort_the_compaction() -> None:
    refused = LLMSummarizer(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m", env={})
    with pytest.raises(SummarizerError) as caught:
        await summarize_with_fallback(refused, request())
    assert caught.value.failure_class == "network"
    # "not configured" no longer aborts (issue 10): see tests/test_parity_summarizer.py


@pytest.mark.parametrize(
    ("kind", "failure_class"),
    [
        ("500", "server"),
        ("429", "rate_limit"),
        ("hang", "timeout"),
        ("empty", "empty"),
        ("malformed", "malformed"),
    ],
)
async def test_other_failures_fall_back_to_the_deterministic_summary(
    provider: FakeProvider, kind: str, failure_class: str
) -> None:
    provider.queue(Fail(kind))
    result = await summarize_with_fallback(openai(provider, timeout=0.3, model=None), request())
    assert result.fallback and result.failure_class == failure_class and result.failure
    assert result.text.startswith("[fallback summary]")
    assert all(heading in result.text for heading in SECTION_HEADINGS)
    assert 'User asked: "Deploy the app; the key is [REDACTED]"' in result.text
    assert SECRET not in result.text
    assert result.usage is None and result.summarizer == "llm"


async def test_success_passes_through_summarize_with_fallback(provider: FakeProvider) -> None:
    result = await summarize_with_fallback(openai(provider), request())
    assert not result.fallback and result.failure is None and result.failure_class is None


@pytest.mark.parametrize(
    ("failure_class", "seconds"),
    # an empty summary waits the generic 60 s, as in hermes-agent 0.19 (30 s before s29)
    [
        ("not_configured", 600.0),
        ("malformed", 30.0),
        ("network", 30.0),
        ("timeout", 60.0),
        ("server", 60.0),
        ("empty", 60.0),
        (None, 60.0),
    ],
)
def test_cooldown_seconds_per_failure_class(failure_class: str | None, seconds: float) -> None:
    assert CompressionConfig().cooldown_for(failure_class) == seconds


async def test_an_injected_transport_replaces_the_network() -> None:
    import httpx

    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json={"choices": [{"message": {"content": "## Goal\nmocked"}}]})

    summarizer = LLMSummarizer(
        base_url="http://summarizer.invalid/v1",
        model="m",
        transport=httpx.MockTransport(handler),
        env={},
    )
    result = await summarizer.summarize(request())
    assert result.text == "## Goal\nmocked" and result.usage is None
    assert str(seen[0].url) == "http://summarizer.invalid/v1/chat/completions"
