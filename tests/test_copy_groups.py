"""Repeated tool results grouped by content (``compressor.copies``) find what the
length-and-edges grouping found (``helpers.reference_layout.newest_copies``), whole or
grown, and keep no container per result for the cyclic collector to walk."""

from __future__ import annotations

import gc
from typing import Any

from helpers import reference_layout
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor.copies import CopyGroups, group_copies, newest_copies, resolve_copies

Message = dict[str, Any]

_EDGE = "e" * 70  # longer than the reference's 64-char edges: twins differ only inside
#: contents of one length whose edges agree, so only a full comparison tells them apart
_BODIES = [f"{_EDGE}{c}{_EDGE}" for c in "abc"] + ["x" * 141, "y" * 250, "short"]
_CONTENT = st.one_of(
    st.sampled_from(_BODIES),
    st.sampled_from(_BODIES).map(lambda text: [{"type": "text", "text": text}]),
    st.none(),
)
_MESSAGE = st.one_of(
    st.builds(lambda content: {"role": "tool", "tool_call_id": "c", "content": content}, _CONTENT),
    st.sampled_from(_BODIES).map(lambda text: {"role": "user", "content": text}),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_MESSAGE, max_size=24), st.integers(0, 24), st.sampled_from([1, 100, 200]))
def test_grouping_by_content_finds_the_copies_the_edge_grouping_found(
    messages: list[Message], split: int, min_chars: int
) -> None:
    expected = reference_layout.newest_copies(messages, min_chars)
    assert newest_copies(messages, min_chars) == expected
    # grown in two steps through a copy (as a plan cache extends a scan): the same, and
    # the copy taken before the growth still answers for the shorter list
    split = min(split, len(messages))
    first = CopyGroups()
    group_copies(first, messages, range(split), min_chars)
    grown = first.copy()
    group_copies(grown, messages, range(split, len(messages)), min_chars)
    assert resolve_copies(grown) == expected
    assert resolve_copies(first) == reference_layout.newest_copies(messages[:split], min_chars)


def test_the_groups_hold_nothing_the_collector_tracks() -> None:
    messages = [
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"{i % 7} " * 150} for i in range(50)
    ]
    groups = CopyGroups()
    group_copies(groups, messages, range(len(messages)), 200)
    assert resolve_copies(groups) == reference_layout.newest_copies(messages, 200)
    assert not gc.is_tracked(groups.latest)
    assert not gc.is_tracked(groups.older)
