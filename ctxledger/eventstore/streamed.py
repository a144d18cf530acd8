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
row. Streamed, the last row is held back until the stream ends; then the header's four
lists and the payloads are read back from the rows already inserted, in seq order, into
the hash (:func:`link_of`). Session 42: the lists were kept as their JSON text while
the rows went in (≈ 65 bytes an event, 13 MB for 200k messages, grown by reallocation
inside the import's peak); read back, nothing grows with the append.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, TypeVar

import msgspec

from ctxledger.errors import InvalidInput
from ctxledger.eventstore.base import AppendRequest, StreamedRequest
from ctxledger.eventstore.preparing import PreparedBatch, prepare_append
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


def link_start(prev: str, first_seq: int, stream: str, first_version: int) -> bytes:
    """The JSON text of a link header (``rows.link_hash``) up to its four lists: the
    encoding of the tuple without its closing bracket."""
    return _json((prev, first_seq, stream, first_version))[:-1]


def link_of(start: bytes, lists: Iterable[Iterable[Any]], payloads: Iterable[bytes]) -> str:
    """The sha256 link of an append: its header (`start`, then the four lists: every
    event's id, kind, schema and row digest, each list a pass over the rows), then
    every payload in order. Byte for byte the JSON text ``rows.link_hash`` hashes,
    fed a chunk of values at a time: nothing of the whole header is held."""
    digest = hashlib.sha256()
    digest.update(start)
    for values in lists:
        digest.update(b",[")
        it, sep = iter(values), b""
        while part := b",".join(map(_json, itertools.islice(it, CHUNK))):
            digest.update(sep)
            digest.update(part)
            sep = b","
        digest.update(b"]")
    digest.update(b"]")
    for payload in payloads:
        digest.update(payload)
    return digest.hexdigest()


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
    "PreparedChunk",
    "checked_request",
    "chunks",
    "link_of",
    "link_start",
    "prepared_chunks",
]
