"""Mutated request bodies on the state API: never a server error, and a refusal appends
nothing (session 33's fuzzing, kept as a property: valid bodies with a value set,
removed or added at a random place)."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import anyio
from helpers.server_rig import rig
from helpers.strategies import mutate_once
from hypothesis import given
from hypothesis import strategies as st

TOKEN = "fuzzed-bodies-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
BODIES: list[tuple[str, dict[str, Any]]] = [
    (
        "/v1/sessions/s/messages",
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": "out"},
            ],
            "expected_version": None,
        },
    ),
    (
        "/v1/sessions/s/usage",
        {
            "usage": {"prompt_tokens": 10, "completion_tokens": 2},
            "model": "m",
            "cost_usd": 0.1,
            "tool_calls": False,
        },
    ),
    ("/v1/sessions/s/usage", {"usage": {"input_tokens": 10, "cache_read_input_tokens": 3}}),
    (
        "/v1/sessions",
        {"model": "m", "context_length": 8192, "system_prompt": "s", "tools": TOOLS, "title": "t"},
    ),
    ("/v1/sessions/s/end", {"reason": "done"}),
]

_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["user", "assistant", "tool", "text", "call_1", "{", "s"]),
)
_VALUE = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _add_beside(draw: st.DrawFn, parent: Any, key: Any) -> None:
    """An "add" puts a value beside the place: a new key, or an item before it."""
    if isinstance(parent, dict):
        parent[draw(st.text(max_size=6))] = draw(_VALUE)
    else:
        parent.insert(key, draw(_VALUE))


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    path, body = draw(st.sampled_from(BODIES))
    body = copy.deepcopy(body)
    for _ in range(draw(st.integers(1, 3))):
        if not mutate_once(draw, body, _VALUE, _add_beside):
            break
    return path, body


@given(mutated())
def test_a_mutated_body_is_no_server_error_and_a_refusal_appends_nothing(
    case: tuple[str, dict[str, Any]],
) -> None:
    path, body = case

    async def main() -> tuple[int, str, int]:
        with tempfile.TemporaryDirectory(prefix="ctxledger-fuzz-") as folder:
            return await one(Path(folder))

    async def one(folder: Path) -> tuple[int, str, int]:
        async with rig(folder, token=TOKEN) as r:
            start = {"model": "m", "session_id": "s", "context_length": 8192}
            await r.http.post("/v1/sessions", headers=AUTH, json=start)
            before = r.last_seq()
            response = await r.http.post(path, headers=AUTH, json=body)
            return response.status_code, response.text, r.last_seq() - before

    status, text, appended = anyio.run(main)
    assert status < 500, text
    if status >= 400:
        assert appended == 0, (status, text)
        assert "message" in text, text
