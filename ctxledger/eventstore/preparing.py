"""Preparing an append, shared by the backends: its requests validated and its events
encoded before any I/O (pure), with the blobs to store in the same transaction (moved
out of :mod:`ctxledger.eventstore.base` in session 45)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import msgspec

from ctxledger.errors import DuplicateEventError, InvalidEvent, InvalidInput
from ctxledger.events import (
    EVENT_TYPES,
    SWITCH_INLINE_SCHEMA,
    MessageAppended,
    SessionSwitched,
    encode_event,
    sha256_hex,
)
from ctxledger.eventstore.base import MAX_SEQ, AppendRequest
from ctxledger.eventstore.contents import (
    dehydrate_layout,
    dehydrate_shared,
    layout_problem,
    layout_refs,
)
from ctxledger.eventstore.rows import (
    CHAIN_FORMATS,
    NO_HEAD,
    ChainFormat,
    head_columns,
    message_head,
)
from ctxledger.integers import shown as quoted
from ctxledger.integers import shown_id
from ctxledger.limits import not_unicode

__all__ = ["MAX_SCHEMA", "PreparedBatch", "prepare_append"]

_encode = encode_event

#: event class -> (kind, schema): one lookup validates the type and gives both columns
_KINDS: dict[type, tuple[str, int]] = {cls: (k, cls.SCHEMA) for k, cls in EVENT_TYPES.items()}


class PreparedBatch(NamedTuple):
    """One stream's events, validated and encoded, ready for a transaction."""

    stream: str
    expected_version: int | None
    rows: list[tuple[str, str, int, bytes]]  # event_id, kind, schema, payload
    chain: ChainFormat | None = None  # None: the store's own format
    #: per row, its message's head (message id, tokens) or NO_HEAD: the derived
    #: columns a store may keep beside the payload (SQLite's, for rebuilds)
    heads: list[tuple[str, int] | tuple[None, None]] | None = None


def prepare_append(
    requests: Sequence[AppendRequest], blobs: Mapping[str, bytes] | None, threshold: int
) -> tuple[list[PreparedBatch], dict[str, bytes]]:
    """Validate and encode an append before any I/O (pure); raises on bad input.

    Returns one batch per request (large message contents moved out by
    ``dehydrate``) and every blob to store in the same transaction.
    """
    batches: list[PreparedBatch] = []
    new_blobs: dict[str, bytes] = {}
    for request in requests:
        _check_request(request, batches)
        stream, expected, stored = request.stream, request.expected_version, request.stored
        rows: list[tuple[str, str, int, bytes]] = []
        heads: list[tuple[str, int] | tuple[None, None]] = []
        for index, event in enumerate(request.events):
            meta = _KINDS.get(type(event))
            if meta is None:
                raise InvalidEvent(
                    f"only catalogue events can be appended, got {type(event).__name__}"
                )
            if not isinstance(event.event_id, str) or "\x00" in event.event_id:
                raise InvalidEvent(
                    f"an event id is text without NUL characters, got {quoted(event.event_id)}"
                )
            if event.session_id != stream:
                raise InvalidEvent(
                    f"event {shown_id(event.event_id)} belongs to session {shown_id(event.session_id)}, "
                    f"not stream {shown_id(stream)}: append it to its own session"
                )
            if stored is not None:
                row = _stored_row(event.event_id, meta[0], stored[index])
                rows.append(row)
                # from the bytes stored, which the columns must match (not the event)
                heads.append(head_columns(stream, row[2], row[3]))
                continue
            try:
                if isinstance(event, MessageAppended):
                    heads.append(message_head(event.message_id, event.tokens))
                    # the test dehydrate() makes, inlined: this loop runs once per event
                    content = event.message.get("content")
                    if isinstance(content, str) and len(content) >= threshold:
                        event, extra = dehydrate_shared(event, threshold)
                        new_blobs.update(extra)
                else:
                    heads.append(NO_HEAD)
                    if type(event) is SessionSwitched:
                        event, meta = _switch_row(event, threshold, new_blobs)
                rows.append((event.event_id, meta[0], meta[1], _encode(event)))
            except UnicodeEncodeError as exc:
                raise _not_unicode(event.event_id, exc) from None
            except (TypeError, msgspec.EncodeError) as exc:  # a key that is not text, a set...
                raise InvalidEvent(
                    f"event {shown_id(event.event_id)} holds a value JSON cannot hold ({exc}; keys "
                    "must be text, values JSON types); nothing was appended"
                ) from None
        batches.append(PreparedBatch(stream, expected, rows, request.chain, heads))
    _reject_repeated_ids(batches)
    new_blobs.update(_checked_blobs(blobs or {}))
    return batches, new_blobs


