"""``markers.last_at`` (session 34): ``str.rfind`` of a long text, its tail looked at first.

A merged summary ends its message, so ``unwrap_summary`` finds it in the tail; a long
message holding none is answered by one forward search. The answer is ``rfind``'s
whatever the text: the tail is lowered here so that short texts take every branch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.compressor import markers

_TEXTS = st.text(alphabet="abé\n", max_size=40)
_NEEDLES = st.text(alphabet="abé\n", max_size=4)  # the empty needle too


@contextmanager
def _tail(chars: int) -> Iterator[None]:
    before = markers.TAIL
    markers.TAIL = chars
    try:
        yield
    finally:
        markers.TAIL = before


@settings(max_examples=400, deadline=None)
@given(text=_TEXTS, needle=_NEEDLES, tail=st.integers(1, 12))
def test_last_at_is_rfind(text: str, needle: str, tail: int) -> None:
    with _tail(tail):
        assert markers.last_at(text, needle) == text.rfind(needle)


def test_a_long_message_with_a_summary_merged_twice_unwraps_the_last() -> None:
    long = "word " * 20_000  # longer than the tail
    once = markers.merge_summary({"role": "user", "content": long}, "first summary")
    twice = markers.merge_summary({"role": "user", "content": once["content"]}, "second")
    assert markers.unwrap_summary(twice["content"]) == "second"
    early = markers.merge_summary({"role": "user", "content": "x"}, "early")["content"]
    assert markers.unwrap_summary(early + long) == "early"  # (up to its end marker)
    assert markers.unwrap_summary(long) is None


def _merged(summary: str) -> str:
    return str(markers.merge_summary({"role": "user", "content": "msg"}, summary)["content"])


_PIECES = st.lists(
    st.sampled_from(["x", "word ", "\n\n", _merged("one"), _merged("two"), _merged("three")]),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(pieces=_PIECES, tail=st.integers(1, 400))
def test_unwrap_summary_is_the_same_whichever_search_finds_the_lead(
    pieces: list[str], tail: int
) -> None:
    text = "".join(pieces)
    with _tail(1 << 30):  # every text short: the plain rfind
        expected = markers.unwrap_summary(text)
    with _tail(tail):  # texts longer than the tail: last_at
        assert markers.unwrap_summary(text) == expected
