"""Whether an append is a re-send of one already written: both stores ask this before
they write (a client that lost the answer to its append sends the same batch again).

Kept apart so the SQLite and PostgreSQL stores judge a re-send by one rule; each
store only says where an event id is stored and what its row holds (SQLite one row at
a time, PostgreSQL from one query for the whole append).

A re-send is the same events: a stored id whose row holds another kind, schema or
payload is refused. (Before session 38 any row with the id was taken as the re-send, so
an append whose events merely re-used stored ids answered success and wrote nothing:
the state API's ``Idempotency-Key`` relies on the refusal, see ``server/idempotency``.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxledger.errors import DuplicateEventError
from ctxledger.eventstore.base import PreparedBatch
from ctxledger.eventstore.rows import shown

__all__ = ["StoredAs", "already_stored", "as_stored"]

#: a stored row as `stored_in` answers it: (stream name, kind, schema, payload), each as
#: stored (a stream name may be anything, even NULL on a hand-edited row: compared as
#: stored, never as its str())
StoredAs = tuple[object, object, object, object]


def as_stored(value: object) -> object:
    """A payload column's value to compare: bytes as bytes (a driver may answer a
    memoryview), any other type as it is (SQLite keeps whatever a hand edit put in the
    column, TEXT say): it then compares unequal, never a TypeError from ``bytes()``."""
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else value


def already_stored(
    batches: Sequence[PreparedBatch], stored_in: Callable[[str], StoredAs | None]
) -> bool:
    """True when every event is already stored as sent (a re-send); False when none is.

    `stored_in(event_id)` is the row holding that id as (stream name, kind, schema,
    payload), as stored, or None. Raises DuplicateEventError when only some are, or
    one lives in another stream or holds another event.
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
                    f"event id {event_id!r} is already stored in stream {shown(where)}, not "
                    f"{batch.stream!r}; give every new event a fresh id"
                )
            if stored != [kind, schema, bytes(payload)]:
                raise DuplicateEventError(
                    f"event id {event_id!r} is already stored in stream {batch.stream!r} "
                    "holding another event; a re-send must be the same events, byte for "
                    "byte; give every new event a fresh id"
                )
            found = found or event_id
    if found is not None and missing is not None:
        raise DuplicateEventError(
            f"this append mixes stored event ids ({found!r}) with new ones ({missing!r}): "
            "re-send exactly the batch that was written, or give new events fresh ids"
        )
    return found is not None
