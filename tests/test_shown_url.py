"""Credentials in a configured URL never reach an error message, a notice or the log.

Review (session 26): an unreachable upstream answered any proxy client (the proxy needs
no token by default) with the upstream URL, password included; a summarizer whose
base URL held a password wrote it into a skipped compaction's recorded error, which
the append-only log keeps for good.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

from ctxledger import CompressionConfig, ContextService, LLMSummarizer
from ctxledger.server import create_app
from ctxledger.shownurl import UNPARSED, scrubbed, shown_url

TOKEN = "test-token-0123456789abcdef"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://admin:pw@127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
        ("https://api.example.com/v1?api_key=sk-x#frag", "https://api.example.com/v1"),
        ("http://user@[::1]:8080/", "http://[::1]:8080/"),
        ("http://[bad", UNPARSED),
    ],
)
def test_a_url_is_shown_without_its_secrets(url: str, shown: str) -> None:
    assert shown_url(url) == shown
    text = scrubbed(f"talking to {url} failed ({url.split('@')[0]})", url)
    for secret in ("pw", "sk-x", "frag"):
        if secret in url:
            assert secret not in text


@pytest.mark.parametrize(
    "upstream", ["http://admin:hunter2-SECRET@127.0.0.1:9/v1", "http://127.0.0.1:9/v1?key=SECRET"]
)
def test_an_unreachable_upstream_is_named_without_its_credentials(
    tmp_path: Path, upstream: str
) -> None:
    async def main() -> httpx.Response:
        svc = ContextService.open(tmp_path / "l.db", config=CompressionConfig(context_length=8192))
        app = create_app(svc, token=TOKEN, upstream=upstream)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post(
                "/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            )

    response = anyio.run(main)
    assert response.status_code == 502
    assert "SECRET" not in response.text and "admin" not in response.text
    assert "127.0.0.1:9/v1" in response.text


def test_a_summarizer_password_never_reaches_a_notice_or_the_log(tmp_path: Path) -> None:
    summarizer = LLMSummarizer(
        api="openai", base_url="http://admin:SUMMARY-PASSWORD@127.0.0.1:9/v1", model="m",
        api_key="sk-KEY-SECRET",
    )  # fmt: skip
    svc = ContextService.open(
        tmp_path / "l.db", config=CompressionConfig(context_length=8192), summarizer=summarizer
    )

    async def main() -> tuple[httpx.Response, httpx.Response]:
        app = create_app(svc, token=TOKEN)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            await client.post(
                "/v1/sessions", headers=HEADERS, json={"model": "m", "session_id": "s1"}
            )
            messages = []
            for i in range(12):
                messages += [
                    {"role": "user", "content": f"question {i} " + "lorem ipsum " * 40},
                    {"role": "assistant", "content": f"answer {i} " + "dolor sit " * 40},
                ]
            await client.post(
                "/v1/sessions/s1/messages", headers=HEADERS, json={"messages": messages}
            )
            compressed = await client.post("/v1/sessions/s1/compress", headers=HEADERS, json={})
            events = await client.get("/v1/events?follow=false", headers=HEADERS)
            return compressed, events

    compressed, events = anyio.run(main)
    assert compressed.status_code == 200 and "network error" in compressed.text
    for text in (compressed.text, events.text):
        assert "SUMMARY-PASSWORD" not in text and "KEY-SECRET" not in text
    assert "CompressionSkipped" in events.text or "compression_skipped" in events.text


def test_scrubbing_keeps_the_text_readable_and_masks_decoded_secrets() -> None:
    # review: a one-letter user name masked every "a" of the message; a percent-encoded
    # password passed through in its decoded form
    url = "http://a:p%40ss@proxy.local:8080/v1"
    text = scrubbed(f"upstream {url} failed: All connection attempts failed (p@ss)", url)
    assert (
        text == "upstream http://proxy.local:8080/v1 failed: All connection attempts failed (***)"
    )


@pytest.mark.parametrize(
    ("base", "path", "anthropic", "url"),
    [
        ("https://h/openai/v1?api-version=1", "/chat/completions", False,
         "https://h/openai/v1/chat/completions?api-version=1"),
        ("https://h/a%2Fb/v1", "/chat/completions", False, "https://h/a%2Fb/v1/chat/completions"),
        ("https://api.anthropic.com", "/messages", True, "https://api.anthropic.com/v1/messages"),
        ("http://h/v1/", "/messages", True, "http://h/v1/messages"),
        ("http://gw/anthropic/v1/", "/messages/count_tokens", True,
         "http://gw/anthropic/v1/messages/count_tokens"),
    ],
)  # fmt: skip
def test_an_api_path_goes_after_the_base_path_and_before_its_query(
    base: str, path: str, anthropic: bool, url: str
) -> None:
    from ctxledger.shownurl import with_path

    assert with_path(base, path, anthropic) == url


@pytest.mark.parametrize(
    ("base", "anthropic", "query", "url"),
    [
        ("https://api.openai.com/v1", False, "", "https://api.openai.com/v1/models"),
        ("http://gw/openai/v1?key=k", False, "limit=5", "http://gw/openai/v1/models?key=k&limit=5"),
        ("https://api.anthropic.com", True, "limit=5", "https://api.anthropic.com/v1/models?limit=5"),
    ],
)  # fmt: skip
def test_a_client_query_goes_after_the_base_query(
    base: str, anthropic: bool, query: str, url: str
) -> None:
    from ctxledger.shownurl import with_path

    assert with_path(base, "/models", anthropic, query) == url
