"""``hermes_host.as_hermes_holds`` against Hermes's own ``repair_message_sequence``
(``tests/hermes_oracle.py``, op ``repair``) on lists whose adjacent user messages it
merges: texts, empty, missing or null contents, lists of blocks, and ``api_content``
sidecars (Hermes drops a merged message's sidecar; keeping the first message's, as the
engine did before the session-45 review, made Hermes send that stale text in place of
the merged one). Assistants are never adjacent here and there is no tool result: those
repairs of Hermes's are not followed (see ``docs/notes/s45-reach10.md``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.hermes_differential import Hermes, drawn, mismatches, oracle
from hypothesis import strategies as st

from ctxledger.integrations import hermes_host

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


_ASSISTANT = st.builds(lambda text: {"role": "assistant", "content": text}, st.text(max_size=4))


def _no_assistant_pair(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m
        for m, before in zip(messages, [None, *messages], strict=False)
        if not (before and m["role"] == before["role"] == "assistant")
    ]


_LISTS = st.lists(st.one_of(_user(), _user(), _ASSISTANT), max_size=8).map(_no_assistant_pair)


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
    ours = [hermes_host.as_hermes_holds(messages) for messages in lists]
    assert not mismatches(list(zip(lists, theirs, ours, strict=True)))
    assert any(
        before["role"] == after["role"] == "user"
        for messages in lists
        for before, after in itertools.pairwise(messages)
        if "api_content" in before and isinstance(after.get("content", ""), str)
    )
    assert hermes.ask("repair", ours) == ours  # (Hermes keeps the handed view as it is)
