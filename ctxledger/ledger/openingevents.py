"""The checked opening events of a session: its start, system prompt and tools.

Built from a :class:`~ctxledger.ledger.spec.SessionSpec` without touching the store
(pure): :meth:`ctxledger.ledger.facade.Ledger.start_events` builds them for a new
session and for an import, so every session is checked alike. Split out of the facade
in session 41.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxledger.compressor.config import CompressionConfig
from ctxledger.errors import InvalidInput
from ctxledger.events import Event, SessionStarted, ToolsDeclared
from ctxledger.ledger.spec import SessionSpec, check_names, checked_tools, prompt_event, with_loop
from ctxledger.limits import check_context_length, check_input_text
from ctxledger.messages import JSON
from ctxledger.tokens import count_tools

__all__ = ["opening_events"]


def opening_events(
    sid: str,
    spec: SessionSpec,
    config: CompressionConfig,
    event_fields: Callable[[str], dict[str, Any]],
) -> list[Event]:
    """The checked opening events of session `sid` (``spec.session_id`` is ignored), each
    with the fields `event_fields` gives; a context length not in `spec` is `config`'s."""
    model, system_prompt, tools, encoding = (
        spec.model,
        spec.system_prompt,
        spec.tools,
        spec.encoding,
    )
    check_names(spec)
    ctx = spec.context_length  # 0 is out of range, not a request for the default
    if ctx is None:
        ctx = config.context_length
    if ctx is None:
        raise InvalidInput(
            "context_length must be an integer ≥ 1024 (got None); pass --context-length "
            "or set context_length in the config"
        )
    ctx = check_context_length(ctx)
    if system_prompt is not None:
        check_input_text(system_prompt, "system_prompt")
    tool_list: list[JSON] = checked_tools(tools)
    events: list[Event] = [
        SessionStarted(
            **event_fields(sid),
            model=model,
            context_length=ctx,
            parent_session_id=spec.parent_session_id,
            reason=spec.reason,
            title=spec.title,
            source=spec.source,
            encoding=encoding,
            config=with_loop(config.to_snapshot(), spec.loop),
        )
    ]
    if system_prompt is not None:
        events.append(prompt_event(event_fields(sid), system_prompt, spec.system_role, encoding))
    if tool_list:
        tokens = count_tools(tool_list, encoding)
        events.append(ToolsDeclared(**event_fields(sid), tools=tool_list, tokens=tokens))
    return events
