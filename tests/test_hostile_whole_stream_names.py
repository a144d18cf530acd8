"""A stream (session) name in the chain verifier's and the re-send check's errors is
quoted whole, so it can be copied (session 43).

The verifier's "gap in stream …" cut the name at 40 characters (``rows.shown``, a
column's value); a Codex session id is 64 and more, and ``stem#2`` / ``stem#3`` read
as one. The re-send check's "already stored in stream … not …" did the same. Both
quote an id as ``integers.shown_id`` does (whole up to 1,024 characters, ``NULL`` for a
column holding none).
"""

from __future__ import annotations

import pytest

from ctxledger.errors import DuplicateEventError
from ctxledger.eventstore.preparing import PreparedBatch
from ctxledger.eventstore.resends import already_stored
from ctxledger.eventstore.verifier import ChainVerifier

LONG = "rollout-2026-11-30T10-00-00-" + "0123456789abcdef" * 4 + "#2"
ROW = ("e1", "MessageAppended", 1, b"{}")


def gap(stream: object) -> str:
    verifier = ChainVerifier({})
    verifier.feed([(1, stream, 2, "e1", "MessageAppended", 1, b"{}", "0" * 64)])  # type: ignore[list-item]
    problem = verifier.report().problem
    assert problem is not None
    return problem


def test_the_gap_message_names_the_stream_whole() -> None:
    assert gap(LONG) == f"gap in stream {LONG!r}: version 2 follows 0"


def test_the_gap_message_escapes_a_hostile_name_and_names_a_null_one() -> None:
    said = gap("s\x1b[31m\u202e")
    assert "'s\\x1b[31m\\u202e'" in said
    assert gap(None) == "gap in stream NULL: version 2 follows 0"


def test_a_name_past_any_id_s_length_keeps_its_start_and_its_end() -> None:
    said = gap("x" * 5000 + "#3")
    assert said.endswith("x#3' (5,002 characters): version 2 follows 0") and len(said) < 200


@pytest.mark.parametrize("where", [LONG, LONG[:-1] + "3"])
def test_the_re_send_check_names_both_streams_whole(where: str) -> None:
    other = LONG[:-1] + "9"
    batch = PreparedBatch(stream=other, expected_version=None, rows=[ROW])
    with pytest.raises(DuplicateEventError) as caught:
        already_stored([batch], lambda _id: (where, *ROW[1:]), lambda ref: b"")
    assert f"stream {where!r}, not {other!r};" in str(caught.value)
