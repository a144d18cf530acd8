"""Reading the ``read_persisted`` answers the framework adapters send the model
(:func:`ctxledger.integrations.common.slice_text`)."""

from __future__ import annotations

import re
from typing import NamedTuple

_HEAD = re.compile(
    r"\[stored output: characters (\d+) to (\d+) of (\d+); "
    r"(?:go on at offset (\d+)|that is the end)\]\n"
)


class Slice(NamedTuple):
    offset: int
    total: int
    next_offset: int | None
    text: str


def parse_slice(answer: str) -> Slice:
    """The header's figures and the text of one answer (AssertionError if malformed)."""
    head = _HEAD.match(answer)
    assert head is not None, answer[:200]
    offset, end, total, more = head.groups()
    text = answer[head.end() :]
    assert int(end) - int(offset) == len(text)
    assert (more is None) == (int(end) == int(total)) and more in (None, end)
    return Slice(int(offset), int(total), None if more is None else int(more), text)
