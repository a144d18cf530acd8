"""Hostile JSON on every HTTP endpoint: never a server error, a refusal appends nothing
and its message is plain one-line text.

Session 43's fuzz round, kept as properties (bounded examples). A valid body of each
face (chat completions, responses, Anthropic messages, the state API's writes) has one
to three places set to a hostile value, or is replaced by one: integers of 400 to 5,000
digits, NaN and Infinity, ``1e400``, lone surrogates (``\\ud800``), strings of 300,000
characters (of bidi overrides too), nesting thousands of levels deep, and every JSON
type in every field. The read routes get such text in their path and query. A 5xx, or
a refusal that appended anything, or an error message holding a control character or
longer than a screen, fails the property.
"""

from __future__ import annotations

import copy
import json
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import anyio
from helpers.server_rig import rig
from helpers.strategies import mutate_once
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.integers import NOT_PRINTED_IN_LINE

TOKEN = "fuzzed-hostile-json-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
USER = {"role": "user", "content": "hello"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
CHAT_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
TURN = [
    USER,
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "out"},
]

#: (the rig's face, path, a valid body)
BODIES: list[tuple[str, str, Any]] = [
    (
        "openai",
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": [{"role": "system", "content": "s"}, *TURN, USER],
            "max_tokens": 64,
            "tools": CHAT_TOOLS,
            "stream": False,
            "temperature": 0.5,
        },
    ),
    (
        "openai",
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": [USER],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ),
    (
        "openai",
        "/v1/responses",
        {
            "model": "m",
            "instructions": "be brief",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "done"},
            ],
            "max_output_tokens": 64,
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        },
    ),
    (
        "anthropic",
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 64,
            "system": [{"type": "text", "text": "s"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                },
            ],
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        },
    ),
    (
        "openai",
        "/v1/sessions",
        {
            "model": "m",
            "context_length": 8192,
            "system_prompt": "s",
            "tools": CHAT_TOOLS,
            "title": "t",
            "reason": "new",
        },
    ),
    ("openai", "/v1/sessions/s/messages", {"messages": TURN, "expected_version": None}),
    (
        "openai",
        "/v1/sessions/s/usage",
        {
            "usage": {"prompt_tokens": 10, "completion_tokens": 2},
            "model": "m",
            "cost_usd": 0.1,
            "tool_calls": False,
        },
    ),
    ("openai", "/v1/sessions/s/system-prompt", {"system_prompt": "new", "role": "system"}),
    ("openai", "/v1/sessions/s/compress", {"focus": "tests", "dry_run": True}),
    (
        "openai",
        "/v1/sessions/s/provider-error",
        {
            "status": 400,
            "body": {"error": {"message": "context length exceeded", "code": "x"}},
            "requested_max_tokens": 100,
        },
    ),
    ("openai", "/v1/sessions/s/end", {"reason": "done"}),
    ("openai", "/v1/sessions/s/preflight", {}),
    ("openai", "/v1/sessions/s/hygiene", {}),
]

#: placeholders json.dumps writes as strings, swapped for text it cannot write
_RAW = {
    "@@DIGITS@@": "9" * 5000,
    "@@NEGDIGITS@@": "-" + "7" * 400,
    "@@EXP@@": "1e400",
    "@@TINY@@": "-1e-400",
    "@@SURROGATE@@": '"a\\ud800b"',
    "@@LOWSURROGATE@@": '"\\udfff"',
    "@@DEEPLIST@@": "[" * 5000 + "]" * 5000,
    "@@DEEPDICT@@": '{"a":' * 3000 + "1" + "}" * 3000,
}
_GIANT = ["x" * 300_000, "\u202e" * 300_000, "\x1b[31m" * 50_000]
_LEAF = st.one_of(
    st.sampled_from(sorted(_RAW)),
    st.sampled_from(_GIANT),
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 1.5, 2**63, -(2**63) - 1, 10**30, float("nan"), float("inf")]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["\x00", "\x1b]0;x\x07", "\r\n", "\u2066", "[bold]x[/]", " ", ""]),
)
_VALUE = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=5,
)


def encoded(body: Any) -> bytes:
    """`body` as JSON text, each placeholder swapped for what it stands for."""
    text = json.dumps(body, allow_nan=True)
    for key, raw in _RAW.items():
        text = text.replace(json.dumps(key), raw)
    return text.encode("utf-8", "surrogatepass")


def _add_beside(draw: st.DrawFn, parent: Any, key: Any) -> None:
    if isinstance(parent, dict):
        parent[draw(st.text(max_size=6))] = draw(_VALUE)
    else:
        parent.insert(key, draw(_VALUE))


