"""A session's system prompt changed mid-session (a LangChain ``dynamic_prompt``, a
prompt edited between runs): recorded as a ``SystemPromptSet`` after the start.

The event is the one a session's start writes; the projections fold it wherever it
stands (:mod:`ctxledger.projections.transcript`), so token accounting, ``api_messages``,
preflight and a compaction's continuation use the current prompt. A what-if replays it
as a :class:`~ctxledger.analysis.history.SystemStep` at its position.

Only a prompt that differs from the session's current one is written: a dynamic prompt
that gives the same text each call writes nothing. The text is checked as a start's
``system_prompt`` is (a string of valid Unicode), and against the input limit; nothing
is appended on bad input.
"""

from __future__ import annotations

from typing import Any

from ctxledger.errors import InvalidInput
from ctxledger.events import SystemPromptSet
from ctxledger.eventstore.base import AppendRequest
from ctxledger.ledger.facade import Ledger
from ctxledger.limits import check_text, check_unicode, max_input_bytes
from ctxledger.tokens import count_message

__all__ = ["set_system_prompt"]


def set_system_prompt(ledger: Ledger, session_id: str, text: Any) -> bool:
    """Record `text` as the live session's system prompt; False (nothing written) when it
    is already the current one. ``InvalidInput`` for a text that is not a string of
    valid Unicode, ``SessionEndedError`` for an ended session."""
    text = check_text(text, "system_prompt")
    view = ledger.live_session(session_id)
    if view.system_prompt == text:
        return False  # checked when it was written (the hot path of a per-call prompt)
    check_unicode(text, "system_prompt")
    if len(text) > max_input_bytes():
        raise InvalidInput(
            f"system_prompt is {len(text):,} characters, over the input limit of "
            f"{max_input_bytes():,} bytes (CTXLEDGER_MAX_INPUT_BYTES)"
        )
    tokens = count_message({"role": "system", "content": text}, view.encoding)
    event = SystemPromptSet(**ledger.event_fields(session_id), text=text, tokens=tokens)
    ledger.append([AppendRequest(session_id, [event], ledger.version(session_id))])
    return True
