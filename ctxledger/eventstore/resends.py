"""Whether an append is a re-send of one already written: both stores ask this before
they write (a client that lost the answer to its append sends the same batch again).

Kept apart so the SQLite and PostgreSQL stores judge a re-send by one rule; each
store only says where an event id is stored (SQLite one row at a time, PostgreSQL
from one query for the whole append).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ctxledger.errors import DuplicateEventError
from ctxledger.eventstore.base import PreparedBatch
from ctxledger.eventstore.rows import shown

__all__ = ["NOT_STORED", "already_stored"]

#: what `stored_in` answers for an id no row holds (a stream name may be anything,
#: even NULL on a hand-edited row: compared as stored, never as its str())
NOT_STORED = object()


def already_stored(batches: Sequence[PreparedBatch], stored_in: Callable[[str], object]) -> bool:
    """True when every event id is already in its stream (a re-send); False when none is.

    `stored_in(event_id)` is the stream name on the row holding that id, as stored (a
    NULL one is None), or NOT_STORED. Raises DuplicateEventError when only some are, or
    one lives in another stream.
    """
    found: str | None = None
    missing: str | None = None
    for batch in batches:
        for event_id, *_ in batch.rows:
            where = stored_in(event_id)
            if where is NOT_STORED:
                missing = missing or event_id
            elif where != batch.stream:
                raise DuplicateEventError(
                    f"event id {event_id!r} is already stored in stream {shown(where)}, not "
                    f"{batch.stream!r}; give every new event a fresh id"
                )
            else:
                found = found or event_id
    if found is not None and missing is not None:
        raise DuplicateEventError(
            f"this append mixes stored event ids ({found!r}) with new ones ({missing!r}): "
            "re-send exactly the batch that was written, or give new events fresh ids"
        )
    return found is not None
