"""Appending an iterator of events chunk by chunk inside one transaction (session 40).

``append_many`` encodes every event of an append before it writes: an import of a
1 GB file held its encoded rows beside the events (``docs/notes/s39-hostile.md`` §2).
``append_stream`` takes requests whose ``events`` may be a generator and encodes and
inserts :data:`CHUNK` events at a time, in the one transaction the caller holds: a bad
event late in the stream raises and the caller's rollback leaves nothing appended.

The rows, hashes and seqs are the ones ``append_many`` writes for the same events. The
linked chain seals one append to a stream with one sha256 over a header (the previous
link, the position, every event's id, kind, schema and row digest) followed by every
payload (:func:`~ctxledger.eventstore.rows.link_hash`), written on the stream's last
row. Streamed, the header's four lists are kept as their JSON text (a few dozen bytes
an event, not the event), the last row is held back until the stream ends, and the
payloads are read back from the rows already inserted, in seq order, into the hash.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, TypeVar

import msgspec

from ctxledger.errors import InvalidInput
from ctxledger.eventstore.base import (
    AppendRequest,
    PreparedBatch,
    StreamedRequest,
    prepare_append,
)
from ctxledger.integers import shown

T = TypeVar("T")

#: events encoded and inserted at a time
CHUNK = 2048

_json = msgspec.json.Encoder().encode

#: (event_id, kind, schema, payload) as ``PreparedBatch.rows`` holds it
Row = tuple[str, str, int, bytes]
Head = tuple[str, int] | tuple[None, None]


def chunks(items: Iterable[T], size: int | None = None) -> Iterator[list[T]]:
    """`items` in lists of at most `size` (default :data:`CHUNK`), an iterator read that
    many at a time."""
    it, size = iter(items), size or CHUNK
    while chunk := list(itertools.islice(it, size)):
        yield chunk


class LinkHeader:
    """The header of one append's link (``rows.link_hash``), built a row at a time as
    the JSON text of its four lists: byte for byte what encoding the whole tuple gives."""

    def __init__(self, prev: str, first_seq: int, stream: str, first_version: int) -> None:
        self.start = _json((prev, first_seq, stream, first_version))[:-1]  # without its "]"
        self.lists = [bytearray(), bytearray(), bytearray(), bytearray()]
        self.rows = 0

    def __len__(self) -> int:
        return self.rows

    def add(self, row: Row, digest: str) -> None:
        self.rows += 1
        for part, value in zip(self.lists, (row[0], row[1], row[2], digest), strict=True):
            if part:
                part += b","
            part += _json(value)

    def hash_into(self, digest: Any) -> None:
        """Feed the header to `digest` piece by piece (no copy of the lists joined)."""
        digest.update(self.start)
        for part in self.lists:
            digest.update(b",[")
            digest.update(memoryview(part))
            digest.update(b"]")
        digest.update(b"]")


class PreparedChunk(NamedTuple):
    rows: list[Row]
    heads: list[Head]
    blobs: dict[str, bytes]


def prepared_chunks(
    request: StreamedRequest, threshold: int, size: int | None = None
) -> Iterator[PreparedChunk]:
    """The request's events validated and encoded (``prepare_append``), `size` at a time."""
    for chunk in chunks(request.events, size):
        one = AppendRequest(request.stream, chunk, request.expected_version)
        batches, blobs = prepare_append((one,), None, threshold)
        batch: PreparedBatch = batches[0]
        assert batch.heads is not None
        yield PreparedChunk(batch.rows, batch.heads, blobs)


def link_of(header: LinkHeader, payloads: Iterable[bytes], last: bytes) -> str:
    """The sha256 link of an append: its header, then every payload in order."""
    digest = hashlib.sha256()
    header.hash_into(digest)
    for payload in payloads:
        digest.update(payload)
    digest.update(last)
    return digest.hexdigest()


def checked_request(request: Any, seen: set[str]) -> StreamedRequest:
    """A streamed request's own checks (``append_many``'s request-level ones)."""
    if not isinstance(request, StreamedRequest):
        raise InvalidInput(f"append_stream takes StreamedRequests, got {type(request).__name__}")
    stream, expected = request.stream, request.expected_version
    if not isinstance(stream, str) or not stream or "\x00" in stream:
        raise InvalidInput(
            f"stream must be a non-empty session id without NUL, got {shown(stream)}"
        )
    if expected is not None and (type(expected) is not int or expected < 0):
        raise InvalidInput(f"expected_version must be an int >= 0 or None, got {shown(expected)}")
    if stream in seen:
        raise InvalidInput(
            f"stream {shown(stream)} appears twice in one append; merge its events into one request"
        )
    seen.add(stream)
    return request


__all__ = [
    "CHUNK",
    "LinkHeader",
    "PreparedChunk",
    "checked_request",
    "chunks",
    "link_of",
    "prepared_chunks",
]
