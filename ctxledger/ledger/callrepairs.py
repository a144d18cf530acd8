"""The record of re-used tool-call ids an append repaired (``Ledger.check_messages``):
the ``ToolCallIdsRepaired`` event written in the same append, and the warning each
repair logs on the ``ctxledger`` logger."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ctxledger.events import CallIdRepairEntry, ToolCallIdsRepaired
from ctxledger.messages import CallIdRepair

_log = logging.getLogger("ctxledger")


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


__all__ = ["repair_event"]
