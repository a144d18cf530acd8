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
_NEEDLES = st.text(alphabet="abé\n", min_size=1, max_size=4)


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
