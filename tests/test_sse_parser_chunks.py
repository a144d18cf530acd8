"""The proxy's SSE parser gives the same events however the bytes are chunked, in
linear time (review, session 26: each chunk searched the whole pending event again,
so a 16 MiB event in 16 KiB chunks cost 16 s of the event loop)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.server.formats import SSEEvent, SSEParser

_PIECES = [b"data: x", b"event: e", b"\n", b"\r\n", b"\r", b":", b" ", b"data:{}", b"\xc3\xa9"]


def _reference(stream: bytes) -> tuple[list[bytes], bytes]:
    """Events (raw) and what is left: the earliest blank-line separator, again and again."""
    out: list[bytes] = []
    while True:
        found = [(i, len(sep)) for sep in (b"\n\n", b"\r\n\r\n") if (i := stream.find(sep)) >= 0]
        if not found:
            return out, stream
        cut, sep = min(found)
        out.append(stream[: cut + sep])
        stream = stream[cut + sep :]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40), st.data())
def test_any_chunking_gives_the_events_of_the_whole_stream(
    pieces: list[bytes], data: st.DataObject
) -> None:
    stream = b"".join(pieces)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    parser = SSEParser()
    events: list[SSEEvent] = [event for chunk in chunks for event in parser.feed(chunk)]
    expected, left = _reference(stream)
    assert [event.raw for event in events] == expected
    assert events == [SSEParser._parse(raw) for raw in expected]
    assert parser.rest() == left and parser.rest() == b""


def test_a_long_event_in_small_chunks_is_one_event() -> None:
    parser = SSEParser()
    body = b"data: " + b"x" * 1_000_000
    got = [e for i in range(0, len(body), 1024) for e in parser.feed(body[i : i + 1024])]
    got += list(parser.feed(b"\n\n"))
    assert len(got) == 1 and got[0].data == "x" * 1_000_000


class _CountingBuffer(bytearray):
    """A parser buffer that counts the bytes its separator searches read."""

    scanned = 0

    def find(self, sub: Any, start: Any = 0, *rest: Any) -> int:
        found = super().find(sub, start, *rest)
        _CountingBuffer.scanned += (found + len(sub) if found >= 0 else len(self)) - start
        return found


def test_the_separator_search_reads_each_byte_a_bounded_number_of_times() -> None:
    """Linear, counted rather than timed: a long event in small chunks, then many small
    events of each line ending, in small chunks and in one; each separator's searches
    read each byte about once. Searching a pending event from its start again, or the
    separator a stream does not use once per event, reads 10-500x more here."""
    body = (
        b"data: " + b"x" * 1_000_000 + b"\n\n"
        + b"data: y\n\n" * 20_000 + b"data: z\r\n\r\n" * 20_000
    )  # fmt: skip
    for chunk in (1024, len(body)):
        parser = SSEParser()
        parser._buffer = _CountingBuffer()
        _CountingBuffer.scanned = 0
        pieces = (body[i : i + chunk] for i in range(0, len(body), chunk))
        events = [event for piece in pieces for event in parser.feed(piece)]
        assert len(events) == 40_001
        # per separator: each byte once, plus a separator's length per search
        searches = len(events) + len(body) // chunk + 1
        assert _CountingBuffer.scanned <= 2 * (len(body) + 4 * searches), chunk