@st.composite
def hostile_bodies(draw: st.DrawFn) -> tuple[str, str, bytes]:
    face, path, body = draw(st.sampled_from(BODIES))
    if draw(st.integers(0, 9)) == 0:
        return face, path, encoded(draw(_VALUE))
    body = copy.deepcopy(body)
    for _ in range(draw(st.integers(1, 3))):
        if not mutate_once(draw, body, _VALUE, _add_beside):
            break
    return face, path, encoded(body)


def _strings(doc: Any) -> list[str]:
    if isinstance(doc, str):
        return [doc]
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(doc, list):
        return [s for v in doc for s in _strings(v)]
    return []


def assert_refusal_is_plain(status: int, text: str) -> None:
    """A 4xx body is JSON whose every string is one plain line of bounded length."""
    assert status < 500, text[:3000]
    if status < 400:
        return
    doc = json.loads(text)
    for s in _strings(doc):
        assert not NOT_PRINTED_IN_LINE.search(s), (status, s[:500])
        assert len(s) <= 1200, (status, s[:500])


async def _one(folder: Path, face: str, path: str, payload: bytes) -> tuple[int, str, int]:
    async with rig(folder, api=face, token=TOKEN) as r:
        start = {"model": "m", "session_id": "s", "context_length": 8192}
        started = await r.http.post("/v1/sessions", headers=AUTH, json=start)
        assert started.status_code == 201, started.text
        before = r.last_seq()
        headers = {**AUTH, "content-type": "application/json"}
        response = await r.http.post(path, headers=headers, content=payload)
        return response.status_code, response.text, r.last_seq() - before


@settings(max_examples=40, deadline=None)
@given(hostile_bodies())
def test_a_hostile_json_body_is_no_server_error_and_a_refusal_appends_nothing(
    case: tuple[str, str, bytes],
) -> None:
    face, path, payload = case

    async def main() -> tuple[int, str, int]:
        with tempfile.TemporaryDirectory(prefix="ctxledger-hostile-json-") as folder:
            return await _one(Path(folder), face, path, payload)

    status, text, appended = anyio.run(main)
    assert_refusal_is_plain(status, text)
    # (a failed overflow recovery, on the provider-error route only, is an outcome, not a
    # refusal: it records what it tried)
    recovery = path.endswith("/provider-error") and '"context_overflow"' in text
    if status >= 400 and not recovery:
        assert appended == 0, (status, text[:2000])


#: the read routes: a path with {} for a hostile path segment, and its query names
READS: list[tuple[str, tuple[str, ...]]] = [
    ("/v1/sessions/{}", ()),
    ("/v1/sessions/{}/chain", ()),
    ("/v1/sessions/{}/usage", ()),
    ("/v1/sessions/{}/replay", ("verify",)),
    ("/v1/sessions/{}/audit", ()),
    ("/v1/sessions/{}/trace", ("fact",)),
    ("/v1/sessions/{}/recall", ("query", "limit")),
    ("/v1/sessions/{}/api-messages", ("cache",)),
    ("/v1/sessions/s/persisted/{}", ("offset", "limit")),
    ("/v1/compactions/{}/expand", ()),
    ("/v1/compactions/{}/audit", ()),
    ("/v1/diff", ("a", "b")),
    ("/v1/sessions", ()),
]
_TEXT = st.one_of(
    st.sampled_from(["s", "s@1", "s@99999999999999999999", "0", "-1", "true", "x" * 5000]),
    st.sampled_from(["9" * 5000, "\x1b[31m", "a\r\nb", "\u202ex", "\x00", "%00", "[bold]"]),
    st.text(max_size=12),
)


@st.composite
def hostile_reads(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    template, names = draw(st.sampled_from(READS))
    segment = urllib.parse.quote(draw(_TEXT), safe="")
    query = {name: draw(_TEXT) for name in names if draw(st.booleans())}
    return template.replace("{}", segment or "s"), query


@settings(max_examples=40, deadline=None)
@given(hostile_reads())
def test_a_hostile_read_is_no_server_error_and_says_so_plainly(
    case: tuple[str, dict[str, str]],
) -> None:
    path, query = case

    async def main() -> tuple[int, str, int]:
        with tempfile.TemporaryDirectory(prefix="ctxledger-hostile-read-") as folder:
            async with rig(Path(folder), token=TOKEN) as r:
                start = {"model": "m", "session_id": "s", "context_length": 8192}
                await r.http.post("/v1/sessions", headers=AUTH, json=start)
                await r.http.post("/v1/sessions/s/messages", headers=AUTH, json={"messages": TURN})
                before = r.last_seq()
                response = await r.http.get(path, headers=AUTH, params=query)
                return response.status_code, response.text, r.last_seq() - before

    status, text, appended = anyio.run(main)
    assert_refusal_is_plain(status, text)
    assert appended == 0, (path, status)  # a read, answered or refused, writes nothing
