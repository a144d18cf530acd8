"""``hermes_repair.as_hermes_holds`` against Hermes's own ``repair_message_sequence``
(``tests/hermes_oracle.py``, op ``repair``): adjacent user messages (texts, empty,
missing or null contents, lists of blocks, ``api_content`` sidecars: Hermes drops a
merged message's sidecar; keeping the first message's, as the engine did before the
session-45 review, made Hermes send that stale text in place of the merged one);
adjacent assistant messages (calls, texts, blocks, reasoning, Responses interims and
verification candidates) and tool results, answered, parted from their call by a user
message, unknown or answered twice (session 46: followed too)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.hermes_differential import Hermes, drawn, mismatches, oracle
from hypothesis import strategies as st

from ctxledger.integrations import hermes_repair

_MISSING = object()
_CONTENT = st.one_of(
    st.sampled_from(["", "note", "ask", "a\n\nb", _MISSING, None]),
    st.text(max_size=6),
    st.just([{"type": "text", "text": "blocks"}]),
)


@st.composite
def _user(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user"}
    if (content := draw(_CONTENT)) is not _MISSING:
        message["content"] = content
    if draw(st.booleans()):
        message["api_content"] = draw(st.sampled_from(["sent with memory", ""]))
    if draw(st.booleans()):
        message["timestamp"] = draw(st.integers(0, 9))
    return message


_CALL_IDS = st.sampled_from(["c1", "c2", "c3"])


@st.composite
def _assistant(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    if (content := draw(_CONTENT)) is not _MISSING:
        message["content"] = content
    calls = draw(st.lists(_CALL_IDS, max_size=2, unique=True))
    if calls or draw(st.booleans()):
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for c in calls
        ]
    if draw(st.booleans()):
        message["reasoning_content"] = draw(st.sampled_from(["", "thought"]))
    flag = draw(st.sampled_from([None, "incomplete", "verification_required", "stop"]))
    if flag is not None:
        message["finish_reason"] = flag
    if draw(st.integers(0, 9)) == 0:
        message["codex_reasoning_items"] = [{"id": "r"}]
    return message


_TOOL = st.builds(
    lambda call, text: {"role": "tool", "tool_call_id": call, "content": text},
    st.one_of(_CALL_IDS, st.just("")),
    st.text(max_size=3),
)

_LISTS = st.lists(st.one_of(_user(), _user(), _assistant(), _TOOL), max_size=9)


@pytest.fixture(scope="module")
def hermes() -> Iterator[Hermes]:
    yield from oracle()


def test_the_view_handed_back_is_the_list_hermes_repairs_it_to(hermes: Hermes) -> None:
    lists = drawn(_LISTS, 400, derandomize=True)
    lists.append(  # the review's case: a user pair, each with a sidecar
        [
            {"role": "user", "content": "u1", "api_content": "u1 + memory"},
            {"role": "user", "content": "note"},
            {"role": "user", "content": "u2", "api_content": "u2 + memory"},
        ]
    )
    theirs = hermes.ask("repair", lists)
    while (again := hermes.ask("repair", theirs)) != theirs:  # (as before each model call)
        theirs = again
    ours = [hermes_repair.as_hermes_holds(messages) for messages in lists]
    assert not mismatches(list(zip(lists, theirs, ours, strict=True)))
    assert any(
        before["role"] == after["role"] == "user"
        for messages in lists
        for before, after in itertools.pairwise(messages)
        if "api_content" in before and isinstance(after.get("content", ""), str)
    )
    for shape in ("assistant", "tool"):  # (the draws hold the session-46 shapes)
        assert any(
            before["role"] == after["role"] == shape
            for messages in lists
            for before, after in itertools.pairwise(messages)
        )
    assert hermes.ask("repair", ours) == ours  # (Hermes keeps the handed view as it is)
