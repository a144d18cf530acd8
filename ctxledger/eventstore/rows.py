"""Stored rows: the hash chain that links them, and decoding them back to events (the
walk that checks the chain is :mod:`ctxledger.eventstore.verifier`).

Every backend computes and checks the same chain through this module, so a ledger
copied from one store to another (``ctxledger migrate``) verifies in both. Two row
formats verify as one chain: the per-event format (each row holds :func:`chain_hash` of
the previous row) and the linked one (one sha256 :func:`link_hash` per append to a
stream, on its last row, plus a crc digest per row that locates a damaged row).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Union

import msgspec

from ctxledger import integers
from ctxledger.errors import IntegrityError, InvalidEvent, UnknownBlob
from ctxledger.events import (
    EVENT_DECODER,
    EVENT_TYPES,
    READ_AS_IS,
    UNREADABLE,
    Event,
    MessageAppended,
    Recorded,
    SessionSwitched,
    upcast_stored,
)
from ctxledger.eventstore.contents import (
    hydrate_layout,
    hydrate_shared,
    layout_problem,
)
from ctxledger.messages import JSON

#: how an append's rows are chained: ``"per_event"`` (a :func:`chain_hash` per row) or
#: ``"linked"`` (a :func:`row_digest` per row, one :func:`link_hash` per append)
ChainFormat = Literal["per_event", "linked"]
CHAIN_FORMATS: tuple[ChainFormat, ...] = ("per_event", "linked")
#: what a decoder's fast path raises on a stored payload it cannot take as today's shape, and
#: a payload that is no bytes (NULL or a number): the slow path (``upcast_stored``) names it
UNDECODED = (*UNREADABLE, TypeError)


# --- the hash chain -------------------------------------------------------------------

#: the "previous hash" of the first event in a log
GENESIS_HASH = "0" * 64

#: a stored event as backends hand it to the verifier:
#: (seq, stream, version, event_id, kind, schema, payload, hash)
StoredRow = tuple[int, str, int, str, str, int, bytes, str]
#: a stored row with its head columns (message_id, tokens), as SQLite's verify reads it
HeadedRow = tuple[int, str, int, str, str, int, bytes, str, str | None, int | None]

#: encodes ``(prev_hash, seq, stream, version, event_id, kind, schema)`` as a JSON array:
#: the bytes hashed before an event's payload (JSON, so no field can bleed into another)
chain_header: Callable[[tuple[str, int, str, int, str, str, int]], bytes] = (
    msgspec.json.Encoder().encode
)


def chain_hash(
    prev_hash: str,
    seq: int,
    stream: str,
    version: int,
    event_id: str,
    kind: str,
    schema: int,
    payload: bytes,
) -> str:
    """sha256 hex of the previous event's hash, this event's position and identity, and its payload."""
    header = chain_header((prev_hash, seq, stream, version, event_id, kind, schema))
    return hashlib.sha256(header + payload).hexdigest()


#: encodes one append's link header (see :func:`link_hash`)
_link_header: Callable[[tuple[object, ...]], bytes] = msgspec.json.Encoder().encode


def row_digest(payload: bytes) -> str:
    """A row's own digest in the linked format: crc32 of its payload, in decimal.

    It only locates a damaged row in an append (its sha256 :func:`link_hash`, over the
    digests and payloads, is the seal): 10 decimal digits at most, never a 64-hex hash.
    """
    return str(zlib.crc32(payload))


def split_linked(stored_hash: str) -> tuple[str, str] | None:
    """(row digest, link or "") of a linked row's hash column; None for a per-event hash."""
    if len(stored_hash) == 64 and ":" not in stored_hash:
        return None
    digest, _, link = stored_hash.partition(":")
    return digest, link


def link_hash(
    prev_hash: str,
    first_seq: int,
    stream: str,
    first_version: int,
    rows: Sequence[tuple[str, str, int, bytes]],
    digests: Sequence[str],
) -> str:
    """sha256 hex chaining one append to one stream (rows: event_id, kind, schema, payload).

    One hash per append instead of one per event: the header names the previous
    link, the append's position, and every event's id, kind, schema and row digest;
    the payloads follow, concatenated.
    """
    header = _link_header(
        (
            prev_hash,
            first_seq,
            stream,
            first_version,
            [row[0] for row in rows],
            [row[1] for row in rows],
            [row[2] for row in rows],
            digests,
        )
    )
    digest = hashlib.sha256(header)
    digest.update(b"".join([row[3] for row in rows]))
    return digest.hexdigest()


def chain_tip(stored_hash: str) -> str:
    """The chain value a row hands to the next append: its hash, or the link of a linked row.

    For the last row of a log (always the end of an append) this is the head hash that
    ``verify`` reports and ``verify --expect-head`` / the head anchor compare.
    """
    return stored_hash[-64:]


