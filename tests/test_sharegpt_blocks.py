"""ShareGPT tag blocks are found in linear time, exactly as the lazy regex found them.

Review (session 26): ``<tool_call>(.*?)</tool_call>`` rescans the rest of a turn from
every opening tag without a closing one; a 220 KB turn of 20,000 ``<tool_call>`` took
24 s to import. ``sharegpt.blocks`` finds the same blocks with ``str.find``.
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.importers.sharegpt import blocks, has_tool_call, parse_sharegpt

_PIECES = ["<tool_call>", "</tool_call>", "<tool_call", "tool_call>", "x", "\n", "{}", "<", ">"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30))
def test_blocks_are_what_the_lazy_regex_finds(pieces: list[str]) -> None:
    text = "".join(pieces)
    pattern = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
    expected = [(m.start(), m.end(), m.group(1)) for m in pattern.finditer(text)]
    assert blocks(text, "tool_call") == expected
    assert has_tool_call(text) == bool(expected)


def test_a_turn_of_many_unclosed_tags_imports_in_one_pass() -> None:
    import pytest

    from ctxledger.errors import ImportFormatError

    turns = [{"from": "human", "value": "go"}, {"from": "gpt", "value": "<tool_call>" * 20_000}]
    (session,) = parse_sharegpt(json.dumps([{"conversations": turns}]))
    assert session.messages[1]["content"] == "<tool_call>" * 20_000  # no call: text as given
    turns.append({"from": "tool", "value": "<tool_response>" * 20_000})
    with pytest.raises(ImportFormatError, match="no pending <tool_call>"):
        parse_sharegpt(json.dumps([{"conversations": turns}]))
