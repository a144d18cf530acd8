"""Differential parity with hermes-agent 0.19.0's prompt caching (session 31): where the
"system_and_3" breakpoints go (HERMES_SPEC §7).

Hypothesis draws message lists as an agent loop holds them (a system prompt or none;
user turns, replies, pure tool-call turns with no content, tool results, list
contents, lists ending in a non-object, empty contents, a system message past the first) and both TTLs, on the native Anthropic route and on an
OpenAI-compatible one (OpenRouter), and runs them through Hermes's
``apply_anthropic_cache_control`` (``tests/hermes_oracle.py`` op ``cache``) and
ctxledger's ``apply_cache_markers``: the outputs must be equal, marker for marker.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers.hermes_differential import Hermes, drawn, mismatches, oracle
from hypothesis import strategies as st

from ctxledger.runtime.caching import (
    apply_cache_markers,
    native_cache_layout,
    supports_prompt_caching,
)


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


CONTENTS = st.one_of(
    st.just("some text"),
    st.just(""),
    st.none(),
    st.just([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
    st.just([]),
    # a list whose last part is not an object: nowhere for a routed marker to go
    st.just([{"type": "text", "text": "a"}, "b"]),
)


@st.composite
def _message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "assistant", "tool"]))
    message: dict[str, Any] = {"role": role, "content": draw(CONTENTS)}
    if role == "assistant" and draw(st.booleans()):
        call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
        message["tool_calls"] = [call]
    if role == "tool":
        message["tool_call_id"] = "c1"
    if role == "user" and message["content"] is None:
        message["content"] = "ask"
    return message


@st.composite
def _item(draw: st.DrawFn) -> dict[str, Any]:
    messages = draw(st.lists(_message(), min_size=0, max_size=9))
    if draw(st.booleans()):
        messages.insert(0, {"role": "system", "content": "You are a coding agent."})
    if messages and draw(st.booleans()):  # a system message later on (never a carrier)
        at = draw(st.integers(min_value=1, max_value=len(messages)))
        messages.insert(at, {"role": "system", "content": "Note: the user is away."})
    ttl = draw(st.sampled_from(["5m", "1h"]))
    return {"messages": messages, "ttl": ttl, "native": draw(st.booleans())}


def test_breakpoints_go_where_hermes_puts_them(hermes: Hermes) -> None:
    items = drawn(_item(), 200)
    answers = hermes.ask("cache", items)
    pairs = [
        (
            item,
            theirs,
            apply_cache_markers(item["messages"], ttl=item["ttl"], native_anthropic=item["native"]),
        )
        for item, theirs in zip(items, answers, strict=True)
    ]
    found = mismatches(pairs)
    assert not found, f"{len(found)} of {len(pairs)} differ:\n" + "\n".join(found[:4])


#: routes (provider, model) as a user names them; Hermes resolves each to its runtime
ROUTES = [
    ("anthropic", "claude-sonnet-4-5"),
    ("anthropic", "claude-3-5-haiku-20241022"),
    ("openrouter", "anthropic/claude-sonnet-4.5"),
    ("openrouter", "anthropic/claude-3.7-sonnet"),
    ("bedrock", "anthropic.claude-3-5-sonnet-20240620-v1:0"),
    ("bedrock", "us.anthropic.claude-sonnet-4-20250514-v1:0"),
    ("bedrock", "eu.anthropic.claude-3-haiku-20240307-v1:0"),
    ("aws-bedrock", "anthropic.claude-3-5-sonnet-20240620-v1:0"),
    ("bedrock", "global.anthropic.claude-sonnet-4-5-20250929-v1:0"),
    ("aws", "apac.anthropic.claude-3-5-sonnet-20240620-v1:0"),
    ("amazon", "jp.anthropic.claude-sonnet-4-5-20250929-v1:0"),
]


#: Claude 2 / Instant ids Hermes caches (it has no rule for them) and ctxledger does not
#: (they predate prompt caching): a kept difference, pinned literally
KEPT = [
    ("anthropic", "claude-2.1"),
    ("anthropic", "claude-instant-1.2"),
    ("bedrock", "anthropic.claude-v2:1"),
    ("bedrock", "anthropic.claude-v2"),
    ("bedrock", "us.anthropic.claude-v2"),
    ("aws", "anthropic.claude-instant-v1"),
]


def test_each_route_gets_hermes_s_marker_layout(hermes: Hermes) -> None:
    """Where Hermes caches a Claude model, ctxledger caches it too and with Hermes's
    layout: native on the Anthropic API and on Bedrock (Hermes runs Claude there on the
    Anthropic Messages wire), the envelope on OpenRouter (review of session 31). Claude
    2 / Instant ids, in either spelling (``claude-2.1``, Bedrock's ``claude-v2``), are
    the kept exception: Hermes caches them, ctxledger never (review of session 32)."""
    routes = ROUTES + KEPT
    answers = hermes.ask(
        "cache_policy", [{"provider": provider, "model": model} for provider, model in routes]
    )
    found = [
        f"{provider} {model}: hermes {theirs}, ctxledger {ours}"
        for (provider, model), theirs in zip(ROUTES, answers[: len(ROUTES)], strict=True)
        if theirs
        != (
            ours := [
                supports_prompt_caching(model, provider),
                native_cache_layout(provider),
            ]
        )
    ]
    assert all(answer[0] for answer in answers)  # every route here is one Hermes caches
    assert not found, "\n".join(found)
    assert answers[len(ROUTES) :] == [[True, True]] * len(KEPT)
    assert not any(supports_prompt_caching(model, provider) for provider, model in KEPT)


def test_without_a_provider_the_envelope_layout_stays() -> None:
    """No provider given: the route is unknown (Hermes always resolves one before its
    cache policy), so every Claude id keeps the envelope layout the proxy sent before
    the Bedrock change; a top-level marker on a tool message would be refused by an
    OpenAI-wire route (final review of session 31, F2). A named route still decides."""
    for model in ("claude-sonnet-4-5", "us.anthropic.claude-sonnet-4-20250514-v1:0"):
        assert supports_prompt_caching(model)
        assert not native_cache_layout(None)
        assert native_cache_layout("bedrock")
    assert native_cache_layout("anthropic")


#: inference-profile prefixes: Hermes's list, none, and ones it does not know
_PREFIXES = ["", "us.", "eu.", "global.", "apac.", "ap.", "au.", "jp.", "ca.", "sa.", "me."]
_PREFIXES += ["af.", "xyz.", "us-gov.", "arn:aws:bedrock:us-east-1:1:inference-profile/us."]
_BEDROCK_MODELS = [
    "anthropic.claude-3-5-sonnet-20240620-v1:0",
    "anthropic.claude-sonnet-4-5-20250929-v1:0",
    "anthropic.claude-3-haiku-20240307-v1:0",
    "claude-sonnet-4-5",  # a bare Anthropic id: Bedrock does not know it as Claude
    "claude-3-5-sonnet-20240620",
    "anthropic/claude-sonnet-4.5",
    "amazon.nova-pro-v1:0",
    "meta.llama3-70b-instruct-v1:0",
]


#: bare Anthropic ids on a Bedrock route, always asked (Hermes: Converse, uncached)
BARE = [
    ("bedrock", "claude-sonnet-4-5"),
    ("aws", "claude-3-5-sonnet-20240620"),
    ("amazon-bedrock", "claude-opus-4-1-20250805"),
    ("aws-bedrock", "Claude-3-7-Sonnet-20250219"),
]


@st.composite
def _bedrock_route(draw: st.DrawFn) -> dict[str, str]:
    # no prefix half the time: a bare ``claude-*`` id is the case the rule turns on
    prefix = draw(st.one_of(st.just(""), st.sampled_from(_PREFIXES)))
    model = prefix + draw(st.sampled_from(_BEDROCK_MODELS))
    if draw(st.booleans()):
        model = model.upper() if draw(st.booleans()) else model.capitalize()
    provider = draw(st.sampled_from(["bedrock", "aws-bedrock", "amazon-bedrock", "aws"]))
    return {"provider": provider, "model": model}


def test_bedrock_caches_the_ids_hermes_runs_on_the_anthropic_wire(hermes: Hermes) -> None:
    """On Bedrock Hermes caches (native layout) exactly the ids its runtime sends over the
    Anthropic Messages wire: ``anthropic.claude*`` after at most one inference-profile
    prefix of its list; a bare ``claude-*`` id, another prefix or another family goes
    to the Converse API, uncached. ctxledger cached a bare ``claude-*`` id there and
    missed ``global.`` profiles (session 32). Claude 2 / Instant ids are left out here:
    ctxledger never caches them (they predate prompt caching), Hermes does."""
    routes = [{"provider": provider, "model": model} for provider, model in BARE]
    routes += drawn(_bedrock_route(), 120, derandomize=True)
    answers = hermes.ask("cache_policy", routes)
    pairs = []
    for route, theirs in zip(routes, answers, strict=True):
        model, provider = route["model"], route["provider"]
        cached = supports_prompt_caching(model, provider)
        ours = [cached, cached and native_cache_layout(provider)]
        pairs.append((route, theirs, ours))
    assert not mismatches(pairs), "\n".join(mismatches(pairs)[:3])
    assert 0 < sum(answer[0] for _, answer, _ in pairs) < len(pairs)
