"""A session's system prompt changed mid-session (a LangChain ``dynamic_prompt``, a
prompt edited between runs): recorded as a ``SystemPromptSet`` after the start.

The event is the one a session's start writes; the projections fold it wherever it
stands (:mod:`ctxledger.projections.transcript`), so token accounting, ``api_messages``,
preflight and a compaction's continuation use the current prompt. A what-if replays it
as a :class:`~ctxledger.analysis.history.SystemStep` at its position.

Only a prompt that differs from the session's current one is written: a dynamic prompt
that gives the same text each call writes nothing. The compaction note is the ledger's
(:func:`held_prompt`): a caller's text is taken without it, and the note is kept when
the current prompt has it, so a change on a compacted chain keeps the note, and a
replay under another config puts it where its own compactions did. The text is checked
as a start's ``system_prompt`` is (a string of valid Unicode within the input limit,
counted in UTF-8 bytes); nothing is appended on bad input.
"""

from __future__ import annotations

from typing import Any

from ctxledger.compressor import markers
from ctxledger.events import SystemPromptSet
from ctxledger.eventstore.base import AppendRequest
from ctxledger.ledger.facade import Ledger
from ctxledger.ledger.spec import prompt_event
from ctxledger.limits import check_input_text, check_text
from ctxledger.messages import check_system_role

__all__ = ["held_prompt", "role_change", "set_system_prompt"]


def held_prompt(current: str | None, text: str) -> str:
    """The prompt the ledger holds for a caller's `text` when its `current` one is
    `current`: `text` without a compaction note, with the note added back when `current`
    ends with it as a compaction writes it (a compacted chain; the note's wording inside
    a prompt is the prompt's own)."""
    base = markers.strip_system_note(text)
    if current is not None and markers.strip_system_note(current) != current:
        return markers.add_system_note(base)
    return base


def set_system_prompt(ledger: Ledger, session_id: str, text: Any, role: object = None) -> bool:
    """Record `text` (see :func:`held_prompt`) in `role` (``system`` or ``developer``;
    None: the current prompt's) as the live session's system prompt; False (nothing
    written) when it is already the current one in that role. ``InvalidInput`` for a
    role that is neither, for a text that is not a string of valid Unicode or is over
    the input limit, ``SessionEndedError`` for an ended session."""
    view = ledger.live_session(session_id)
    role = view.system_role if role is None else check_system_role(role, "role")
    text = held_prompt(view.system_prompt, check_text(text, "system_prompt"))
    if view.system_prompt == text and view.system_role == role:
        return False  # checked when it was written (the hot path of a per-call prompt)
    check_input_text(text, "system_prompt")
    event = prompt_event(ledger.event_fields(session_id), text, role, view.encoding)
    ledger.append([AppendRequest(session_id, [event], ledger.version(session_id))])
    return True


def role_change(ledger: Ledger, session_id: str, role: str | None) -> list[SystemPromptSet]:
    """The event recording the live session's prompt (its text as held) in `role` when
    it holds it in the other; none when `role` is None, the session has no prompt, or it
    holds it in `role` already. Built for a writer that appends it with other events in
    one atomic append (a proxied turn whose client changed the prompt's role)."""
    if role is None:  # (every append asks: nothing read then)
        return []
    view = ledger.live_session(session_id)
    if view.system_prompt is None or view.system_role == role:
        return []
    return [prompt_event(ledger.event_fields(session_id), view.system_prompt, role, view.encoding)]
