"""What a framework's model is sent for a ``read_persisted`` call stays within the
slice cap whatever the stored text holds, and its pages give the whole output back."""

from __future__ import annotations

from helpers.slices import parse_slice
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.integrations.common import slice_text
from ctxledger.runtime.toolbudget import DEFAULT_MAX_SLICE_CHARS, read_slice

CHUNKS = st.text(alphabet=st.sampled_from('ab\x00\x01\x1b[31m"\\\n\t\u00e9\U0001f600'), max_size=40)


@settings(max_examples=60, deadline=None)
@given(CHUNKS, st.integers(0, 2_000), st.integers(100, DEFAULT_MAX_SLICE_CHARS))
def test_every_answer_is_within_the_cap_and_the_pages_are_the_output(chunk, copies, limit):
    data = chunk * copies
    offset, pages = 0, []
    while True:
        answer = slice_text(read_slice(data, offset, limit))
        assert len(answer) <= DEFAULT_MAX_SLICE_CHARS
        page = parse_slice(answer)
        assert page.offset == offset and page.total == len(data)
        pages.append(page.text)
        if page.next_offset is None:
            break
        assert page.next_offset > offset  # (progress: every page holds text)
        offset = page.next_offset
    assert "".join(pages) == data


def test_a_slice_of_control_characters_is_sent_as_the_raw_text():
    data = "\x00\x1b" * 15_000
    answer = slice_text(read_slice(data, 0, DEFAULT_MAX_SLICE_CHARS))
    page = parse_slice(answer)
    assert len(answer) == DEFAULT_MAX_SLICE_CHARS and page.text == data[: len(page.text)]
    assert page.next_offset == len(page.text)  # (cut for the header: go on from there)
