"""What a ledger checks before it appends events it did not build itself.

The log is append-only: an event that is stored but does not decode (a field of the
wrong type, ``switch_model(sid, 123, 8192)``) would make every later open of the
ledger fail, with no way to repair it. So every event a caller hands in is encoded
and decoded back as its own type before any I/O, and refused with ``InvalidInput``
if that fails; a message id must be new, unless the event is the very one that stored
it (the same event id: a re-send, which the store answers as a no-op). A ``MessageAppended``'s message is checked by the message policy
(``Ledger.check_messages``), so its other fields are round-tripped with an empty
message: decoding a 10 MB message back would cost more than the append.

Every append, its own events too, must also name sessions and messages that exist
(:func:`check_references`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ctxledger.errors import InvalidInput, UnknownMessage, UnknownSession
from ctxledger.events import (
    MessageAppended,
    MessagePinned,
    ReplyWithdrawn,
    SessionStarted,
    SessionSwitched,
    ToolOutputPersisted,
    encode_event,
)
from ctxledger.eventstore.base import AppendRequest, EventStore
from ctxledger.integers import printable, shown
from ctxledger.projections.stored import SessionView, StoredMessage

__all__ = ["check_decodable", "check_references", "listed"]


def listed(items: Any, what: str, of: type | None = None) -> list[Any]:
    """`items` as a list when it is a sequence (of `of`s; a deque too, not text or bytes),
    else InvalidInput naming `what` (events or repairs given as None were a TypeError)."""
    if not isinstance(items, Sequence) or isinstance(items, str | bytes | bytearray):
        raise InvalidInput(f"{what} must be a list, got {type(items).__name__}")
    if of is not None and not all(isinstance(item, of) for item in items):
        raise InvalidInput(f"{what} must be a list of {of.__name__}")
    return list(items)


def _stored_by(store: EventStore | None, stored: StoredMessage) -> str | None:
    """The id of the event that appended a folded message, read from the log at its
    seq (asked only on a clash), or None when it is not a stored ``MessageAppended``."""
    if store is None or stored.seq <= 0:
        return None
    found = store.read_at([stored.seq])
    if not found or type(found[0].event) is not MessageAppended:
        return None
    return found[0].event.event_id


def check_decodable(
    requests: Sequence[AppendRequest],
    known: Mapping[str, StoredMessage],
    store: EventStore | None = None,
) -> None:
    """Raise InvalidInput unless every event of `requests` would be read back as written
    and every appended message has a new id (one not in `known`, the ledger's messages,
    nor twice in the append: a repeated id would replace another message's text).

    A known id is allowed for the very event that stored it (read from `store`): event
    ids are idempotency keys, so re-sending a batch after an error that left it stored
    is a no-op, not a clash; the store refuses a batch mixing stored and new events."""
    fresh: set[str] = set()
    for request in requests:
        if request.stored is not None:
            continue  # verbatim copies of stored rows: checked by the store's reader
        for event in request.events:
            name = type(event).__name__
            if type(event) is MessageAppended:
                if not isinstance(event.message_id, str) or not event.message_id:
                    raise InvalidInput(
                        f"a message id is non-empty text, got {shown(event.message_id)}; "
                        "nothing was appended"
                    )
                if event.message_id in fresh or (
                    event.message_id in known
                    and _stored_by(store, known[event.message_id]) != event.event_id
                ):
                    raise InvalidInput(
                        f"message id {shown(event.message_id)} is already taken; give every "
                        "message a new id (nothing was appended)"
                    )
                fresh.add(event.message_id)
                if not isinstance(event.message, dict):
                    raise InvalidInput(
                        f"a message is a JSON object, got {type(event.message).__name__}"
                    )
                event = msgspec.structs.replace(event, message={})  # its other fields
            try:
                msgspec.json.decode(encode_event(event), type=type(event))
            # (RecursionError: a field holding itself, or nesting thousands of levels)
            except (
                msgspec.MsgspecError,
                TypeError,
                ValueError,
                OverflowError,
                RecursionError,
            ) as exc:
                raise InvalidInput(  # (msgspec's text quotes a bad value whole: cut it)
                    f"{name} has a field of the wrong type or value "
                    f"({printable(str(exc)[:300])}); nothing was appended"
                ) from None


def check_references(
    requests: Sequence[AppendRequest], sessions: Mapping[str, SessionView]
) -> None:
    """Events must name a session that exists in `sessions` (or starts in this append)
    and messages it holds (or that this append brings).

    The log is immutable, so what it would not fold must never get in.
    """
    # a continuation starting in this append holds its switch's layout
    incoming = {e.new_session_id: {x.message_id for x in e.layout} for r in requests
                for e in r.events if isinstance(e, SessionSwitched)}  # fmt: skip
    for request in requests:
        view = sessions.get(request.stream)
        events = list(request.events)
        if view is None and not (events and isinstance(events[0], SessionStarted)):
            raise UnknownSession(
                f"no session {shown(request.stream)}; a new session must begin with SessionStarted"
            )
        batch = incoming.get(request.stream, set())
        batch = batch | {e.message_id for e in events if isinstance(e, MessageAppended)}
        seen_message = False  # (a replay attaches a withdrawal to a message read before it)
        for e in events:
            seen_message = seen_message or isinstance(e, MessageAppended)
            if isinstance(e, ReplyWithdrawn):
                _check_withdrawal(e.message_ids, view, request.stream)
                if not seen_message:
                    raise InvalidInput(
                        "a withdrawal goes in the append of the messages sent instead of "
                        "the reply, after one of them, and this one holds none before it; "
                        "nothing was appended"
                    )
                continue
            if isinstance(e, ToolOutputPersisted | MessagePinned):
                named = [] if e.message_id in batch else [e.message_id]
            else:
                continue
            for mid in named:
                if view is None or mid not in view.live:
                    raise UnknownMessage(
                        f"message {shown(mid)} is not in the live view of {shown(request.stream)}"
                    )


def _check_withdrawal(ids: Sequence[str], view: SessionView | None, stream: str) -> None:
    """A withdrawal names, once each and in order, the messages that end the session's
    live view (a reply the client went on without): folds and the caches keyed on a
    view's length and last id (:func:`~ctxledger.projections.stored.grew_from`) rely on
    a view losing only its end."""
    live = view.live if view is not None else []
    if ids and len(set(ids)) == len(ids) and live[max(0, len(live) - len(ids)) :] == list(ids):
        return
    for mid in ids:
        if mid not in live:
            raise UnknownMessage(f"message {shown(mid)} is not in the live view of {shown(stream)}")
    got = ", ".join(shown(mid) for mid in ids) or "none"
    raise UnknownMessage(
        f"a withdrawal names the last messages of the live view of {shown(stream)}, "
        f"once each and in order (got {got}); nothing was appended"
    )
