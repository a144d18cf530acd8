"""The proxy's request headers: the session family a turn belongs to
(``X-Ctxledger-Session``, else the stable key of its system prompt and first message)
and the context window it states (``X-Ctxledger-Context-Length``).

Split from :mod:`ctxledger.server.proxy` (which re-exports :data:`SESSION_HEADER`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

from ctxledger.errors import InvalidInput
from ctxledger.integers import ascii_int, quoted_short
from ctxledger.limits import check_context_length
from ctxledger.server.formats import ClientTurn
from ctxledger.server.history import stable_key
from ctxledger.server.routing import check_session_id

if TYPE_CHECKING:
    from ctxledger.server.state import ServerState

__all__ = ["CONTEXT_HEADER", "SESSION_HEADER", "context_length_of", "family_of"]

SESSION_HEADER = "x-ctxledger-session"
CONTEXT_HEADER = "x-ctxledger-context-length"


def family_of(request: Request, turn: ClientTurn) -> str:
    """The session family of a request: ``X-Ctxledger-Session``, else the stable key."""
    header = request.headers.get(SESSION_HEADER)
    if header is None:
        return stable_key(turn.system_prompt, turn.messages)
    return check_session_id(header.strip(), SESSION_HEADER)


def context_length_of(request: Request, state: ServerState) -> int:
    raw = request.headers.get(CONTEXT_HEADER)
    if raw is None:
        return state.context_length
    value = ascii_int(raw)  # no digit cap of its own: the check below bounds it
    if value is None:
        raise InvalidInput(f"{CONTEXT_HEADER} must be an integer, got {quoted_short(raw)}")
    return check_context_length(value, CONTEXT_HEADER)