def chain_rows(
    prev: str,
    seq: int,
    stream: str,
    version: int,
    rows: Sequence[tuple[str, str, int, bytes]],
    chain: ChainFormat,
) -> tuple[list[str], str]:
    """The hash column of `rows` appended to `stream` after log position `seq` and stream
    `version`, chained from `prev`; returns (hashes, the chain value after them)."""
    if chain == "linked":
        digests = [row_digest(row[3]) for row in rows]
        prev = link_hash(prev, seq + 1, stream, version + 1, rows, digests)
        return [*digests[:-1], f"{digests[-1]}:{prev}"], prev
    hashes: list[str] = []
    sha256, header = hashlib.sha256, chain_header
    for offset, (event_id, kind, schema, payload) in enumerate(rows, 1):
        position = (prev, seq + offset, stream, version + offset, event_id, kind, schema)
        prev = sha256(header(position) + payload).hexdigest()
        hashes.append(prev)
    return hashes, prev


# --- decoding stored payloads ----------------------------------------------------------


def undecodable(seq: int, problem: object) -> InvalidEvent:
    """What a read says of the row at `seq` it cannot decode (one line; verify names it)."""
    return InvalidEvent(
        f"the event at seq {seq} cannot be decoded ({problem}); run verify() on the log"
    )


def shown(value: object, *, whole: bool = False) -> str:
    """A column's value as an error names it: ``NULL`` or quoted short (a file's column may
    hold megabytes or control bytes); `whole`: an id, quoted whole to be copied (``shown_id``)."""
    return "NULL" if value is None else (integers.shown_id if whole else integers.shown)(value)


def decode_stored(payload: bytes, schema: int) -> Event:
    """Decode a stored payload, upcasting it when `schema` is not today's (pure).

    The payload carries its ``kind`` tag, so backends need not read the kind column.
    Raises InvalidEvent when the payload is not an event or cannot be upcast.
    """
    try:
        event: Event = EVENT_DECODER.decode(payload)
        if schema == event.SCHEMA or (type(event), schema) in READ_AS_IS:
            return event
    except UNDECODED:
        pass  # perhaps an older shape: the upcasting path decides
    return upcast_stored(payload, schema)


def decode_rows(
    rows: Iterable[tuple[int, int, int, bytes, str]],
    get_blob: Callable[[str], bytes],
    sealed: Callable[[int], bool] | None = None,
) -> list[Recorded]:
    """Stored rows (seq, version, schema, payload, hash) -> Recorded (shared by backends).

    Upcasts older payloads and re-inflates message contents kept as blobs; the
    stream is the event's session (append guarantees it, verify() checks it).
    `sealed` (the store's ``sealed(seq)``) lets a run that shares contents reuse a
    message's recorded token count once its row is checked (see ``hydrate_shared``).
    """
    out: list[Recorded] = []
    append, decode = out.append, EVENT_DECODER.decode
    seq = 0
    try:
        for seq, version, schema, payload, digest in rows:
            try:
                event: Event | None = decode(payload)
            except UNDECODED:
                event = None  # maybe an older shape: upcast_stored upcasts or explains
            if event is None or (
                schema != event.SCHEMA and (type(event), schema) not in READ_AS_IS
            ):
                event = upcast_stored(payload, schema)
            if type(event) is MessageAppended and event.content_ref is not None:
                event = hydrate_shared(event, get_blob, _seal_of(sealed, seq))
            elif type(event) is SessionSwitched:
                problem = layout_problem(event, schema)  # a forged row is refused, not read
                if problem is not None:
                    raise InvalidEvent(problem)
                if schema == event.SCHEMA:
                    event = hydrate_layout(event, get_blob)  # (schema 2: it holds references)
            append(Recorded(seq, event.session_id, version, event, digest))
    except InvalidEvent as exc:
        raise undecodable(seq, exc) from exc
    except UnknownBlob as exc:
        raise IntegrityError(
            f"the event at seq {seq} lost its content blob ({exc}); run verify() on the log"
        ) from exc
    except UnicodeDecodeError as exc:  # a blob that hashes to its ref but holds no text
        raise IntegrityError(
            f"the event at seq {seq}: its content blob is not UTF-8 text ({exc.reason} at "
            f"byte {exc.start}); run verify() on the log"
        ) from exc
    return out


def _seal_of(sealed: Callable[[int], bool] | None, seq: int) -> Callable[[], bool] | None:
    return None if sealed is None else lambda: sealed(seq)


class MessageHead(
    msgspec.Struct, tag_field="kind", tag="MessageAppended", frozen=True, kw_only=True, gc=False
):
    """What a fold needs of a stored ``MessageAppended`` payload: everything but the body.

    Decoding into it skips the ``message`` field (and its content) without building it,
    so a rebuild does not pay for parsing a million message bodies it only indexes; the
    body is read again by seq when someone asks for it (``EventStore.read_at``).
    """

    session_id: str
    message_id: str
    tokens: int