def _switch_row(
    event: SessionSwitched, threshold: int, blobs: dict[str, bytes]
) -> tuple[SessionSwitched, tuple[str, int]]:
    """A switch as stored (long layout contents a run read kept by reference, their blobs
    added to `blobs`) and its (kind, schema): schema 2 only when it holds a reference
    (made here, or set by the caller), else 1, byte for byte what schema 1 stored."""
    event, extra = dehydrate_layout(event, threshold)
    blobs.update(extra)
    referenced = bool(extra) or bool(layout_refs(event))
    schema = event.SCHEMA if referenced else SWITCH_INLINE_SCHEMA
    problem = layout_problem(event, schema)  # (references a caller set: checked here)
    if problem is not None:
        raise InvalidEvent(f"event {shown_id(event.event_id)}: {problem}; nothing was appended")
    return event, ("SessionSwitched", schema)


def _not_unicode(event_id: str, exc: UnicodeEncodeError) -> InvalidEvent:
    return InvalidEvent(f"{not_unicode(f'event {shown_id(event_id)}', exc)}; nothing was appended")


def _checked_blobs(blobs: Mapping[str, bytes]) -> Mapping[str, bytes]:
    """`blobs` when each is keyed by the sha256 hex of its bytes, else InvalidInput."""
    for ref, data in blobs.items():
        if sha256_hex(data) != ref:
            raise InvalidInput(
                f"blob {quoted(ref)} is not the sha256 hex of its bytes; key blobs by sha256"
            )
    return blobs


def _stored_row(event_id: str, kind: str, stored: tuple[int, bytes]) -> tuple[str, str, int, bytes]:
    """The row of an event copied verbatim (``AppendRequest.stored``), its pair checked."""
    schema, payload = stored
    if type(schema) is not int or not isinstance(payload, bytes):
        raise InvalidInput("stored payloads are (schema int, payload bytes) pairs")
    if not 0 < schema <= MAX_SCHEMA:  # PostgreSQL's column is a 32-bit integer
        raise InvalidInput(f"a stored schema is 1 to {MAX_SCHEMA}, got {schema}")
    return event_id, kind, schema, payload


#: the largest event schema number a store keeps (PostgreSQL's ``integer``)
MAX_SCHEMA = 2**31 - 1


def _check_request(request: AppendRequest, batches: list[PreparedBatch]) -> None:
    """The request-level checks of an append (its events are checked one by one)."""
    stream, expected, stored = request.stream, request.expected_version, request.stored
    if not isinstance(stream, str) or not stream:
        raise InvalidInput(f"stream must be a non-empty session id, got {quoted(stream)}")
    if "\x00" in stream:  # PostgreSQL text cannot hold it (libpq would cut the id there)
        raise InvalidInput(f"a session id cannot contain a NUL character, got {quoted(stream)}")
    if any(batch.stream == stream for batch in batches):
        raise InvalidInput(
            f"stream {shown_id(stream)} appears twice in one append; merge its events into one request"
        )
    if expected is not None and type(expected) is not int:
        raise InvalidInput(f"expected_version must be an int or None, got {quoted(expected)}")
    if expected is not None and not 0 <= expected <= MAX_SEQ:
        raise InvalidInput(
            f"expected_version must be >= 0 (0 for a new session) and <= {MAX_SEQ}, got {expected}"
        )
    if request.chain is not None and request.chain not in CHAIN_FORMATS:
        raise InvalidInput(
            f"chain must be one of {', '.join(CHAIN_FORMATS)} or None, got {quoted(request.chain)}"
        )
    if stored is not None and len(stored) != len(request.events):
        raise InvalidInput(f"stored holds {len(stored)} payloads for {len(request.events)} events")


def _reject_repeated_ids(batches: list[PreparedBatch]) -> None:
    ids = [row[0] for batch in batches for row in batch.rows]
    if len(set(ids)) == len(ids):
        return
    seen: set[str] = set()
    for event_id in ids:
        if event_id in seen:
            raise DuplicateEventError(
                f"event id {shown_id(event_id)} appears twice in one append; give every event its own id"
            )
        seen.add(event_id)
