"""Whether an append is a re-send of one already written: both stores ask this before
they write (a client that lost the answer to its append sends the same batch again).

Kept apart so the SQLite and PostgreSQL stores judge a re-send by one rule; each
store only says where an event id is stored and what its row holds (SQLite one row at
a time, PostgreSQL from one query for the whole append).

A re-send is the same events: a stored id whose row holds another event is refused.
(Before session 38 any row with the id was taken as the re-send, so an append whose
events merely re-used stored ids answered success and wrote nothing: the state API's
``Idempotency-Key`` relies on the refusal, see ``server/idempotency``.) The same event
is not always the same bytes: a writer with another ``blob_threshold`` keeps a long
content inline where the first kept a reference, and a switch written inside
``sharing_contents()`` keeps layout contents by reference (schema 2). So a row whose
bytes differ is decoded as a read decodes it, contents re-inflated, beside the re-sent
one, and the events decide; this runs only on the re-check after a stale version or a
unique violation, never on an append's first try.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ctxledger.errors import DuplicateEventError, IntegrityError, InvalidEvent, UnknownBlob
from ctxledger.eventstore.preparing import PreparedBatch
from ctxledger.eventstore.rows import decode_rows, shown
from ctxledger.integers import shown as quoted

__all__ = ["StoredAs", "already_stored", "as_stored", "blobs_then"]

#: a stored row as `stored_in` answers it: (stream name, kind, schema, payload), each as
#: stored (a stream name may be anything, even NULL on a hand-edited row: compared as
#: stored, never as its str())
StoredAs = tuple[object, object, object, object]


def as_stored(value: object) -> object:
    """A payload column's value to compare: bytes as bytes (a driver may answer a
    memoryview), any other type as it is (SQLite keeps whatever a hand edit put in the
    column, TEXT say): it then compares unequal, never a TypeError from ``bytes()``."""
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else value


def blobs_then(
    new_blobs: Mapping[str, bytes], stored: Callable[[str], bytes | None]
) -> Callable[[str], bytes]:
    """A blob source for :func:`already_stored`: the append's own blobs (not stored yet),
    then `stored(ref)` (the blob as the store holds it, or None); UnknownBlob if neither."""

    def get_blob(ref: str) -> bytes:
        data = new_blobs[ref] if ref in new_blobs else stored(ref)
        if data is None:
            raise UnknownBlob(f"no blob {quoted(ref)}")
        return data

    return get_blob


def already_stored(
    batches: Sequence[PreparedBatch],
    stored_in: Callable[[str], StoredAs | None],
    get_blob: Callable[[str], bytes],
) -> bool:
    """True when every event is already stored as sent (a re-send); False when none is.

    `stored_in(event_id)` is the row holding that id as (stream name, kind, schema,
    payload), as stored, or None; `get_blob` reads the blobs a row references (the
    append's own first, :func:`blobs_then`). Raises DuplicateEventError when only some
    are, or one lives in another stream or holds another event.
    """
    found: str | None = None
    missing: str | None = None
    for batch in batches:
        for event_id, kind, schema, payload in batch.rows:
            row = stored_in(event_id)
            if row is None:
                missing = missing or event_id
                continue
            where, *stored = row
            if where != batch.stream:
                raise DuplicateEventError(
                    f"event id {_id(event_id)} is already stored in stream {_id(where)}, not "
                    f"{_id(batch.stream)}; give every new event a fresh id"
                )
            if stored != [kind, schema, payload] and not _same_event(
                stored, kind, (schema, payload), get_blob
            ):
                raise DuplicateEventError(
                    f"event id {_id(event_id)} is already stored in stream {_id(batch.stream)} "
                    "holding another event; a re-send must be the same events; give "
                    "every new event a fresh id"
                )
            found = found or event_id
    if found is not None and missing is not None:
        raise DuplicateEventError(
            f"this append mixes stored event ids ({_id(found)}) with new ones ({_id(missing)}): "
            "re-send exactly the batch that was written, or give new events fresh ids"
        )
    return found is not None


def _id(value: object) -> str:
    """An id (an event's, a stream's) as these errors name it: whole, to be copied; a
    stored column's NULL as ``NULL``."""
    return shown(value, whole=True)


def _same_event(
    stored: list[object], kind: str, sent: tuple[int, bytes], get_blob: Callable[[str], bytes]
) -> bool:
    """Whether a stored row (kind, schema, payload) whose bytes differ from the re-sent
    row's holds the same event of `kind`: both decoded as a read decodes them (upcast,
    contents re-inflated). A row that cannot be decoded (a hand edit, a lost blob) holds
    no event this append can be the re-send of."""
    stored_kind, schema, payload = stored
    if stored_kind != kind or type(schema) is not int:
        return False
    if isinstance(payload, str):  # a hand-edited TEXT column: a read decodes its text
        payload = payload.encode()
    if not isinstance(payload, bytes):
        return False
    try:  # (the re-sent row too: a copy's stored= row is the caller's bytes)
        theirs, mine = decode_rows([(0, 0, schema, payload, ""), (0, 0, *sent, "")], get_blob)
    except (InvalidEvent, IntegrityError):
        return False
    return theirs.event == mine.event
