"""The record of re-used tool-call ids an append repaired (``Ledger.check_messages``):
the ``ToolCallIdsRepaired`` event written in the same append, and the warning each
repair logs on the ``ctxledger`` logger."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, get_args, get_type_hints

from ctxledger.errors import InvalidInput
from ctxledger.events import CallIdRepairEntry, ToolCallIdsRepaired
from ctxledger.integers import shown
from ctxledger.ledger.eventcheck import listed
from ctxledger.messages import CallIdRepair

_log = logging.getLogger("ctxledger")

#: what made a batch's repairs: an append, or an import (the event's own Literal)
SOURCES: tuple[str, ...] = get_args(get_type_hints(ToolCallIdsRepaired)["source"])


def repair_event(
    fields: dict[str, Any],
    repairs: Sequence[CallIdRepair],
    message_ids: Sequence[str] | Mapping[int, str],
    source: str,
    *,
    quiet: bool = False,
) -> ToolCallIdsRepaired:
    """The event recording `repairs` of a batch whose messages got `message_ids`, with
    the event `fields` of its session (``Ledger.event_fields``); each repair logged as a
    warning, or at debug level when `quiet` (a what-if's scratch ledger replaying a
    recorded chain: the recording warned of its own repairs, and the scratch session a
    warning would name is no session of the user's)."""
    check_repairs(repairs, message_ids, source)
    session_id = fields["session_id"]
    level = logging.DEBUG if quiet else logging.WARNING
    for r in repairs:
        _log.log(level, "session %s: %s", session_id, r.describe(message_ids[r.index]))
    return ToolCallIdsRepaired(
        **fields,
        repairs=[
            CallIdRepairEntry(
                message_id=message_ids[r.index],
                call_index=r.call_index,
                original=r.original,
                replacement=r.replacement,
            )
            for r in repairs
        ],
        source=source,  # type: ignore[arg-type]
    )


def check_repairs(repairs: object, message_ids: object, source: object) -> None:
    """InvalidInput naming what is wrong unless `repairs` is a list of ``CallIdRepair``
    (as ``repair_call_ids`` makes them) each naming a message `message_ids` holds, and
    `source` is ``append`` or ``import`` (a wrong one was an AttributeError, a KeyError,
    or an event of another shape appended to the log)."""
    if source not in SOURCES:
        raise InvalidInput(f"source must be one of {', '.join(SOURCES)}, got {shown(source)}")
    made = listed(repairs, "repairs")
    if not isinstance(message_ids, Mapping | Sequence) or isinstance(
        message_ids, str | bytes | bytearray
    ):
        raise InvalidInput(
            f"message_ids must be a list of message ids or a mapping of indices to them, "
            f"got {type(message_ids).__name__}"
        )
    for i, r in enumerate(made):
        problem = _problem(r, message_ids)
        if problem is not None:
            raise InvalidInput(f"repairs[{i}] {problem}")


def _problem(r: object, message_ids: Any) -> str | None:
    if not isinstance(r, CallIdRepair):
        return f"must be a CallIdRepair, got {type(r).__name__}"
    if type(r.index) is not int or not (r.call_index is None or type(r.call_index) is int):
        return f"has an index that is not an integer: {shown(r.index)}, {shown(r.call_index)}"
    if not (isinstance(r.original, str) and isinstance(r.replacement, str)):
        return "has an id that is not text"
    mapped = isinstance(message_ids, Mapping)
    if not (r.index in message_ids if mapped else 0 <= r.index < len(message_ids)):
        return f"names message {r.index}, which message_ids does not hold"
    if not isinstance(message_ids[r.index], str):
        return f"names message {r.index}, whose id is not text: {shown(message_ids[r.index])}"
    return None


__all__ = ["SOURCES", "check_repairs", "repair_event"]