class MessageBody(
    msgspec.Struct, tag_field="kind", tag="MessageAppended", frozen=True, kw_only=True, gc=False
):
    """What a body read needs of a stored ``MessageAppended`` payload: the message (and
    whether its content is a blob to re-inflate); the envelope is skipped."""

    message: JSON
    content_ref: str | None = None


#: decodes a ``MessageAppended`` payload at today's schema as its :class:`MessageBody`
BODY_DECODER: msgspec.json.Decoder[MessageBody] = msgspec.json.Decoder(MessageBody)


def decode_bodies(
    rows: Iterable[tuple[int, int, bytes]],
) -> tuple[dict[int, JSON], list[int]]:
    """Rows (seq, schema, payload) -> (seq -> message, the seqs this fast path leaves to a
    whole decode: another schema, a content kept as a blob, a payload that is not a
    message at today's shape). Pure; the caller reads the rest with ``read_at``."""
    found: dict[int, JSON] = {}
    rest: list[int] = []
    decode = BODY_DECODER.decode
    for seq, schema, payload in rows:
        if schema == MESSAGE_SCHEMA:
            try:
                body = decode(payload)
            except UNDECODED:
                rest.append(seq)
                continue
            if body.content_ref is None:
                found[seq] = body.message
                continue
        rest.append(seq)
    return found, rest


#: a stored row as a rebuild reads it: (seq, version, schema, payload)
HeadRow = tuple[int, int, int, bytes]

_HEAD_TYPES = tuple(cls for kind, cls in EVENT_TYPES.items() if kind != "MessageAppended")
#: decodes a payload stored at today's schema, a message as its :class:`MessageHead`
HEAD_DECODER: msgspec.json.Decoder[Event | MessageHead] = msgspec.json.Decoder(
    Union[(MessageHead, *_HEAD_TYPES)]
)
#: the schema of a ``MessageAppended`` payload :data:`HEAD_DECODER` takes as a head
MESSAGE_SCHEMA = MessageAppended.SCHEMA


#: a stored row as a rebuild reads it from a store with head columns (SQLite since
#: migration 0002): (seq, stream id, message id, tokens, schema, payload). The payload
#: is None exactly when the row has its message's head in the two columns; when it is
#: not, message id and tokens may be None (typed by the common case). No version: the
#: fold asks for each stream's last one (``versions_at``)
ColumnRow = tuple[int, int, str, int, int, bytes | None]

#: the head columns of a row that is not a message (or predates them)
NO_HEAD: tuple[None, None] = (None, None)


def message_head(message_id: object, tokens: object) -> tuple[str, int] | tuple[None, None]:
    """The head columns of a message with this id and token count, or :data:`NO_HEAD` when
    they do not fit the columns (a token count past 64 bits, a non-text id: such a row
    is folded from its payload, like a row stored before the columns)."""
    if type(message_id) is str and type(tokens) is int and 0 <= tokens < 2**63:
        return (message_id, tokens)
    return NO_HEAD


def head_columns(stream: str, schema: int, payload: bytes) -> tuple[str, int] | tuple[None, None]:
    """The (message id, tokens) columns a stored row gets (pure): its message's head when
    the payload is a ``MessageAppended`` at today's schema belonging to `stream`, else
    :data:`NO_HEAD` (the row is folded from its payload)."""
    if schema != MESSAGE_SCHEMA:
        return NO_HEAD
    try:
        item = HEAD_DECODER.decode(payload)
    except UNDECODED:
        return NO_HEAD
    if type(item) is not MessageHead or item.session_id != stream:
        return NO_HEAD
    return message_head(item.message_id, item.tokens)


def decode_head(seq: int, schema: int, payload: bytes) -> Event | MessageHead:
    """One stored row as a rebuild folds it: a message as its head (body not parsed) (pure).

    The fold decodes rows with :data:`HEAD_DECODER` itself and calls this for the rest
    (a row stored at an older schema, or not decodable as today's shape).
    """
    try:
        item: Event | MessageHead | None = HEAD_DECODER.decode(payload)
    except UNDECODED:
        item = None
    if type(item) is MessageHead:
        if schema == MESSAGE_SCHEMA:
            return item
    elif item is not None and (
        schema == item.SCHEMA or (type(item), schema) in READ_AS_IS  # type: ignore[union-attr]
    ):
        return item
    try:
        event = upcast_stored(payload, schema)
    except InvalidEvent as exc:
        raise undecodable(seq, exc) from exc
    if type(event) is MessageAppended:
        return MessageHead(
            session_id=event.session_id, message_id=event.message_id, tokens=event.tokens
        )
    return event
